"""The FA2 custom-mask (tree verify) attention kernel's parameters, fitted to its H200 measurements.

SGLang verifies a tree (topk > 1) of a model without MLA with FlashInfer's FA2 prefill and a bit-packed custom mask
(models/notes/sglang_tree_backend.md). ``calibration/kernels/flashinfer_tree.py`` timed that kernel on one H200 at
B in {1..64} x k in {4, 7, 22} query tokens x ctx in {512, 2048} for two GQA shapes (60 points,
``calibration/datasets/h200-flashinfer-tree.json``). The fit is ``specsim.analysis.tree_fit`` (the one
``specsim predict --profile`` runs on a profile's ``flashinfer`` section): three engine numbers by least squares on
log time, everything else as the ``sglang`` preset and the ``h200`` GPU give it (a constant extra per call was
tried as well: the fit put it at 0):

- ``tree_mask_attention_slowdown``: the kernel's KV streaming time over the causal kernel's (the model's);
- ``tree_mask_attention_flop_efficiency``: its share of the dense bf16 peak over FA2's padded query tile;
- ``tree_mask_attention_us_per_tile_row``: its extra fixed time per call, growing with the CTA query tile (16,
  64 or 128 packed rows: a CTA's serial loop over the KV, what a small batch waits for).

    python calibration/kernels/fit_flashinfer_tree.py           # the fit and every point's error
    python calibration/kernels/fit_flashinfer_tree.py --write   # and writes it into models/engines.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from specsim.analysis import tree_fit  # noqa: E402

DATASET = ROOT / "calibration" / "datasets" / "h200-flashinfer-tree.json"
ENGINES = ("sglang", "sglang-v2")


def rows() -> list[dict]:
    return json.loads(DATASET.read_text(encoding="utf-8"))["rows"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="write the fit into models/engines.json")
    args = ap.parse_args()
    all_rows = rows()
    pts = tree_fit.usable(all_rows)
    f = tree_fit.fit(pts)
    print("  ".join(f"{k} = {v:.4g}" for k, v in f["values"].items()))
    print(f"{f['points']} points: MAPE {f['mape_pct']:.1f} %, worst {f['worst_pct']:.1f} %, "
          f"within 15 %: {f['within_15_pct']}")
    for r, e in zip(pts, f["errors_pct"]):
        print(f"  {r['num_qo_heads']}q{r['num_kv_heads']}kv B={r['batch']:3d} ctx={r['ctx']:5d} k={r['qo_len']:3d}: "
              f"measured {r['custom_mask_gpu_ms'] * 1e3:7.1f} us, modeled {e:+.1f} %")
    plans = tree_fit.plan_costs(all_rows)
    print(f"plan() host us: custom mask {plans['custom_mask_plan_us'][0]:.0f} + {plans['custom_mask_plan_us'][1]:.2f} x B, "
          f"causal {plans['causal_plan_us'][0]:.0f} + {plans['causal_plan_us'][1]:.2f} x B ({plans['points']} points): "
          f"tree_verify_plan_extra_us = {plans['tree_verify_plan_extra_us']:.1f}, "
          f"tree_plan_us_per_request = {plans['tree_plan_us_per_request']:.2f}")
    if args.write:
        path = ROOT / "models" / "engines.json"
        engines = json.loads(path.read_text(encoding="utf-8"))
        src = (f"fitted by calibration/kernels/fit_flashinfer_tree.py to the {f['points']} FA2 custom-mask kernel "
               "timings of calibration/datasets/h200-flashinfer-tree.json (one H200, flashinfer-python 0.6.3 as SGLang "
               f"0.5.9 pins; B 1-64, k 4/7/22 query tokens, ctx 512/2048, two GQA shapes): MAPE {f['mape_pct']:.1f} %, "
               f"worst {f['worst_pct']:.1f} %")
        for key in ENGINES:
            e = engines[key]["engine"]
            e["tree_attention_fa2_custom_mask"] = True
            e["sources"]["tree_attention_fa2_custom_mask"] = (
                "SGLang on Hopper verifies trees of models without MLA on FlashInfer (server_args.py: FA3 only for "
                "topk == 1) with its FA2 prefill and a custom mask (flashinfer_backend.py prefill_backend='fa2'; "
                "models/notes/sglang_tree_backend.md); the FA2 tile rule: FA2DetermineCtaTileQ, "
                "include/flashinfer/utils.cuh in flashinfer-python 0.6.3")
            for k, v in f["values"].items():
                e[k] = round(float(v), 4)
                e["sources"][k] = src
            cm, ca = plans["custom_mask_plan_us"], plans["causal_plan_us"]
            plan_src = (f"measured: calibration/datasets/h200-flashinfer-tree.json, {plans['points']} plan() calls on the "
                        f"H200 box's host (stock flashinfer-python 0.6.3 calls, GPU idle), fitted a + b x batch by "
                        f"calibration/kernels/fit_flashinfer_tree.py: custom-mask prefill plan {cm[0]:.0f} + {cm[1]:.2f} x B us, "
                        f"causal {ca[0]:.0f} + {ca[1]:.2f} x B us. SGLang 0.5.9 calls that plan for the verify (custom "
                        "mask) and the draft extend without max lengths (layers/attention/flashinfer_backend.py "
                        "call_begin_forward), so plan() takes them with Python's max() over the per-request tensors "
                        "(flashinfer/prefill.py plan); a faster or slower host CPU moves it: measure yours "
                        "(specsim measure gpu --sections flashinfer) and pass --profile")
            e["tree_verify_plan_extra_us"] = round(plans["tree_verify_plan_extra_us"], 1)
            e["tree_plan_us_per_request"] = round(plans["tree_plan_us_per_request"], 2)
            e["sources"]["tree_verify_plan_extra_us"] = "the custom-mask plan's intercept over the causal one's; " + plan_src
            e["sources"]["tree_plan_us_per_request"] = ("two prefill plans per cycle (verify, draft extend) x the mean "
                                                        "per-request slope; " + plan_src)
        path.write_text(json.dumps(engines, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
