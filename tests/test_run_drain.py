"""Finite closed-loop runs whose requests finish unevenly (specsim.analysis.run): per-request spread of the decode
work drains the batch before the run ends. Checked against the concurrency measured by the GLM-4.7-Flash runs of
calibration/datasets/run-drain-glm47flash-h100pcie.json (only their batch-1 latency spread sets the prior)."""

import json
import math

import numpy as np
import pytest

from specsim.analysis.run import ACCEPT_SPREAD_PRIOR, occupancy, predict_run, waves
from specsim.errors import SpecsimError
from specsim.io.presets import data_root

GLM = dict(model="glm-4.7-flash", gpu="h100-pcie", tp=1, ctx=566)
RUNS = {"eagle3": dict(steps=3, topk=4, draft_tokens=6, engine="sglang"),
        "eagle3v3": dict(steps=3, topk=1, draft_tokens=4, engine="sglang-v2")}


def _drain_data():
    return json.loads(data_root("calibration").joinpath("datasets", "run-drain-glm47flash-h100pcie.json")
                      .read_text(encoding="utf-8"))


def test_the_prior_is_the_batch1_latency_spread_of_the_eagle3_runs():
    runs = {(r["run"], r["max_concurrency"]): r for r in _drain_data()["runs"]}
    cv = {k: runs[(k, 1)]["std_e2e_ms"] / runs[(k, 1)]["mean_e2e_ms"] for k in ("baseline", "eagle3", "eagle3v3")}
    from_acceptance = [math.sqrt(cv[k] ** 2 - cv["baseline"] ** 2) for k in RUNS]  # what speculation adds
    assert ACCEPT_SPREAD_PRIOR == pytest.approx(float(np.mean(from_acceptance)), abs=0.005)


@pytest.mark.parametrize("run", sorted(RUNS))
@pytest.mark.parametrize("slots", [4, 8, 16, 32])
def test_modeled_concurrency_matches_the_measured_drain(run, slots):
    """Held out: 64 requests of 256 tokens each; the spec run's mean requests in flight within 3 % of the measured."""
    m = next(r for r in _drain_data()["runs"] if r["run"] == run and r["max_concurrency"] == slots)
    res = predict_run(64, batch=slots, accept=m["accept_length"], output_spread=0.0, **GLM, **RUNS[run])
    assert res.spec_concurrency == pytest.approx(m["concurrency"], rel=0.03)
    base = next(r for r in _drain_data()["runs"] if r["run"] == "baseline" and r["max_concurrency"] == slots)
    assert res.baseline_concurrency == pytest.approx(base["concurrency"], rel=0.03)
    assert res.spec_concurrency < res.baseline_concurrency  # only the speculative run drains


@pytest.mark.parametrize("requests,slots", [(80, 64), (80, 32), (64, 16), (5, 8), (1, 1), (1000, 7)])
def test_zero_spread_is_the_equal_waves(requests, slots):
    occ = occupancy(requests, slots, 0.0)
    expect = np.zeros(min(requests, slots))
    for n, c in waves(requests, slots):
        expect[n - 1] += c
    assert np.array_equal(occ, expect)


@pytest.mark.parametrize("requests,slots,spread", [(64, 32, 0.12), (80, 64, 0.5), (300, 7, 0.3), (50, 50, 0.2),
                                                   (3, 10, 1.0), (2000, 16, 0.12)])
def test_occupancy_conserves_the_work(requests, slots, spread):
    """Every request's work (mean 1) is run exactly once: sum_n n x occupancy[n] = requests."""
    occ = occupancy(requests, slots, spread)
    assert np.all(occ >= -1e-12)
    assert float((occ * np.arange(1, len(occ) + 1)).sum()) == pytest.approx(requests, rel=1e-9)


def test_spread_slows_a_run_and_more_spread_slows_it_more():
    kw = dict(batch=32, accept=2.3, **GLM, **RUNS["eagle3"])
    tok = [predict_run(64, accept_spread=s, output_spread=0.0, **kw).tok_s for s in (0.0, 0.06, 0.12, 0.3, 0.6)]
    assert all(a > b for a, b in zip(tok, tok[1:]))
    base = {predict_run(64, accept_spread=s, **kw).baseline_tok_s for s in (0.0, 0.3)}
    assert len(base) == 1  # acceptance spreads only the speculative run


def test_one_slot_runs_in_sequence_whatever_the_spread():
    kw = dict(batch=1, accept=2.3, **GLM, **RUNS["eagle3"])
    assert predict_run(40, accept_spread=0.5, **kw).tok_s == pytest.approx(predict_run(40, accept_spread=0, **kw).tok_s,
                                                                           rel=1e-9)


def test_a_long_run_tends_to_the_steady_state():
    from specsim.analysis.predict import predict

    kw = dict(batch=16, accept=2.3, **GLM, **RUNS["eagle3"])
    steady = predict(**kw).tok_s
    short, long_ = (predict_run(r, **kw).tok_s for r in (64, 20_000))
    assert short < long_ < steady and long_ == pytest.approx(steady, rel=0.01)


@pytest.mark.parametrize("v", [-0.1, 2.5, float("nan"), float("inf"), "0.1", True, None])
def test_bad_spreads_are_refused(v):
    with pytest.raises(SpecsimError, match="accept-spread"):
        predict_run(8, batch=4, accept=2.0, accept_spread=v, **GLM, **RUNS["eagle3"])


@pytest.mark.parametrize("args,field", [(["--requests", "8", "--accept-spread", "3"], "accept-spread"),
                                        (["--requests", "8", "--output-spread", "-1"], "output-spread"),
                                        (["--accept-spread", "0.1"], "accept-spread")])
def test_cli_bad_spread_is_one_line(run_cli, args, field):
    code, out, err = run_cli("predict", "--batch", "4", *args)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and out == "" and len(lines) == 1 and lines[0].startswith(f"error: {field}"), err


def test_cli_run_json_round_trip(run_cli):
    code, out, err = run_cli("predict", "--model", "glm-4.7-flash", "--gpu", "h100-pcie", "--tp", "1", "--batch", "32",
                             "--steps", "3", "--topk", "4", "--draft-tokens", "6", "--accept", "2.29", "--requests", "64",
                             "--json")
    assert code == 0, err
    run = json.loads(out)["run"]
    assert run["accept_spread"] == ACCEPT_SPREAD_PRIOR and run["output_spread"] == 0
    assert 1 <= run["concurrency"] < run["baseline_concurrency"] <= 32
    code, out0, err = run_cli("predict", "--model", "glm-4.7-flash", "--gpu", "h100-pcie", "--tp", "1", "--batch", "32",
                              "--steps", "3", "--topk", "4", "--draft-tokens", "6", "--accept", "2.29", "--requests", "64",
                              "--accept-spread", "0", "--json")
    assert code == 0 and json.loads(out0)["run"]["tok_s"] > run["tok_s"]


def test_huge_runs_stay_bounded():
    for requests, slots in ((10_000_000, 90_000), (1_000_000, 1_000_000), (10_000_000, 500_000)):
        occ = occupancy(requests, slots, 0.12)
        assert len(occ) == min(requests, slots) and float(occ.sum()) > 0


def test_tpot_of_a_run_without_lengths_is_the_decode_time_per_token():
    """Equal requests filling every slot: each decodes at the cycle time over the accept length, the plain run at the
    step time (TPOT, as serving benchmarks report it)."""
    from specsim.analysis.predict import predict

    kw = dict(model="llama-3.1-8b", gpu="h100", tp=1, engine="sglang", steps=3, batch=8, accept=2.5)
    r = predict_run(80, accept_spread=0.0, **kw)
    p = predict(**kw)
    assert r.tpot_ms == pytest.approx(p.cycle_ms / 2.5, rel=1e-9)
    assert r.baseline_tpot_ms == pytest.approx(p.baseline_step_ms, rel=1e-9)
    assert r.ttft_ms is None and "ttft_ms" not in r.to_dict()


def test_prefills_of_later_requests_stall_the_running_ones():
    """Lengths given: a request's TPOT carries the prefills of the requests that join while it decodes, so it grows
    with the prompt while its own prefill goes to TTFT. With spread requests of several waves the prompts after the
    first batch are prefilled one by one (a run of 10 full waves was taken for one wave: all prefills batched)."""
    kw = dict(model="llama-3.1-8b", gpu="h100", tp=1, engine="sglang", steps=3, batch=16, accept=2.5, output_spread=0.1)
    short, long = (predict_run(160, prompt_tokens=n, output_tokens=500, **kw) for n in (100, 8000))
    bare = predict_run(160, **kw)
    assert long.baseline_tpot_ms > short.baseline_tpot_ms > bare.baseline_tpot_ms * 0.999
    assert long.baseline_ttft_ms > 10 * short.baseline_ttft_ms
    from specsim.analysis.build import build_scenario
    from specsim.physics.cycle import prefill_ms
    from specsim.physics.params import scenario_params

    p16 = float(prefill_ms(scenario_params(build_scenario(model="llama-3.1-8b", gpu="h100", tp=1, engine="sglang",
                                                          batch=16)), 8000.0, 16.0)["target"])
    assert long.baseline_ttft_ms < 0.5 * p16  # most prompts alone, not in batches of 16


def test_cli_prints_and_emits_the_per_request_latencies(run_cli):
    args = ("predict", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--batch", "16", "--requests", "160",
            "--prompt-tokens", "1000", "--output-tokens", "500", "--accept", "2.5")
    code, out, _ = run_cli(*args)
    assert code == 0 and "TPOT" in out and "TTFT" in out
    run = json.loads(run_cli(*args, "--json")[1])["run"]
    assert 0 < run["tpot_ms"] < run["baseline_tpot_ms"] and run["ttft_ms"] > 0 and run["baseline_ttft_ms"] > 0
