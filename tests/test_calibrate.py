"""Calibration: parameter recovery, extrapolation from 2 points, seed leave-one-out, bad input."""

import json
from pathlib import Path

import numpy as np
import pytest

from specsim.analysis.calibrate import Point, apply_parameters, base_scenario, fit, parse_point, validate
from specsim.physics.cycle import verify_breakdown
from specsim.physics.params import scenario_params

TOKENS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]
ROOT = Path(__file__).resolve().parents[1]


def _synthetic(sc, truth, noise=0.01, seed=0):
    true_sc = apply_parameters(sc, truth)
    p = scenario_params(true_sc)
    ms = np.broadcast_to(verify_breakdown(p, num_draft_tokens=np.array(TOKENS, float))["total"], (len(TOKENS),))
    rng = np.random.default_rng(seed)
    return [Point(k, float(m * (1 + noise * rng.standard_normal()))) for k, m in zip(TOKENS, ms)], ms


@pytest.mark.parametrize(
    "model,gpu,tp,graph,engine",
    [("qwen3-30b-a3b", "h100", 1, True, "sglang"), ("kimi-k2.5", "h200", 8, False, "sglang"),
     ("llama-3.1-70b", "h100", 8, True, "sglang"), ("llama-3.1-8b", "h200", 1, None, "hf-transformers"),
     ("qwen3-30b-a3b", "h200", 1, None, "hf-transformers"), ("deepseek-v3", "h200", 8, True, "vllm")],
)
def test_two_points_extrapolate_1_to_64(model, gpu, tp, graph, engine):
    """Truth differs from the priors; calibrated on k=3,6 only, the physics carries the curve."""
    sc = base_scenario(model, gpu, tp, graph=graph, engine=engine)
    truth = {"kernel_floor_us": 4.0, "moe_mem_efficiency": 0.35, "mem_efficiency": 0.7, "eager_launch_us": 12.0}
    pts, true_ms = _synthetic(sc, truth)
    res = fit(sc, [p for p in pts if p.tokens in (3, 6)])
    p = scenario_params(res.scenario)
    pred = np.broadcast_to(verify_breakdown(p, num_draft_tokens=np.array(TOKENS, float))["total"], (len(TOKENS),))
    err = np.abs(pred / true_ms - 1)
    assert np.median(err) <= 0.05
    assert err.max() <= 0.15


def test_recovers_known_parameters_from_many_points():
    sc = base_scenario("qwen3-30b-a3b", "h100", 1)
    truth = {"kernel_floor_us": 4.5, "moe_mem_efficiency": 0.4}
    pts, _ = _synthetic(sc, truth, noise=0.005)
    res = fit(sc, pts, names=["kernel_floor_us", "moe_mem_efficiency"])
    assert res.values["kernel_floor_us"] == pytest.approx(4.5, rel=0.1)
    assert res.values["moe_mem_efficiency"] == pytest.approx(0.4, rel=0.1)
    assert all(abs(r["error_pct"]) < 3 for r in res.residuals)


def test_band_contains_curve_and_widens_away_from_data():
    import specsim

    sc = base_scenario("kimi-k2.5", "h200", 8, graph=False)
    res = fit(sc, [Point(3, 25.6), Point(6, 28.7)])
    curve = specsim.verify_ms([3, 64], res.scenario)
    lo, hi = curve.verify_ms_low, curve.verify_ms_high
    for v, l, h in zip(curve.verify_ms, lo, hi):
        assert l < v < h
    assert (hi[1] - lo[1]) / curve.verify_ms[1] > (hi[0] - lo[0]) / curve.verify_ms[0]


def test_seed_leave_one_out():
    # one point cannot tell a host-bound eager verify from a GPU-bound one: from the presets' priors the fit raises the
    # host's launch cost, which leaves 3 and 6 tokens equal (measured 25.6 / 28.7 ms): 10.7 % and 11.9 % off
    for fit_on, other in ((3, 6), (6, 3)):
        v = validate("kimi-k2.5-seed", [fit_on])
        row = next(r for r in v.rows if r["tokens"] == other)
        assert abs(row["error_pct"]) < 12.5


def test_unpinned_parameters_warned():
    sc = base_scenario("kimi-k2.5", "h200", 8)
    res = fit(sc, [Point(3, 20.0), Point(6, 23.0)])
    assert any("not pinned down" in w for w in res.warnings)


@pytest.mark.parametrize("text", ["0=3", "-1=3", "3=0", "3=-2", "3", "a=b"])
def test_bad_points(text):
    from specsim.errors import SpecsimError

    with pytest.raises(SpecsimError):
        parse_point(text)


def test_cli_calibrate_round_trip(run_cli, tmp_path):
    out = tmp_path / "cal.json"
    code, stdout, err = run_cli("calibrate", "--model", "kimi-k2.5", "--gpu", "h200", "--tp", "8", "--eager",
                                "--point", "3=25.6", "--point", "6=28.7", "--out", str(out))
    assert code == 0, err
    assert "moe_mem_efficiency" in stdout and "residual" in stdout
    code, stdout, _ = run_cli("verify", "--scenario", str(out), "--tokens", "1,2,4,8,16,32,64", "--json")
    d = json.loads(stdout)
    assert len(d["verify_ms_low"]) == 7 and all(l < v < h for l, v, h in zip(d["verify_ms_low"], d["verify_ms"], d["verify_ms_high"]))
    code, stdout, _ = run_cli("predict", "--scenario", str(out), "--steps", "2", "--accept", "2.1", "--json")
    assert code == 0


@pytest.mark.parametrize(
    "extra,field",
    [(["--point", "0=3"], "point"), (["--point", "3=0"], "point"), (["--point", "3=-1"], "point"),
     (["--from-log", "/nonexistent.log", "--point", "3=20"], "nonexistent")],
)
def test_cli_calibrate_bad_input_writes_nothing(run_cli, tmp_path, extra, field):
    out = tmp_path / "cal.json"
    code, _, err = run_cli("calibrate", "--model", "kimi-k2.5", "--gpu", "h200", "--tp", "8", *extra, "--out", str(out))
    assert code == 2 and field in err and "Traceback" not in err
    assert not out.exists()


def test_cli_calibrate_unsupported_model_type(run_cli, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "gpt_neox"}))
    out = tmp_path / "cal.json"
    code, _, err = run_cli("calibrate", "--model", str(cfg), "--gpu", "h100", "--tp", "1", "--point", "3=5", "--out", str(out))
    assert code == 2 and "model_type" in err
    assert not out.exists()


def test_cli_validate_max_mape(run_cli):
    code, out, _ = run_cli("validate", "kimi-k2.5-seed", "--fit", "3")
    assert code == 0 and "MAPE" in out
    code, _, err = run_cli("validate", "kimi-k2.5-seed", "--fit", "3", "--max-mape", "0.01")
    assert code == 1 and "MAPE" in err


def test_bootstrap_band_is_deterministic_and_brackets_the_fit():
    sc = base_scenario("kimi-k2.5", "h200", 8, graph=False)
    a = fit(sc, [Point(3, 25.6), Point(6, 28.7)], bootstrap=12, progress=False)
    b = fit(sc, [Point(3, 25.6), Point(6, 28.7)], bootstrap=12, progress=False)
    assert np.allclose(a.cov_log, b.cov_log)
    import specsim

    curve = specsim.verify_ms([3, 32], a.scenario)
    assert all(lo < v < hi for lo, v, hi in zip(curve.verify_ms_low, curve.verify_ms, curve.verify_ms_high))


def test_bootstrap_needs_enough_resamples():
    from specsim.errors import SpecsimError

    with pytest.raises(SpecsimError):
        fit(base_scenario("kimi-k2.5", "h200", 8), [Point(3, 25.6)], bootstrap=3)


def test_cli_calibrate_from_log_uses_cycles_and_acceptance(run_cli, tmp_path):
    from pathlib import Path

    log = Path(__file__).parent / "fixtures" / "ingest" / "bench_speculative.jsonl"
    out = tmp_path / "cal.json"
    code, stdout, err = run_cli("calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1",
                                "--from-log", str(log), "--point", "4=9.5", "--out", str(out), "--json")
    assert code == 0, err
    d = json.loads(stdout)
    assert "host_per_cycle_ms" in d["parameters"]
    assert any(p["kind"] == "cycle" for p in d["points"])
    sc = json.loads(out.read_text())
    assert sc["acceptance"]["source"].startswith("ingested from")


def test_parameter_sets_evaluated_together_equal_each_alone():
    """The Jacobian's columns come from one flat evaluation of k parameter sets (verify points at several
    batches and contexts, the baseline step and measured cycles of two tree widths): each row equals that
    set evaluated alone."""
    import numpy as np

    from specsim.analysis import calibrate as cal
    from specsim.physics.params import scenario_params

    sc = base_scenario("kimi-k2.5", "h200", 8)
    p = scenario_params(sc)
    pts = [Point(3, 25.6), Point(6, 28.7, batch=4), Point(2, 20.0, ctx=8192)]
    cycles = [{"steps": 2, "topk": 1, "batch": 1, "accept_length": 2.1, "cycle_ms": 22.0},
              {"steps": 3, "topk": 4, "batch": 8, "num_draft_tokens": 8, "accept_length": 2.6, "cycle_ms": 30.0},
              {"steps": 4, "batch": 2, "accept_length": 2.9, "cycle_ms": 25.0},  # topk not given: a chain
              {"steps": 3, "topk": 2, "batch": 64, "num_draft_tokens": 6, "accept_length": 2.4, "cycle_ms": 40.0}]
    names = tuple(cal.free_parameters(sc, len(pts), True, True))
    rng = np.random.default_rng(1)
    sets = [tuple(cal._get(p, n) * rng.uniform(0.5, 2.0) for n in names) for _ in range(3)]
    q = dict(p, **{n: np.array([s[j] for s in sets]) for j, n in enumerate(names)})
    together = cal._model_values(q, pts, 11.3, cycles, names, sets=len(sets))
    alone = [cal._model_values(dict(p, **dict(zip(names, s))), pts, 11.3, cycles) for s in sets]
    assert together.shape == (3, len(pts) + 1 + len(cycles))
    assert np.allclose(together, np.array(alone), rtol=1e-12, atol=0)
    assert len({tuple(r) for r in together.round(9)}) == 3  # the sets really differ


def test_points_given_twice_are_fitted_once_or_refused_naming_both(run_cli, run_json, tmp_path):
    """A forward measured twice: with the same time it is one measurement (fitted once, said so, the same fit as
    without the repeat, not a second point to free a parameter with); with another time the one-line error names
    both and the forward, and nothing is written. Same batch and tokens at another context is another forward."""
    base = ("calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1")
    once = run_json(*base, "--point", "4=7.6", "--point", "8=8.0", "--out", str(tmp_path / "a.json"))
    code, out, err = run_cli(*base, "--point", "4=7.6", "--point", "4=7.6", "--point", "8=8.0", "--point", "4=7.6",
                             "--out", str(tmp_path / "b.json"), "--json")
    twice = json.loads(out)
    assert code == 0 and twice["parameters"] == once["parameters"]
    assert "2 measured point(s) given twice with the same time were fitted once" in " ".join(out.split())
    code, out, err = run_cli(*base, "--point", "4=7.6", "--point", "4=7.7", "--out", str(tmp_path / "c.json"))
    assert code == 2 and err == ("error: point: got '4=7.7'; contradicts 4=7.6, the same forward (tokens 4, batch 1, "
                                 "ctx 2048) measured twice; give one time per forward (average repeated runs first)\n")
    assert not (tmp_path / "c.json").exists()


def test_a_dataset_with_a_forward_measured_twice_is_refused_or_scored_once(run_cli, run_json, tmp_path):
    src = ROOT / "calibration" / "datasets" / "h100-llama-3.1-8b-forwards.json"
    d = json.loads(src.read_text())
    same = {**d, "points": d["points"] + d["points"][:40]}
    (tmp_path / "same.json").write_text(json.dumps(same))
    assert run_json("validate", str(tmp_path / "same.json"))["points"] == run_json("validate", str(src))["points"]
    other = {**d, "points": d["points"] + [dict(d["points"][7], ms=d["points"][7]["ms"] * 1.1)]}
    (tmp_path / "other.json").write_text(json.dumps(other))
    code, out, err = run_cli("validate", str(tmp_path / "other.json"))
    p = d["points"][7]
    assert code == 2 and err.startswith(f"error: dataset other.json: points: got '{p['tokens']}=") and err.count("\n") == 1
    assert f"(tokens {p['tokens']}, batch {p['batch']}, ctx {p['ctx']}) measured twice" in err
