"""``engine.tree_plan_us``: the host cost of one attention-backend plan call of an SGLang tree cycle.

On Hopper, SGLang gives models without MLA the FA3 backend for chains but FlashInfer when
``topk > 1`` (``python/sglang/srt/server_args.py``, default attention backend). FlashInfer plans on
the host before each of the ``steps - 1`` draft steps (``FlashInferMultiStepDraftBackend``), the
verify (a prefill plan with the packed tree mask) and the draft extend: ``steps + 1`` plans per
cycle, and eight more GPU->CPU syncs (read in SGLang v0.5.6: one before the draft plans, four in
the verify plan, three in the draft-extend plan; ``engine.tree_host_syncs_per_cycle``). The sync
count is code; the plan cost is fitted here, by linear least squares, to the tree rows of the
SpecBundle Llama-3.1-8B group of ``calibration/datasets/published_batch_sweeps.json`` (SGLang
0.5.6, one H200, batch 1, seven benchmarks x two tree shapes), against the cycle the model gives
those rows without it. The chains of the same group are held out, and so are the trees of every
other group.

    python calibration/host/fit_tree_plan.py           # prints the fit and its residuals
    python calibration/host/fit_tree_plan.py --write   # and writes it into models/engines.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from specsim.analysis.build import build_scenario  # noqa: E402
from specsim.analysis.predict import evaluate  # noqa: E402

GROUP = "specbundle-llama-3.1-8b-instruct-h200"
SYNCS = 8  # SGLang v0.5.6, FlashInfer tree path minus the FA3 chain path (see the docstring)
ENGINES = ("sglang", "sglang-v2")


def tree_rows() -> tuple[dict, list[dict]]:
    d = json.loads((ROOT / "calibration" / "datasets" / "published_batch_sweeps.json").read_text(encoding="utf-8"))
    g = next(x for x in d["configs"] if x["id"] == GROUP)
    return g, [r for r in g["rows"] if r["topk"] > 1]


def residual_ms(g: dict, r: dict, plan_us: float) -> tuple[float, int]:
    """(published minus modeled cycle in ms, plan calls) of one row, the published cycle in the model's
    units: accept length / (published speedup x modeled baseline tok/s)."""
    sc = build_scenario(None, model=g["model"], gpu=g["gpu"], tp=g["tp"], engine=g["engine"], steps=r["steps"],
                        topk=r["topk"], draft_tokens=r["num_draft_tokens"], batch=r["batch"], accept=r["accept_length"],
                        ctx=int(g.get("ctx") or 512))
    sc = sc.model_copy(update={"engine": sc.engine.model_copy(update={"tree_plan_us": plan_us,
                                                                      "tree_host_syncs_per_cycle": SYNCS})})
    p = evaluate(sc)
    published_cycle = r["accept_length"] / (r["spec_tok_s"] / r["baseline_tok_s"] * p.baseline_tok_s) * 1e3
    return published_cycle - p.cycle_ms, r["steps"] + 1


def fit_plan_us(g: dict, rows: list[dict]) -> float:
    """The least-squares plan cost (us): the rows' cycle residuals without it over their plan counts."""
    res = [residual_ms(g, r, 0.0) for r in rows]
    return 1e3 * sum(x * k for x, k in res) / sum(k * k for _, k in res)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="write the fit into models/engines.json")
    args = ap.parse_args()
    g, rows = tree_rows()
    plan_us = fit_plan_us(g, rows)
    print(f"tree_plan_us = {plan_us:.1f} us per plan ({len(rows)} rows; {SYNCS} extra syncs per cycle)")
    for r in rows:
        left, _ = residual_ms(g, r, plan_us)
        print(f"  {r['benchmark']:14s} steps {r['steps']} topk {r['topk']} tokens {r['num_draft_tokens']}: "
              f"residual {left * 1e3:+.0f} us")
    if args.write:
        path = ROOT / "models" / "engines.json"
        engines = json.loads(path.read_text())
        src = (f"fitted: {plan_us:.1f} us by calibration/host/fit_tree_plan.py to the {len(rows)} tree rows of "
               f"'{GROUP}' in calibration/datasets/published_batch_sweeps.json (SGLang 0.5.6, one H200, batch 1; "
               "steps + 1 FlashInfer plans per cycle, SGLang picks FlashInfer for topk > 1 on models without MLA; "
               "models/notes/sglang_tree_backend.md)")
        for key in ENGINES:
            e = engines[key]["engine"]
            e["tree_plan_us"] = round(plan_us, 1)
            e["tree_host_syncs_per_cycle"] = SYNCS
            e["sources"]["tree_plan_us"] = src
            e["sources"]["tree_host_syncs_per_cycle"] = (
                "read in SGLang v0.5.6: the FlashInfer tree path adds 8 GPU->CPU syncs per cycle over the FA3 chain path "
                "(kv_indptr .cpu() before the draft plans in flashinfer_backend.py FlashInferMultiStepDraftBackend; "
                "segment_packbits .item() and three .to('cpu') in the verify prefill plan; three in the draft-extend plan; models/notes/sglang_tree_backend.md)")
        path.write_text(json.dumps(engines, indent=2) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
