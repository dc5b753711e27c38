"""The cost model's kernels against the measured ones: routed-expert GEMMs and small kernels on the H200.

    python calibration/kernels/compare.py [--engine sglang] [--points] [--fit-cta] [--fit-moe-efficiency]

For each point of ``calibration/datasets/h200-sglang-fused-moe.json`` (SGLang's fused MoE Triton
kernel timed in a CUDA graph, :mod:`sglang_fused_moe`) the model's ``experts_gate_up`` /
``experts_down`` operator of the same model preset, TP and token count on the ``h200`` preset is
costed as it is inside a graph-replayed forward (its kernel floor, graph node gap, weight bytes at
the engine's routed-expert bandwidth, padded-tile compute), plus the shared-expert GEMM where SGLang
fuses that expert into the kernel: per-call modeled vs measured, and the error by shape. Then the small kernels of ``h200-small-kernels.json`` against the elementwise
family's per-kernel cost, and the cuBLAS GEMMs of ``h200-gemm-tiles.json`` (fine steps in M) against
the ``gemm`` family. Nothing is written; ``--fit-moe-efficiency`` fits the one number the
presets take from these points (the engines' ``moe_mem_efficiency``), ``--fit-cta`` a candidate form.
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

from specsim.analysis.build import build_scenario  # noqa: E402
from specsim.physics.cost import evaluate_ops  # noqa: E402
from specsim.physics.operators import Op, _gemm, target_ops  # noqa: E402
from specsim.physics.params import scenario_params  # noqa: E402

DATA = ROOT / "calibration" / "datasets"
#: the measured shape -> (model preset, TP)
SHAPES = {"qwen3-30b-a3b tp1": ("qwen3-30b-a3b", 1), "qwen3-30b-a3b tp2": ("qwen3-30b-a3b", 2),
          "qwen3-30b-a3b tp4": ("qwen3-30b-a3b", 4), "glm-4.7-flash tp1 (no tuned config)": ("glm-4.7-flash", 1),
          "deepseek-v3 tp8 fp8 block": ("deepseek-v3", 8), "kimi-k2 tp8 fp8 block (no tuned config)": ("kimi-k2", 8)}
OPS = {"gate_up": "experts_gate_up", "down": "experts_down"}
#: where SGLang fuses the shared expert into the routed kernel as one more expert (the point's
#: ``shared_expert_fused``), the model costs it as its own dense GEMM: its charge is the two operators together
SHARED_OPS = {"gate_up": "shared_gate_up", "down": "shared_down"}


def _per_call_us(p: dict, op: Op) -> float:
    """What the cost model charges for one kernel of ``op`` in a graph replay (its row of the forward's table)."""
    row = evaluate_ops(p, [op], 1.0, keep_rows=True)["rows"][0]
    return float(row["us"]) / float(row["count"])


@cache
def _moe_points(engine: str) -> tuple:
    """(measured point, its deployment's parameters) for every fused-MoE point: built once per engine, as
    :func:`fit_moe_mem_efficiency` costs the same points again for every value it tries."""
    meas = json.loads((DATA / "h200-sglang-fused-moe.json").read_text())["points"]
    out = []
    for pt in meas:
        model, tp = SHAPES[pt["shape"]]
        out.append((pt, scenario_params(build_scenario(model=model, gpu="h200", tp=tp, engine=engine, batch=int(pt["M"]), ctx=512))))
    return tuple(out)


def moe_rows(engine: str, moe_mem_efficiency: float | None = None) -> list[dict]:
    """Every measured fused-MoE point beside the model's charge for it (``moe_mem_efficiency``: in place of
    the engine preset's routed-expert bandwidth share, as :func:`fit_moe_mem_efficiency` tries values)."""
    rows = []
    for pt, base in _moe_points(engine):
        p = dict(base)  # the cached parameters stay the preset's
        if moe_mem_efficiency is not None:
            p["moe_mem_efficiency"] = moe_mem_efficiency
        ops = {o.name: o for o in target_ops(p, 1.0)}
        us = _per_call_us(p, ops[OPS[pt["part"]]])
        if pt["shared_expert_fused"]:
            us += _per_call_us(p, ops[SHARED_OPS[pt["part"]]])
        rows.append({"shape": pt["shape"], "part": pt["part"], "M": pt["M"], "measured_us": pt["us"], "modeled_us": us,
                     "error_pct": 100.0 * (us / pt["us"] - 1.0)})
    return rows


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


def fit_moe_mem_efficiency(engine: str = "sglang") -> dict:
    """The engine's ``moe_mem_efficiency`` (routed-expert weight bytes over ``efficiency x`` datasheet HBM
    bandwidth) that fits every measured point of SGLang's fused MoE kernel, with the rest of the model's
    charge (kernel floor, graph node gap, padded-tile compute, the fused shared expert) as it is: least squares
    in log time over all shapes, both GEMMs and M = 1 ... 512 (one value: the model has one per engine)."""
    import numpy as np
    from scipy.optimize import minimize_scalar

    def loss(e: float) -> float:
        return float(sum(np.log(r["modeled_us"] / r["measured_us"]) ** 2 for r in moe_rows(engine, e)))

    best = minimize_scalar(loss, bounds=(0.2, 1.0), method="bounded", options={"xatol": 1e-4})
    rows = moe_rows(engine, float(best.x))
    errs = [r["error_pct"] for r in rows]
    by = {(s, part): statistics.median([r["error_pct"] for r in rows if r["shape"] == s and r["part"] == part])
          for s in SHAPES for part in OPS}
    return {"moe_mem_efficiency": float(best.x), "points": len(rows), "mape_pct": statistics.mean(map(abs, errs)),
            "median_pct": statistics.median(errs), "median_pct_by_shape": by}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default="sglang")
    ap.add_argument("--points", action="store_true", help="every point, not only the summary by shape")
    ap.add_argument("--fit-cta", action="store_true", help="also fit the CTA-limited form per family (fit_cta_form)")
    ap.add_argument("--fit-moe-efficiency", action="store_true",
                    help="also fit the engine's moe_mem_efficiency to every point (fit_moe_mem_efficiency)")
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
    if a.fit_moe_efficiency:
        f = fit_moe_mem_efficiency(a.engine)
        print(f"\nmoe_mem_efficiency fitted to all {f['points']} points: {f['moe_mem_efficiency']:.3f} "
              f"(MAPE {f['mape_pct']:.1f} %, median {f['median_pct']:+.1f} %); median error by shape and GEMM:")
        for (shape, part), e in f["median_pct_by_shape"].items():
            print(f"  {shape:42s} {part:8s} {e:+6.1f} %")
    errs = [r["error_pct"] for r in small]
    engine_style = [r["error_pct"] for r in small if "torch.topk" not in r["kernel"]]
    print(f"all {len(errs)} points: median {statistics.median(errs):+.1f} %; without torch.topk (not an engine kernel: "
          f"engines fuse top-k and softmax) {len(engine_style)} points, median {statistics.median(engine_style):+.1f} %")


if __name__ == "__main__":
    main()
