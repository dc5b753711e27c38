"""The EAGLE-3 cycle pieces besides the verify, measured on one H200, against the model (held out).

``calibration/datasets/h200-llama-3.1-8b-draft.json`` (``specsim measure draft``, CUDA-graph
replays, random weights) holds one draft step over B x topk rows (``draft_step`` = head forward
``draft_forward`` + softmax/top-k/tree step ``draft_topk``), greedy accept over B x k verify logits
(``accept``; ``argmax`` alone) and draft-extend over B x (steps + 1) tokens with the fc. Nothing
here was fitted to it: the scenario is the presets' ``llama-3.1-8b`` on ``h200`` with the
``torch-graph`` engine, and the model's draft step is exactly what ``cycle_phases_ms`` charges per
step in a graph: ``draft_forward_ms`` at width topk + ``vocab_pass_us`` over B x topk rows + the
two top-k graph nodes.

Tolerances (what is asserted, and why):

* the head forward and draft-extend, within 15 %: issue 9's bar for measured single-GPU forwards;
* the draft step with its top-k, and greedy accept, are *not* held to a relative bound - the
  model's softmax/top-k and argmax misses are large in relative terms (see the table) - but their
  absolute error must stay under 2 % of the measured target decode step at the same batch and
  context (``h200-llama-3.1-8b-forwards.json``), so that it cannot move a modeled cycle, and the
  speedup, by more than about 2 % per draft step.

``python tests/test_draft_measured.py`` prints the measured-vs-modeled table.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "calibration" / "datasets" / "h200-llama-3.1-8b-draft.json"
FORWARDS = ROOT / "calibration" / "datasets" / "h200-llama-3.1-8b-forwards.json"
HAS_TORCH = importlib.util.find_spec("torch") is not None

FORWARD_TOL = 0.15  # issue 9: measured single-GPU forwards within 15 %
DECODE_SHARE_TOL = 0.02  # absolute error as a share of one measured target decode step


def _load() -> dict:
    return json.loads(DATA.read_text())


@cache
def _params(batch: int, ctx: int):
    from specsim.analysis.build import build_scenario
    from specsim.physics.params import scenario_params

    return scenario_params(build_scenario(model="llama-3.1-8b", gpu="h200", tp=1, engine="torch-graph",
                                          batch=batch, ctx=ctx))


def modeled_ms(phase: str, batch: int, tokens: int, ctx: int | None) -> float:
    from specsim.physics.cost import draft_forward_ms
    from specsim.physics.cycle import argmax_pass_us, vocab_pass_us

    p = _params(batch, ctx or 2048)
    if phase == "draft_forward":
        return float(draft_forward_ms(p, tokens, batch=batch, ctx=ctx)["total"])
    if phase == "draft_topk":
        return float(vocab_pass_us(p, batch * tokens, p["draft_vocab"], tokens > 1)) / 1e3
    if phase == "draft_step":
        fwd = float(draft_forward_ms(p, tokens, batch=batch, ctx=ctx)["total"])
        topk = float(vocab_pass_us(p, batch * tokens, p["draft_vocab"], tokens > 1)) + 2 * float(p["graph_node_us"])
        return fwd + topk / 1e3
    if phase in ("accept", "argmax"):
        return float(argmax_pass_us(p, batch * tokens, p["vocab"])) / 1e3
    if phase == "draft_extend":
        return float(draft_forward_ms(p, tokens, batch=batch, ctx=ctx, fuse=True)["total"])
    raise ValueError(phase)


@cache
def _decode_ms() -> dict:
    d = json.loads(FORWARDS.read_text())
    return {(p["batch"], p["ctx"]): p["ms"] for p in d["points"] if p["tokens"] == 1}


def comparison() -> list[dict]:
    rows = []
    for pt in _load()["points"]:
        m = modeled_ms(pt["phase"], pt["batch"], pt["tokens"], pt["ctx"])
        dec = _decode_ms()[(pt["batch"], pt["ctx"] or 2048)]
        rows.append({**pt, "model_ms": m, "err": m / pt["ms"] - 1, "abs_ms": m - pt["ms"], "decode_ms": dec})
    return rows


def markdown_table() -> str:
    rows = {(r["phase"], r["batch"], r["tokens"], r["ctx"]): r for r in comparison()}
    out = ["| B | topk | draft step ms, ctx 2048: measured / modeled (err) | head fwd | top-k | "
           "accept k=4: measured argmax / +gather / modeled | extend steps 3, ctx 2048: measured / modeled |",
           "|---:|---:|---|---|---|---|---|"]
    for b in sorted({r[1] for r in rows}):
        for t in (1, 4):
            s, f, k = (rows.get((ph, b, t, c)) for ph, c in (("draft_step", 2048), ("draft_forward", 2048),
                                                             ("draft_topk", None)))
            if s is None:
                continue
            a, g = rows.get(("argmax", b, 4, None)), rows.get(("accept", b, 4, None))
            e = rows.get(("draft_extend", b, 4, 2048))
            acc = f"{a['ms']:.3f} / {g['ms']:.3f} / {a['model_ms']:.3f}" if a and g and t == 1 else ""
            ext = f"{e['ms']:.3f} / {e['model_ms']:.3f} ({100 * e['err']:+.0f} %)" if e and t == 1 else ""
            out.append(f"| {b} | {t} | {s['ms']:.3f} / {s['model_ms']:.3f} ({100 * s['err']:+.0f} %) | "
                       f"{100 * f['err']:+.0f} % | {k['ms']:.3f} / {k['model_ms']:.3f} | {acc} | {ext} |")
    return "\n".join(out)


# --------------------------------------------------------------------------- the dataset
def test_dataset_provenance_and_grid():
    d = _load()
    prov = d["provenance"]
    for key in ("source", "engine", "gpu", "timing_method", "command", "torch", "date_utc"):
        assert prov[key], key
    assert prov["measured"] is True and "H200" in prov["gpu"] and prov["command"].startswith("python3 ")
    assert d["graph"] is True and not d["errors"] and not d["skipped"]
    assert d["model"] == "llama-3.1-8b" and d["config"]["draft_vocab"] == 32000
    from specsim.measure.draft import plan_points

    plan = plan_points((1, 2, 4, 8, 16, 32, 64), (1, 4), (512, 2048), (2, 4, 8), (2, 3))
    key = lambda p: (p["phase"], p["batch"], p["tokens"], p["ctx"])  # noqa: E731
    assert sorted(map(key, d["points"]), key=str) == sorted(map(key, plan), key=str)
    for p in d["points"]:
        assert 0 < p["p10_ms"] <= p["ms"] <= p["p90_ms"] and p["graph"] is True
    assert len(d["eager_points"]) == len(d["points"])


def test_measured_pieces_are_consistent():
    pts = {(p["phase"], p["batch"], p["tokens"], p["ctx"]): p["ms"] for p in _load()["points"]}
    for (ph, b, t, c), ms in pts.items():
        if ph == "draft_step":  # a step is its forward plus its top-k, give or take a launch
            assert ms == pytest.approx(pts[("draft_forward", b, t, c)] + pts[("draft_topk", b, t, None)], rel=0.08)
        if ph == "accept":
            assert ms >= pts[("argmax", b, t, None)]
    # issue 9's statement: a draft step under ~1 ms at batch 64 (topk 4), greedy accept under ~0.1 ms
    assert pts[("draft_step", 64, 4, 2048)] < 1.0 and pts[("accept", 64, 4, None)] < 0.1


# --------------------------------------------------------------------------- against the model
def test_head_forward_and_draft_extend_within_15_percent():
    rows = [r for r in comparison() if r["phase"] in ("draft_forward", "draft_extend")]
    bad = [f"{r['phase']} B={r['batch']} w={r['tokens']} ctx={r['ctx']}: {100 * r['err']:+.1f} %"
           for r in rows if abs(r["err"]) > FORWARD_TOL]
    assert len(rows) == 56 and not bad, bad


def test_draft_step_and_accept_absolute_error_small_against_a_decode_step():
    rows = [r for r in comparison() if r["phase"] in ("draft_step", "draft_topk", "accept", "argmax")]
    bad = [f"{r['phase']} B={r['batch']} w={r['tokens']}: {r['abs_ms']:+.3f} ms of a {r['decode_ms']:.2f} ms decode"
           for r in rows if abs(r["abs_ms"]) > DECODE_SHARE_TOL * r["decode_ms"]]
    assert not bad, bad


def test_report_errors(capsys):
    """Not a bound: the errors by phase, printed (pytest -s), and the directions recorded."""
    rows = comparison()
    by = {}
    for r in rows:
        by.setdefault(r["phase"], []).append(r["err"])
    with capsys.disabled():
        print()
        for ph, errs in by.items():
            print(f"  {ph:14s} n={len(errs):3d}  modeled vs measured: {100 * min(errs):+6.1f} % .. {100 * max(errs):+6.1f} %")
    # the argmax pass pays the row reduction's latency floor taken from the profile's softmax + max
    # (53 us) against ~41 us measured for argmax alone: within 60 %, and the accept phase (argmax +
    # gather) within 35 %; before that floor the model charged streaming bandwidth only (-22..-93 %)
    assert max(abs(e) for e in by["argmax"]) < 0.6
    assert max(abs(e) for e in by["accept"]) < 0.35


# --------------------------------------------------------------------------- the code (torch-free / CPU)
def test_plan_points_grid():
    from specsim.measure.draft import plan_points

    pts = plan_points((1, 8), (1, 4), (512,), (2, 4), (2,))
    phases = [p["phase"] for p in pts]
    assert phases.count("draft_step") == 4 and phases.count("draft_topk") == 4 and phases.count("accept") == 4
    assert {p["tokens"] for p in pts if p["phase"] == "draft_extend"} == {3}


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_draft_code_paths_on_cpu(tmp_path):
    out = tmp_path / "draft.json"
    r = subprocess.run([sys.executable, "specsim/measure/__main__.py", "draft", "--device", "cpu", "--batch", "1,3",
                        "--ctx", "32", "--accept-tokens", "4", "--steps", "2", "--repeats", "3", "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(out.read_text())
    assert not d["errors"] and len(d["points"]) == len(
        __import__("specsim.measure.draft", fromlist=["plan_points"]).plan_points((1, 3), (1, 4), (32,), (4,), (2,)))


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_greedy_accept_reference():
    import torch

    from specsim.measure.draft import greedy_accept

    torch.manual_seed(0)
    B, k, V = 3, 4, 50
    st = {"logits": torch.randn(B * k, V), "parent": torch.tensor([[0, 0, 1, 2], [0, 0, 1, 2], [0, 0, 0, 0]]),
          "pos": torch.arange(k).view(1, k), "req_base": (torch.arange(B) * k).view(B, 1),
          "hid3": torch.randn(B * k, 6)}
    pred = st["logits"].argmax(-1).view(B, k)
    cand = torch.gather(pred, 1, st["parent"])
    cand[1, 2] = -1  # request 1 stops after one accepted token
    st["cand"] = cand
    tokens, acc_len, hid = greedy_accept(torch, st, B, k)
    assert acc_len.tolist() == [3, 1, 3]
    assert tokens.view(B, k)[1].tolist() == [pred[1, 0], pred[1, 1], pred[1, 1], pred[1, 1]]
    assert torch.equal(hid[:k], st["hid3"][:k])


if __name__ == "__main__":
    print(markdown_table())
