"""Sweeps: the seed's optimum, agreement with single predictions, trees vs chains, bad input."""

import json

import numpy as np
import pytest

import specsim
from specsim.analysis.sweep import sweep
from specsim.errors import SpecsimError


def test_seed_sweep_peaks_at_two_steps():
    r = sweep(steps=range(1, 11))
    assert r.best()["steps"] == 2
    assert r.best()["tok_s"] == pytest.approx(94.0, rel=0.05)


def test_sweep_matches_predict():
    r = sweep(steps=[1, 3, 5], batch=[1, 4], ctx=[1024, 8192], tp=[4, 8])
    for i in range(0, r.n, 5):
        row = r.row(i)
        p = specsim.predict(steps=row["steps"], batch=row["batch"], ctx=row["ctx"], tp=row["tp"])
        assert row["tok_s"] == pytest.approx(p.tok_s, rel=1e-3)
        assert row["verify_ms"] == pytest.approx(p.verify_ms, rel=1e-6)


def test_accept_axis_matches_predict_with_accept():
    r = sweep(steps=[2], accept=[1.5, 2.1, 2.8])
    got = sorted(r.columns["tok_s"])
    want = sorted(specsim.predict(steps=2, accept=a).tok_s for a in (1.5, 2.1, 2.8))
    assert np.allclose(got, want, rtol=1e-3)


def test_better_draft_moves_optimum_deeper():
    weak = sweep(steps=range(1, 11), accept=[2.1], accept_at_steps=2).best()["steps"]
    strong = sweep(steps=range(1, 11), accept=[3.4], accept_at_steps=3).best()["steps"]
    assert strong > weak


def test_tree_beats_chain_at_same_depth_in_tokens():
    r = sweep(steps=[3], topk=[1, 4], draft_tokens=[8])
    tau = {int(k): t for k, t in zip(r.columns["topk"], r.columns["accept_length"])}
    assert tau[4] > tau[1]


def test_gpu_and_allreduce_axes():
    r = sweep(gpu=["h100", "b200"], allreduce_scale=[0.5, 2.0])
    assert r.n == 4
    rows = [r.row(i) for i in range(r.n)]
    b200 = [x for x in rows if "B200" in x["gpu"]]
    h100 = [x for x in rows if "H100" in x["gpu"]]
    for scale in (0.5, 2.0):  # at the same all-reduce latency, the B200 is the faster GPU
        assert min(x["tok_s"] for x in b200 if x["allreduce_scale"] == scale) > max(
            x["tok_s"] for x in h100 if x["allreduce_scale"] == scale)
    for g in (b200, h100):
        lo = next(x for x in g if x["allreduce_scale"] == 0.5)
        hi = next(x for x in g if x["allreduce_scale"] == 2.0)
        assert lo["tok_s"] > hi["tok_s"]


@pytest.mark.parametrize(
    "kw",
    [dict(steps=[]), dict(steps=[0]), dict(steps=[100]), dict(accept=[5.0]), dict(tp=[3]), dict(allreduce_scale=[-1.0]),
     dict(batch=[0])],
)
def test_bad_sweeps(kw):
    with pytest.raises(SpecsimError):
        sweep(**kw)


def test_cli_sweep_json_csv(run_cli, tmp_path):
    code, out, _ = run_cli("sweep", "--steps", "1-10", "--json")
    d = json.loads(out)
    assert code == 0 and d["best"]["steps"] == 2 and d["points"] == 10
    f = tmp_path / "s.csv"
    code, _, _ = run_cli("sweep", "--steps", "1-4", "--batch", "1,8", "--csv", str(f))
    lines = f.read_text().splitlines()
    assert code == 0 and len(lines) == 9 and lines[0].startswith("steps,topk")
    code, out, _ = run_cli("sweep", "--steps", "1-3", "--format", "markdown")
    assert code == 0 and "**Best of 3" in out


@pytest.mark.parametrize("args", [["--steps", "5-1"], ["--steps", "1-99"], ["--accept", "3:1:0.5"], ["--accept-rates", "0.5,2"]])
def test_cli_sweep_bad_input(run_cli, args):
    code, _, err = run_cli("sweep", *args)
    assert code == 2 and err.startswith("error:") and "Traceback" not in err


def test_sweep_matches_predict_under_batch_expansion():
    """vLLM V0's batch-expansion verify (attention rows as single-token sequences, host copies per row x context)
    gives the same numbers through the array path of a sweep as through one prediction."""
    kw = dict(model="llama-3.1-8b", gpu="rtx3090", tp=1, engine="vllm-v0", accept=1.9)
    base = specsim.build_scenario(**kw)
    r = sweep(base, steps=[1, 2, 4], batch=[1, 8, 32], ctx=[256, 2048])
    for i in range(r.n):
        row = r.row(i)
        p = specsim.predict(base, steps=row["steps"], batch=row["batch"], ctx=row["ctx"])
        assert row["verify_ms"] == pytest.approx(p.verify_ms, rel=1e-9)
        assert row["cycle_ms"] == pytest.approx(p.cycle_ms, rel=1e-9)


def test_a_tp_axis_through_1_costs_no_collectives_at_tp1():
    """A TP axis holding 1 and larger sizes: the TP1 points pay no all-reduce (it was the whole axis's flag)."""
    kw = dict(model="llama-3.1-8b", gpu="h100", accept=2.0)
    base = specsim.build_scenario(tp=1, **kw)
    r = sweep(base, steps=[3], tp=[1, 2], batch=[1, 8])
    for i in range(r.n):
        row = r.row(i)
        p = specsim.predict(base, steps=3, tp=row["tp"], batch=row["batch"])
        assert row["verify_ms"] == pytest.approx(p.verify_ms, rel=1e-9)


def test_sweep_matches_predict_along_the_all_reduce_chain():
    """TP and GPU axes carry every all-reduce number per TP (one-shot, two-shot and NCCL lines, their size limits):
    a wide Llama-3-70B tree verify crosses all three, and each grid point equals predict's."""
    from specsim.analysis.build import build_scenario

    kw = dict(model="llama-3-70b-eagle", engine="sglang", ctx=512, topk=4, draft_tokens=21, max_running_requests=128)
    sc = build_scenario(**kw)
    for axes in (dict(tp=[2, 4, 8]), dict(tp=[2, 4, 8], gpu=["h100", "h200"])):
        r = sweep(sc, steps=[3], topk=[4], draft_tokens=[21], accept=[2.5], accept_at_steps=3, batch=[1, 16, 64], **axes)
        for i in range(r.n):
            row = r.row(i)
            gpu = "h200" if "H200" in row.get("gpu", "") else ("h100" if "gpu" in axes else None)
            p = specsim.predict(**kw, steps=3, accept=row["accept_length"], batch=row["batch"], tp=row["tp"],
                                **({"gpu": gpu} if gpu else {}))
            for key in ("verify_ms", "cycle_ms", "baseline_tok_s", "tok_s"):
                assert row[key] == pytest.approx(getattr(p, key), rel=1e-9), (axes, key, row)


def test_the_baseline_is_checked_against_gpu_memory_like_the_speculative_rows(run_json):
    """At batch 256 SGLang runs 48 requests with speculation but all 256 without: the sweep marked the row as fitting
    and compared it with a baseline whose 137 GB KV cache cannot sit on an 80 GB H100. The engine's KV pool now runs
    what it holds (the rest queue), so a row does not fit only where the pool cannot hold one request at its context;
    every row agrees with predict's warnings, and its tok/s with predict's."""
    from specsim.analysis.build import build_scenario
    from specsim.analysis.predict import predict, scenario_warnings

    kw = {"model": "llama-3.1-8b", "gpu": "h100", "tp": 1}
    res = sweep(build_scenario(None, **kw), batch=[1, 32, 256], ctx=[512, 4096, 500_000], steps=[3])
    rows = res.ranked(res.n)
    assert {(r["batch"], r["ctx"]) for r in rows if not r["fits_memory"]} == {(b, 500_000) for b in (1, 32, 256)}
    assert all(r["baseline_fits_memory"] == (r["ctx"] < 500_000) for r in rows)
    for r in rows:  # the rule of predict's warnings, and its numbers, row by row
        sc = build_scenario(None, **kw, batch=r["batch"], ctx=r["ctx"], steps=3)
        w = " ".join(scenario_warnings(sc))
        assert ("does not fit" in w) == (not r["fits_memory"]), r
        assert r["baseline_tok_s"] == pytest.approx(predict(sc).baseline_tok_s, rel=1e-9), r
    d = run_json("sweep", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--batch", "32,256", "--ctx", "500000")
    assert any("do not fit in GPU memory" in n for n in d["notes"])
    assert {r["batch"]: r["baseline_fits_memory"] for r in d["ranked"]} == {32: False, 256: False}
    assert res.to_csv().splitlines()[0].endswith(",fits_memory,routing_locality,baseline_fits_memory,routing_skew")
