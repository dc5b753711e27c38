"""The FA2 custom-mask (tree verify) attention kernel's parameters, fitted to its H200 measurements.

SGLang verifies a tree (topk > 1) of a model without MLA with FlashInfer's FA2 prefill and a bit-packed custom mask
(models/notes/sglang_tree_backend.md). ``calibration/kernels/flashinfer_tree.py`` timed that kernel on one H200 at
B in {1..64} x k in {4, 7, 22} query tokens x ctx in {512, 2048} for two GQA shapes (60 points,
``calibration/datasets/h200-flashinfer-tree.json``). This script fits the four engine numbers the model's
attention operator takes on that path, by least squares on log time, with everything else as the ``sglang``
preset and the ``h200`` GPU give it (a constant extra per call was tried as well: the fit put it at 0):

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

import numpy as np
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from specsim.analysis.build import build_scenario  # noqa: E402
from specsim.physics.cycle import verify_breakdown  # noqa: E402
from specsim.physics.params import scenario_params  # noqa: E402

DATASET = ROOT / "calibration" / "datasets" / "h200-flashinfer-tree.json"
SHAPES = {"32q8kv": ("qwen3-8b", 1), "16q2kv": ("llama-3.1-70b", 4)}  # the presets with those heads per GPU
ENGINES = ("sglang", "sglang-v2")
KEYS = ("tree_mask_attention_slowdown", "tree_mask_attention_flop_efficiency", "tree_mask_attention_us_per_tile_row")
PARAM_KEYS = ("tree_mask_attention_slowdown", "tree_mask_flop_efficiency", "tree_mask_us_per_tile_row")  # as read
START, LOWER, UPPER = (1.5, 0.2, 0.05), (1.0, 0.01, 0.0), (10.0, 1.0, 1.0)


def points() -> list[dict]:
    rows = json.loads(DATASET.read_text(encoding="utf-8"))["rows"]
    return [r for r in rows if r["kernel"] == "prefill_paged" and "custom_mask_gpu_ms" in r]


def _params(r: dict) -> dict:
    model, tp = SHAPES[r["heads"]]
    sc = build_scenario(None, model=model, gpu="h200", tp=tp, engine="sglang", steps=3, topk=4,
                        draft_tokens=r["qo_len"], batch=r["batch"], ctx=r["ctx"], max_running_requests=r["batch"])
    p = dict(scenario_params(sc))
    p["tree_fa2_custom_mask"] = 1.0
    return p


def modeled_us(p: dict, r: dict, x) -> float:
    """The model's us per call of the verify's attention kernel with the numbers ``x``."""
    q = {**p, **dict(zip(PARAM_KEYS, map(float, x)))}
    rows = verify_breakdown(q, num_draft_tokens=r["qo_len"], keep_rows=True)["rows"]
    op = next(o for o in rows if o["name"] == "attention_gqa")
    return op["us"] / op["count"]


def fit(pts: list[dict]):
    ps = [_params(r) for r in pts]
    y = np.array([r["custom_mask_gpu_ms"] * 1e3 for r in pts])

    def resid(x):
        return np.log(np.array([modeled_us(p, r, x) for p, r in zip(ps, pts)]) / y)

    res = least_squares(resid, START, bounds=(LOWER, UPPER), x_scale=[1.0, 0.1, 0.05])
    return res.x, ps, y


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="write the fit into models/engines.json")
    args = ap.parse_args()
    pts = points()
    x, ps, y = fit(pts)
    m = np.array([modeled_us(p, r, x) for p, r in zip(ps, pts)])
    err = 100 * (m / y - 1)
    print("  ".join(f"{k} = {v:.4g}" for k, v in zip(KEYS, x)))
    print(f"{len(pts)} points: MAPE {np.mean(np.abs(err)):.1f} %, worst {np.max(np.abs(err)):.1f} %, "
          f"within 15 %: {int(np.sum(np.abs(err) <= 15))}")
    for r, meas, mod, e in zip(pts, y, m, err):
        print(f"  {r['heads']} B={r['batch']:3d} ctx={r['ctx']:5d} k={r['qo_len']:3d}: measured {meas:7.1f} us, "
              f"modeled {mod:7.1f} us ({e:+.1f} %)")
    if args.write:
        path = ROOT / "models" / "engines.json"
        engines = json.loads(path.read_text(encoding="utf-8"))
        src = (f"fitted by calibration/kernels/fit_flashinfer_tree.py to the {len(pts)} FA2 custom-mask kernel timings "
               "of calibration/datasets/h200-flashinfer-tree.json (one H200, flashinfer-python 0.6.3 as SGLang 0.5.9 "
               f"pins; B 1-64, k 4/7/22 query tokens, ctx 512/2048, two GQA shapes): MAPE {np.mean(np.abs(err)):.1f} %, "
               f"worst {np.max(np.abs(err)):.1f} %")
        for key in ENGINES:
            e = engines[key]["engine"]
            e["tree_attention_fa2_custom_mask"] = True
            e["sources"]["tree_attention_fa2_custom_mask"] = (
                "SGLang on Hopper verifies trees of models without MLA on FlashInfer (server_args.py: FA3 only for "
                "topk == 1) with its FA2 prefill and a custom mask (flashinfer_backend.py prefill_backend='fa2'; "
                "models/notes/sglang_tree_backend.md); the FA2 tile rule: FA2DetermineCtaTileQ, "
                "include/flashinfer/utils.cuh in flashinfer-python 0.6.3")
            for k, v in zip(KEYS, x):
                e[k] = round(float(v), 4)
                e["sources"][k] = src
        path.write_text(json.dumps(engines, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
