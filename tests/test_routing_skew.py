"""Routing skew across a MoE's experts (``target.moe.routing_skew``, c): the distinct-experts formula's limits,
the public decode traces it reproduces, the prior's rule, a held-out batch curve, datasets of random routers, CLI."""

import json
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsim.errors import SpecsimError
from specsim.io.presets import data_root
from specsim.physics.moe import ROUTING_SKEW_PRIOR, expected_distinct_experts, max_routing_skew, routing_skew_of


def _dataset(name: str) -> dict:
    return json.loads(data_root("calibration").joinpath("datasets", name).read_text(encoding="utf-8"))


def _uniform(e, k, n):
    return e * (1.0 - (1.0 - k / e) ** n)


@pytest.mark.parametrize("e,k", [(64, 4), (128, 8), (256, 8), (384, 8), (8, 2)])
def test_zero_skew_is_uniform_routing(e, k):
    for n in (1, 2, 6.5, 32, 192, 4096):
        assert expected_distinct_experts(e, k, n, 0.0) == pytest.approx(_uniform(e, k, n), rel=1e-12)
    got = expected_distinct_experts(np.full(3, float(e)), k, np.array([1.0, 32.0, 192.0]), np.zeros(3))
    assert got == pytest.approx([_uniform(e, k, n) for n in (1, 32, 192)], rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(e=st.integers(2, 512), frac=st.floats(0.01, 0.5), c=st.floats(0.0, 3.0), n=st.floats(1.0, 5000.0))
def test_invariants(e, frac, c, n):
    k = max(1, int(e * frac))
    one = expected_distinct_experts(e, k, 1.0, c)
    assert one == pytest.approx(k, rel=1e-6)  # one token reads exactly k experts, however skewed the router
    d = expected_distinct_experts(e, k, n, c)
    assert k * (1 - 1e-6) <= d <= min(e, n * k) * (1 + 1e-6)
    assert d <= expected_distinct_experts(e, k, n, 0.0) * (1 + 1e-6)  # skew never reads more than uniform
    assert expected_distinct_experts(e, k, n + 1.0, c) >= d * (1 - 1e-9)  # more tokens, no fewer experts
    vec = expected_distinct_experts(np.array([float(e)]), k, np.array([n]), np.array([c]))
    assert float(vec[0]) == pytest.approx(d, rel=1e-6)  # one formula on floats and on arrays


def test_skew_lowers_a_batch_and_many_tokens_read_every_expert():
    e, k = 64, 4
    batch32 = [expected_distinct_experts(e, k, 32, c) for c in (0.0, 0.5, 1.0, 1.5)]
    assert batch32 == sorted(batch32, reverse=True) and batch32[0] - batch32[-1] > 10
    assert expected_distinct_experts(e, k, 100_000, ROUTING_SKEW_PRIOR) > 0.99 * e


def test_reproduces_the_public_decode_traces():
    """The Beta at each trace's median per-layer CV against the distinct experts of its own measured shares."""
    ds = _dataset("moe-routing-skew.json")
    assert len(ds["traces"]) == 2
    for t in ds["traces"]:
        e, k, c = t["num_experts"], t["experts_per_token"], t["cv_per_layer"]["median"]
        curve = t["distinct_experts_vs_tokens"]
        for n, measured, uniform in zip(curve["tokens"], curve["from_trace"], curve["uniform"]):
            assert expected_distinct_experts(e, k, n, c) == pytest.approx(measured, rel=0.02)
            if n >= 16:  # the traces read well below uniform routing at a batch (Qwen3-30B-A3B: 79 of 128 at 32)
                assert measured < 0.9 * uniform


def test_prior_is_the_median_of_the_real_router_measurements():
    ds = _dataset("moe-routing-skew.json")
    cvs = [t["cv_per_layer"]["median"] for t in ds["traces"]]
    cvs += [s["cv"] for s in ds["load_statistics"] if s.get("in_prior", True)]
    assert len(cvs) == 3
    assert round(statistics.median(cvs), 2) == ROUTING_SKEW_PRIOR == ds["prior"]["routing_skew"]


def _decode_ms(batch: int, skew: float | None = None) -> float:
    from specsim.analysis.build import build_scenario
    from specsim.analysis.predict import verify_ms
    from specsim.analysis.whatif import edit_scenario

    sc = build_scenario(model="glm-4.7-flash", gpu="h100-pcie", tp=1, engine="sglang", batch=batch, ctx=566)
    if skew is not None:
        sc = edit_scenario(sc, lambda d: d["target"]["moe"].update(routing_skew=skew))
    return float(np.asarray(verify_ms([1], sc).verify_ms).ravel()[0])


def test_held_out_moe_decode_growth_with_batch():
    """GLM-4.7-Flash on one H100 PCIe without speculation (real weights, equal 256-token requests, so each wave
    decodes alone): the measured TPOT at 4-32 concurrent requests. Nothing was fitted to it; the prior's skew puts
    every point within 10 % (uniform routing: +16 % at 32) and beats uniform routing over the curve."""
    runs = [r for r in _dataset("run-drain-glm47flash-h100pcie.json")["runs"] if r["run"] == "baseline"]
    errs, uniform = [], []
    for r in runs:
        b = int(r["max_concurrency"])
        if b == 1:
            continue
        errs.append(_decode_ms(b) / r["mean_tpot_ms"] - 1.0)
        uniform.append(_decode_ms(b, 0.0) / r["mean_tpot_ms"] - 1.0)
    assert len(errs) == 4
    assert max(abs(x) for x in errs) < 0.10
    assert np.mean(np.abs(errs)) < 0.6 * np.mean(np.abs(uniform))
    assert uniform[-1] > 0.12  # what uniform routing charged at 32 requests


def test_measured_forwards_of_random_routers_score_uniform():
    from specsim.analysis.calibrate import dataset_routing_skew, dataset_scenario, load_dataset

    d = load_dataset("h200-qwen3-30b-a3b-forwards")
    assert "routing_skew" not in d and dataset_routing_skew(d) == 0.0  # written by specsim measure: random weights
    assert dataset_scenario(d).target.moe.routing_skew == 0.0
    stated = dict(d, routing_skew=0.4)
    assert dataset_scenario(stated).target.moe.routing_skew == 0.4
    real = {k: v for k, v in d.items() if k != "provenance"}  # no measure tool named: real weights, the prior
    assert routing_skew_of(dataset_scenario(real).target.moe) == ROUTING_SKEW_PRIOR


def test_dataset_routing_skew_is_checked(tmp_path):
    from specsim.analysis.calibrate import load_dataset

    d = _dataset("h200-qwen3-30b-a3b-forwards.json")
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(dict(d, routing_skew=7)), encoding="utf-8")
    with pytest.raises(SpecsimError) as exc:
        load_dataset(str(f))
    assert "routing_skew" in str(exc.value) and "[0, 3]" in str(exc.value)


def test_whatif_routing_skew_cli(run_cli):
    code, out, err = run_cli("whatif", "routing", "--model", "glm-4.7-flash", "--gpu", "h100-pcie", "--tp", "1",
                             "--batch", "32", "--skew", "0", "--json")
    assert code == 0, err
    out = json.loads(out)
    assert "c 1.13 -> 0" in out["change"]
    assert out["after"]["baseline_step_ms"] > out["before"]["baseline_step_ms"]  # uniform routing reads more
    for args, field in ((("--model", "glm-4.7-flash", "--skew", "3.5"), "skew"),
                        (("--model", "llama-3.1-8b", "--skew", "1"), "skew"),
                        (("--model", "glm-4.7-flash"), "locality")):
        code, out, err = run_cli("whatif", "routing", *args)
        assert code == 2 and err.startswith(f"error: {field}") and "Traceback" not in err and not out
        assert len(err.strip().splitlines()) == 1


# ---- specsim routing: the skew read from an engine's expert counts ----

def _beta_counts(e: int, k: int, tokens: int, c: float) -> list[int]:
    """Exact per-expert counts of a router whose shares are the Beta(mean k/E, CV c) quantiles (no sampling)."""
    from scipy.stats import beta

    mu = k / e
    nu = (1 - mu) / (c * c * mu) - 1
    p = beta.ppf((np.arange(e) + 0.5) / e, mu * nu, (1 - mu) * nu)
    p = p * (k / p.sum())
    return [int(round(x)) for x in np.minimum(p, 1.0) * tokens]


def _write_csv(path, layers: dict[int, list[int]], extra: str = "") -> None:
    rows = ["layer_id,expert_id,count"] + [f"{lid},{i},{n}" for lid, counts in layers.items()
                                            for i, n in enumerate(counts) if n]
    path.write_text("\n".join(rows) + "\n" + extra, encoding="utf-8")


@pytest.mark.parametrize("c", [0.5, 1.0, 1.4])
def test_routing_reads_back_the_skew_of_known_counts(tmp_path, run_cli, c):
    f = tmp_path / "expert_distribution_rank0_timestamp1.csv"
    _write_csv(f, {lid: _beta_counts(128, 8, 200_000, c) for lid in (1, 2, 3)}, extra="not,a,row\n1,2,-3\n\n")
    code, out, err = run_cli("routing", str(f), "--model", "qwen3-30b-a3b", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["routing_skew"] == pytest.approx(c, abs=0.06) and d["cv_per_layer"]["median"] == pytest.approx(c, abs=0.06)
    assert d["num_experts"] == 128 and d["experts_per_token"] == 8 and d["layers"] == 3
    assert d["rows_skipped"] == 2 and d["fit_max_error_pct"] < 3 and not d["warnings"]
    assert d["tokens_per_layer"] == pytest.approx(200_000, rel=0.01)
    # one dump per TP rank counts the same routing on each: the files add up, the shares (and c) stay
    g = tmp_path / "expert_distribution_rank1_timestamp1.csv"
    g.write_bytes(f.read_bytes())
    code, out2, _ = run_cli("routing", str(f), str(g), "--num-experts", "128", "--top-k", "8", "--json")
    assert code == 0 and json.loads(out2)["routing_skew"] == pytest.approx(d["routing_skew"], abs=1e-6)
    assert json.loads(out2)["tokens_per_layer"] == pytest.approx(2 * d["tokens_per_layer"])


def test_routing_text_json_heat_format_and_a_noisy_dump(tmp_path, run_cli):
    f = tmp_path / "trace.json"
    f.write_text(json.dumps({"k": 4, "n_expert_per_layer": 64,
                             "layers": [{"layer": 0, "heat": _beta_counts(64, 4, 50_000, 0.8)}]}), encoding="utf-8")
    code, out, err = run_cli("routing", str(f))
    assert code == 0, err
    assert "routing skew c = 0.79" in out or "routing skew c = 0.80" in out
    assert "use --routing-skew 0.8" in out and "64 experts, top-4" in out
    thin = tmp_path / "thin.csv"
    _write_csv(thin, {0: _beta_counts(64, 4, 200, 0.8)})
    code, out, _ = run_cli("routing", str(thin), "--model", "glm-4.7-flash")
    assert code == 0 and "warning:" in out and "counting noise" in out  # 12.5 counts an expert


@pytest.mark.parametrize("args,field", [
    (("--top-k", "8"), "expert counts"),  # a directory
    ((), "top-k"),  # k unknown
    (("--model", "llama-3.1-8b"), "model"),
    (("--model", "qwen3-30b-a3b", "--top-k", "8"), "model"),
    (("--num-experts", "16", "--top-k", "8"), "num-experts"),
    (("--top-k", "0"), "top-k"),
])
def test_routing_bad_input_is_one_line(tmp_path, run_cli, args, field):
    f = tmp_path / "d.csv"
    _write_csv(f, {0: _beta_counts(128, 8, 10_000, 1.0)})
    target = str(tmp_path) if field == "expert counts" else str(f)
    code, out, err = run_cli("routing", target, *args)
    assert code == 2 and not out and err.startswith(f"error: {field}") and len(err.strip().splitlines()) == 1
    bad = tmp_path / "bad.csv"
    bad.write_text("layer,expert,n\n0,1,2\n", encoding="utf-8")
    code, _, err = run_cli("routing", str(bad), "--top-k", "2")
    assert code == 2 and "layer_id,expert_id,count" in err


def test_routing_skew_deployment_flag(run_cli):
    base = ("predict", "--model", "glm-4.7-flash", "--gpu", "h200", "--batch", "32", "--accept", "2.5", "--json")
    step = {}
    for c in ("0", "1.13", "2"):
        code, out, err = run_cli(*base, "--routing-skew", c)
        assert code == 0, err
        step[c] = json.loads(out)["baseline_step_ms"]
    code, out, _ = run_cli(*base)
    assert json.loads(out)["baseline_step_ms"] == pytest.approx(step["1.13"], rel=1e-12)  # the prior is the default
    assert step["0"] > step["1.13"] > step["2"]  # a more skewed router: fewer distinct experts a batch
    for flag, value in (("--routing-skew", "3.5"), ("--routing-skew", "nan")):
        code, out, err = run_cli(*base, flag, value)
        assert code == 2 and err.startswith("error: routing-skew") and not out
    code, _, err = run_cli("predict", "--model", "llama-3.1-8b", "--routing-skew", "1")
    assert code == 2 and "no routed experts" in err


def test_the_prior_covers_fine_grained_routers_and_a_router_caps_its_skew(run_cli):
    """The traces are of 128-512 experts: a MoE from 64 experts takes the prior, a coarser one (Mixtral's 8) stays
    uniform until measured; no router takes a c beyond sqrt((E - k) / k), where every expert is taken by all or none."""
    from specsim.analysis.build import build_scenario

    mixtral = "tests/fixtures/hf/mixtral-8x7b-instruct/config.json"
    assert routing_skew_of(build_scenario(model="glm-4.7-flash").target.moe) == ROUTING_SKEW_PRIOR
    assert routing_skew_of(build_scenario(model=mixtral, gpu="h100", tp=2).target.moe) == 0.0
    assert max_routing_skew(8, 2) == pytest.approx(3 ** 0.5) and max_routing_skew(384, 8) == 3.0
    assert expected_distinct_experts(8, 2, 64, max_routing_skew(8, 2)) == pytest.approx(2.0, rel=1e-3)
    for args in (("predict", "--model", mixtral, "--gpu", "h100", "--tp", "2", "--routing-skew", "2"),
                 ("whatif", "routing", "--model", mixtral, "--gpu", "h100", "--tp", "2", "--skew", "1.8")):
        code, out, err = run_cli(*args)
        assert code == 2 and not out and "at most 1.73 for 8 experts, top-2" in err and len(err.splitlines()) == 1
    code, out, err = run_cli("predict", "--model", mixtral, "--gpu", "h100", "--tp", "2", "--routing-skew", "1.7",
                             "--json")
    assert code == 0, err


@pytest.mark.parametrize("body,args,needle", [
    ("layer_id,expert_id,count\n0,0,0\n0,1,0\n", ("--model", "qwen3-30b-a3b"), "error: expert counts: no routed token"),
    ("layer_id,expert_id,count\n0,0,5\n0,1,3\n0,2,3\n", ("--model", "qwen3-30b-a3b"), "error: top-k: got 8"),
])
def test_routing_counts_that_cannot_be_a_router(tmp_path, run_cli, body, args, needle):
    f = tmp_path / "c.csv"
    f.write_text(body, encoding="utf-8")
    code, out, err = run_cli("routing", str(f), *args)
    assert code == 2 and not out and err.startswith(needle) and len(err.strip().splitlines()) == 1


def test_routing_reads_a_spreadsheet_csv_and_skips_odd_digits(tmp_path, run_cli):
    f = tmp_path / "c.csv"
    rows = "\r\n".join(f"0,{i},{n}" for i, n in enumerate(_beta_counts(64, 4, 20_000, 1.0)) if n)
    f.write_bytes(("\ufefflayer_id,expert_id,count\r\n" + rows + "\r\n0,1,\u00b2\r\n").encode("utf-8"))
    code, out, err = run_cli("routing", str(f), "--model", "glm-4.7-flash", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["rows_skipped"] == 1 and d["routing_skew"] == pytest.approx(1.0, abs=0.06) and d["prior"] == 1.13
    code, out, _ = run_cli("routing", str(f), "--num-experts", "64", "--top-k", "4", "--json")
    assert json.loads(out)["routing_skew"] == pytest.approx(d["routing_skew"])


def test_sweep_takes_routing_skew_as_an_axis(run_cli):
    from specsim.analysis.build import build_scenario
    from specsim.analysis.sweep import sweep

    sc = build_scenario(model="glm-4.7-flash", gpu="h200", batch=32, accept=2.5, steps=3, topk=1)
    res = sweep(sc, steps=[3], routing_skew=[0.0, 0.5, 1.13])
    rows = sorted(res.ranked(3), key=lambda r: r["routing_skew"])
    assert [r["routing_skew"] for r in rows] == [0.0, 0.5, 1.13]
    assert rows[0]["baseline_tok_s"] < rows[1]["baseline_tok_s"] < rows[2]["baseline_tok_s"]
    one = sweep(build_scenario(sc, routing_skew=0.5), steps=[3]).best
    assert one["tok_s"] == pytest.approx(rows[1]["tok_s"], rel=1e-9)  # the axis and the deployment agree
    code, out, err = run_cli("sweep", "--model", "glm-4.7-flash", "--steps", "2", "--routing-skew", "0,4")
    assert code == 2 and err.startswith("error: routing-skew") and not out
