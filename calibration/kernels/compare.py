"""The cost model's kernels against the measured ones: routed-expert GEMMs and small kernels on the H200.

    python calibration/kernels/compare.py [--engine sglang] [--points] [--fit-cta] [--fit-moe-grid]

For each point of ``calibration/datasets/h200-sglang-fused-moe.json`` (SGLang's fused MoE Triton
kernel timed in a CUDA graph, :mod:`sglang_fused_moe`) the model's ``experts_gate_up`` /
``experts_down`` operator of the same model preset, TP and token count on the ``h200`` preset is
costed as it is inside a graph-replayed forward (kernel floor, graph node gap, the weight stream at
the tile's bandwidth share or its CTAs' rate, the grid's SM time, padded-row compute), on the grid
and bytes the point ran (:func:`moe_rows`; ``as_measured=False``: the operator as a forward builds it,
plus the shared-expert GEMM where SGLang fuses that expert into the kernel): per-call modeled vs
measured, and the error by shape. Then the small kernels of ``h200-small-kernels.json`` against the
elementwise family's per-kernel cost, and the cuBLAS GEMMs of ``h200-gemm-tiles.json`` (fine steps in
M) against the ``gemm`` family. Nothing is written; ``--fit-moe-grid`` fits the six fused-MoE numbers
the presets take from these points (:func:`fit_moe_grid`; ``calibration/build_gpu_presets.py`` writes
them), ``--fit-cta`` an earlier candidate form.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from specsim.analysis import moe_fit  # noqa: E402
from specsim.analysis.build import build_scenario  # noqa: E402
from specsim.physics.operators import Op, _gemm  # noqa: E402
from specsim.physics.params import scenario_params  # noqa: E402

DATA = ROOT / "calibration" / "datasets"
#: the measured shapes (fitted) and the held-out ones, each -> (model preset, TP)
SHAPES = {k: v for k, v in moe_fit.SHAPE_DEPLOYMENTS.items() if k in moe_fit.FITTED_SHAPES}
HELDOUT_SHAPES = {k: v for k, v in moe_fit.SHAPE_DEPLOYMENTS.items() if k not in SHAPES}
#: the held-out kernel datasets (``HELDOUT=1`` and ``HELDOUT=fp8`` runs of ``sglang_fused_moe.py``)
HELDOUT_FILES = ("h200-sglang-fused-moe-heldout.json", "h200-sglang-fused-moe-heldout-fp8.json")
OPS = moe_fit.OPS
_per_call_us, _measured_op = moe_fit.per_call_us, moe_fit.measured_op


@cache
def _moe_points(engine: str, held_out: bool = False) -> tuple:
    """(measured point, its deployment's parameters) for every fused-MoE point of the dataset (or the held-out
    one): built once per engine, as :func:`fit_moe_grid` costs the same points again for every value it tries
    (clear the cache after a change of the presets: ``_moe_points.cache_clear()``)."""
    names = HELDOUT_FILES if held_out else ("h200-sglang-fused-moe.json",)
    points = [pt for name in names for pt in json.loads((DATA / name).read_text())["points"]]
    return tuple(moe_fit.point_params(points, engine))


def moe_rows(engine: str, values: dict | None = None, as_measured: bool = True, held_out: bool = False) -> list[dict]:
    """Every measured fused-MoE point beside the model's charge for it (:func:`specsim.analysis.moe_fit.rows`):
    on the grid and bytes it ran (``as_measured``, what the fit fits), else the operator as a forward builds it
    plus the shared-expert GEMM where SGLang fuses that expert into the kernel. ``values``: parameters in place
    of the presets' (as the fit tries them). ``held_out``: ``h200-sglang-fused-moe-heldout.json``."""
    return moe_fit.rows(list(_moe_points(engine, held_out)), values, as_measured)


def fit_moe_grid(engine: str = "sglang", shapes: tuple[str, ...] | None = None) -> dict:
    """The fused-MoE kernel's parameters (``moe_fit.GRID_PARAMS``) fitted to the dataset's points
    (:func:`specsim.analysis.moe_fit.fit`); ``shapes``: fit to those shapes only (the others held out)."""
    pairs = list(_moe_points(engine))
    keep = [i for i, (pt, _) in enumerate(pairs) if shapes is None or pt["shape"] in shapes]
    f = moe_fit.fit(pairs, keep)
    f["by_shape"] = {(sh, part): moe_fit.stats([r for r in f["rows"] if r["shape"] == sh and r["part"] == part])
                     for sh in SHAPES for part in OPS}
    return f


def small_rows(engine: str) -> list[dict]:
    d = json.loads((DATA / "h200-small-kernels.json").read_text())
    p = scenario_params(build_scenario(model="llama-3.1-8b", gpu="h200", tp=1, engine=engine))
    rows = []
    for pt in d["points"]:
        if pt["tokens"] == 0 or pt["tokens"] > 64:
            continue
        us = _per_call_us(p, Op(pt["kernel"], "elementwise", "misc", 1.0, act_bytes=float(pt["bytes"])))
        rows.append({"kernel": pt["kernel"], "tokens": pt["tokens"], "measured_us": pt["us"], "modeled_us": us,
                     "error_pct": 100.0 * (us / pt["us"] - 1.0)})
    return rows


def gemm_rows(engine: str) -> list[dict]:
    """Every point of ``h200-gemm-tiles.json`` (cuBLAS bf16 GEMMs of Llama-3.1-8B, M = 1 ... 2048 in fine
    steps) beside the model's charge for the same GEMM in a graph replay on the ``h200`` preset. The preset's
    GEMM fit saw the same shapes at the profile's M values (``models/profiles/h200.json``): a point at any
    other M is ``held_out``."""
    d = json.loads((DATA / "h200-gemm-tiles.json").read_text())
    fitted_m = set(json.loads((ROOT / "models" / "profiles" / "h200.json").read_text())["gemm"]["m_values"])
    p = scenario_params(build_scenario(model="llama-3.1-8b", gpu="h200", tp=1, engine=engine))
    rows = []
    for pt in d["points"]:
        op = _gemm(pt["shape"], "misc", 1.0, p, float(pt["M"]), float(pt["K"]), float(pt["N"]), 2.0, p["flops_bf16"])
        us = _per_call_us(p, op)
        rows.append({"shape": pt["shape"], "M": pt["M"], "measured_us": pt["us"], "modeled_us": us,
                     "error_pct": 100.0 * (us / pt["us"] - 1.0), "kernels": pt["kernels"], "held_out": pt["M"] not in fitted_m})
    return rows


#: the per-rank GEMM dims of each measured shape: (N per rank = expert intermediate, K = hidden)
SHAPE_DIMS = {"qwen3-30b-a3b tp1": (768, 2048), "qwen3-30b-a3b tp2": (384, 2048), "qwen3-30b-a3b tp4": (192, 2048),
              "glm-4.7-flash tp1 (no tuned config)": (1536, 2048), "deepseek-v3 tp8 fp8 block": (256, 7168),
              "kimi-k2 tp8 fp8 block (no tuned config)": (256, 7168)}
FAMILIES = {"bf16, tuned (Qwen3 TP1/2/4)": "qwen3", "bf16, default (GLM-4.7-Flash)": "glm",
            "fp8 block, tuned (DeepSeek-V3)": "deepseek", "fp8 block, default (Kimi-K2)": "kimi"}


def fit_cta_form() -> list[dict]:
    """``t = F + bytes / min(B_peak, n_cta x b_cta)`` fitted per family and GEMM (least squares in log time):
    ``n_cta`` is the kernel's live grid, padded rows / BLOCK_SIZE_M x ceil(N_out / BLOCK_SIZE_N), from the
    config each point ran. A candidate form for the routed-expert GEMMs; the model does not use it yet."""
    import math

    import numpy as np
    from scipy.optimize import least_squares

    pts = json.loads((DATA / "h200-sglang-fused-moe.json").read_text())["points"]
    out = []
    for fam, prefix in FAMILIES.items():
        for part in OPS:
            sel = [p for p in pts if p["shape"].startswith(prefix) and p["part"] == part]
            n_out = [2 * SHAPE_DIMS[p["shape"]][0] if part == "gate_up" else SHAPE_DIMS[p["shape"]][1] for p in sel]
            ncta = np.array([p["padded_rows"] / p["config"]["BLOCK_SIZE_M"] * math.ceil(n / p["config"]["BLOCK_SIZE_N"])
                             for p, n in zip(sel, n_out)])
            mbytes = np.array([p["weight_bytes"] / 1e6 for p in sel])
            us = np.array([p["us"] for p in sel])

            def model(x, ncta=ncta, mbytes=mbytes):
                return x[0] + mbytes / np.minimum(x[1], ncta * x[2] / 1e3)

            sol = least_squares(lambda x, us=us, model=model: np.log(model(x) / us), [4.0, 4.0, 30.0],
                                bounds=([0.0, 0.3, 1.0], [60.0, 4.8, 2000.0]))
            err = 100.0 * (model(sol.x) / us - 1.0)
            out.append({"family": fam, "part": part, "points": len(sel), "fixed_us": float(sol.x[0]),
                        "peak_TB_s": float(sol.x[1]), "per_cta_GB_s": float(sol.x[2]),
                        "mape_pct": float(np.mean(np.abs(err))), "worst_pct": float(np.max(np.abs(err)))})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default="sglang")
    ap.add_argument("--points", action="store_true", help="every point, not only the summary by shape")
    ap.add_argument("--fit-cta", action="store_true", help="also fit the CTA-limited form per family (fit_cta_form)")
    ap.add_argument("--fit-moe-grid", action="store_true",
                    help="also fit the fused-MoE kernel's parameters to every point, and leaving each shape out (fit_moe_grid)")
    a = ap.parse_args()
    rows = moe_rows(a.engine)
    print(f"routed-expert GEMMs, model ({a.engine} preset on h200) vs SGLang's fused MoE kernel measured on one H200")
    print(f"{'shape':42s} {'part':8s} {'points':>6s} {'median err %':>12s} {'max |err| %':>11s}")
    for shape in SHAPES:
        for part in OPS:
            errs = [r["error_pct"] for r in rows if r["shape"] == shape and r["part"] == part]
            print(f"{shape:42s} {part:8s} {len(errs):6d} {statistics.median(errs):12.1f} {max(map(abs, errs)):11.1f}")
    if a.points:
        for r in rows:
            print(f"  {r['shape']:42s} {r['part']:8s} M={r['M']:4d} measured {r['measured_us']:8.2f} us "
                  f"modeled {r['modeled_us']:8.2f} us {r['error_pct']:+7.1f} %")
    errs = [r["error_pct"] for r in rows]
    print(f"all {len(errs)} points: MAPE {statistics.mean(map(abs, errs)):.1f} %, median {statistics.median(errs):+.1f} %")
    gemm = gemm_rows(a.engine)
    print("\ncuBLAS bf16 GEMMs, Llama-3.1-8B shapes, M = 1 ... 2048 in fine steps: the points at M values the preset's "
          "fit never saw (held out)")
    for shape in dict.fromkeys(r["shape"] for r in gemm):
        e = [r["error_pct"] for r in gemm if r["shape"] == shape and r["held_out"]]
        print(f"  {shape:14s} {len(e):3d} points  MAPE {statistics.mean(map(abs, e)):5.1f} %  median {statistics.median(e):+5.1f} %  "
              f"range {min(e):+6.1f} .. {max(e):+5.1f} %")
    if a.points:
        for r in gemm:
            print(f"    {r['shape']:14s} M={r['M']:5d} measured {r['measured_us']:8.2f} us modeled {r['modeled_us']:8.2f} us "
                  f"{r['error_pct']:+6.1f} %")
    small = small_rows(a.engine)
    print("\nsmall kernels (1-64 tokens) in a CUDA graph, model's elementwise family vs measured")
    for r in small:
        print(f"  {r['kernel']:36s} tokens {r['tokens']:3d} measured {r['measured_us']:6.2f} us "
              f"modeled {r['modeled_us']:6.2f} us {r['error_pct']:+7.1f} %")
    if a.fit_cta:
        print("\ncandidate form t = F + bytes / min(B_peak, n_cta x b_cta), fitted per family and GEMM")
        for f in fit_cta_form():
            print(f"  {f['family']:32s} {f['part']:8s} F {f['fixed_us']:5.1f} us  B_peak {f['peak_TB_s']:.2f} TB/s  "
                  f"b_cta {f['per_cta_GB_s']:5.1f} GB/s  MAPE {f['mape_pct']:4.1f} %  worst {f['worst_pct']:4.1f} %")
    held = moe_rows(a.engine, held_out=True)
    print(f"\nheld out: {len(held)} points of {' and '.join(HELDOUT_FILES)} (shapes no fit has seen), "
          f"on the grid each ran")
    for shape in HELDOUT_SHAPES:
        for part in OPS:
            errs = [r["error_pct"] for r in held if r["shape"] == shape and r["part"] == part]
            print(f"{shape:42s} {part:8s} {len(errs):6d} {statistics.median(errs):12.1f} {max(map(abs, errs)):11.1f}")
    errs = [r["error_pct"] for r in held]
    print(f"all {len(errs)} held-out points: MAPE {statistics.mean(map(abs, errs)):.1f} %, median {statistics.median(errs):+.1f} %")
    if a.fit_moe_grid:
        f = fit_moe_grid(a.engine)
        print(f"\nfused-MoE kernel parameters fitted to all {f['fitted']['points']} points (MAPE {f['fitted']['mape_pct']:.1f} %, "
              f"worst {f['fitted']['worst_pct']:.1f} %):")
        for k, v in f["values"].items():
            print(f"  {k:30s} {v:.4g}")
        for (shape, part), st in f["by_shape"].items():
            print(f"  {shape:42s} {part:8s} MAPE {st['mape_pct']:5.1f} %  worst {st['worst_pct']:5.1f} %")
        print("each shape held out (fitted to the other five):")
        for shape in SHAPES:
            h = fit_moe_grid(a.engine, tuple(s for s in SHAPES if s != shape))["held_out"]
            print(f"  {shape:42s} {h['points']:3d} points  MAPE {h['mape_pct']:5.1f} %  worst {h['worst_pct']:5.1f} %")
    errs = [r["error_pct"] for r in small]
    engine_style = [r["error_pct"] for r in small if "torch.topk" not in r["kernel"]]
    print(f"all {len(errs)} points: median {statistics.median(errs):+.1f} %; without torch.topk (not an engine kernel: "
          f"engines fuse top-k and softmax) {len(engine_style)} points, median {statistics.median(engine_style):+.1f} %")


if __name__ == "__main__":
    main()
