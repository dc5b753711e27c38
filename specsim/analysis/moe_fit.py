"""The fused-MoE kernel's parameters fitted to measured points of SGLang's Triton kernel.

A point is one call of the kernel's gate_up or down GEMM at one per-rank shape and token count, as
``calibration/kernels/sglang_fused_moe.py`` (and ``specsim measure gpu --sections moe``) times it:
``{"shape", "part", "M", "shared_expert_fused", "experts_read", "weight_bytes", "padded_rows",
"config", "us"}``. Each is costed by the model's ``grouped_gemm`` family on the grid and bytes it
ran (:func:`measured_op`), on the deployment its shape names (:data:`SHAPE_DEPLOYMENTS`); the fit
moves :data:`GRID_PARAMS` (least squares in log time), the rest of the charge (kernel floor, graph
node gap, padded-row compute) is the model's. Used by ``calibration/kernels/compare.py`` and, for a
user's own profile, by :func:`specsim.analysis.profile_fit.fit_profile`.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

import numpy as np

#: measured shape -> (model preset, TP[, weight dtype]) it is the routed-expert GEMM of
SHAPE_DEPLOYMENTS = {
    "qwen3-30b-a3b tp1": ("qwen3-30b-a3b", 1), "qwen3-30b-a3b tp2": ("qwen3-30b-a3b", 2),
    "qwen3-30b-a3b tp4": ("qwen3-30b-a3b", 4), "glm-4.7-flash tp1 (no tuned config)": ("glm-4.7-flash", 1),
    "deepseek-v3 tp8 fp8 block": ("deepseek-v3", 8), "kimi-k2 tp8 fp8 block (no tuned config)": ("kimi-k2", 8),
    # the held-out shapes (calibration/datasets/h200-sglang-fused-moe-heldout.json)
    "qwen3-235b-a22b tp4": ("qwen3-235b-a22b", 4), "qwen3-235b-a22b tp8": ("qwen3-235b-a22b", 8),
    "qwen3-30b-a3b tp8 (no tuned config)": ("qwen3-30b-a3b", 8), "glm-4.7-fp8 tp8 fp8 tensor": ("glm-4.7-fp8", 8),
    # (h200-sglang-fused-moe-heldout-fp8.json) Qwen3-235B-A22B-FP8's block-wise experts: the preset with fp8 weights
    "qwen3-235b-a22b tp4 fp8 block": ("qwen3-235b-a22b", 4, "fp8"),
    "qwen3-235b-a22b tp8 fp8 block (no tuned config)": ("qwen3-235b-a22b", 8, "fp8"),
}
#: the shapes of the fitted dataset (calibration/datasets/h200-sglang-fused-moe.json); the rest are held out
FITTED_SHAPES = ("qwen3-30b-a3b tp1", "qwen3-30b-a3b tp2", "qwen3-30b-a3b tp4", "glm-4.7-flash tp1 (no tuned config)",
                 "deepseek-v3 tp8 fp8 block", "kimi-k2 tp8 fp8 block (no tuned config)")
OPS = {"gate_up": "experts_gate_up", "down": "experts_down"}
#: where SGLang fuses the shared expert into the routed kernel as one more expert (the point's
#: ``shared_expert_fused``), the presets do too (``engine.model_kernels``: the routed operator carries it); an
#: engine that costs it as its own dense GEMM is charged the two operators together
SHARED_OPS = {"gate_up": "shared_gate_up", "down": "shared_down"}
#: the parameters :func:`fit` moves: name -> (scenario part, start value, bounds)
GRID_PARAMS = {
    "moe_mem_efficiency": ("engine", 0.85, (0.2, 1.0)),
    "moe_wide_tile_mem_efficiency": ("engine", 0.6, (0.2, 1.0)),
    "moe_cta_bytes_per_s": ("gpu", 4.4e10, (1e9, 1e12)),
    "moe_cta_bytes_per_s_fp8": ("gpu", 2.7e10, (1e9, 1e12)),
    "moe_cta_exit_us": ("gpu", 0.12, (0.0, 5.0)),
    "moe_cta_tile_us": ("gpu", 0.9, (0.0, 20.0)),
    "moe_cta_tile_us_fp8": ("gpu", 0.9, (0.0, 20.0)),
}
#: the per-CTA numbers that come in two kinds: block-scaled fp8 / int8 tiles take the second (params.gpu_params)
_BY_SCALES = {"moe_cta_bytes_per_s": "moe_cta_bytes_per_s_fp8", "moe_cta_tile_us": "moe_cta_tile_us_fp8"}
_FP8_NAMES = {v: k for k, v in _BY_SCALES.items()}


def point_params(points: list[dict], engine: str = "sglang", gpu: str = "h200", overrides: dict | None = None) -> list:
    """(point, the flat parameters of its deployment at its token count) for every point whose shape is known;
    ``overrides``: parameter values in place of the presets' (a profile's own GPU numbers)."""
    from ..physics.params import scenario_params
    from .build import build_scenario

    out = []
    for pt in points:
        if pt.get("shape") not in SHAPE_DEPLOYMENTS:
            continue
        model, tp, *dtype = SHAPE_DEPLOYMENTS[pt["shape"]]
        # the benchmark's routings are uniform random top-k (specsim.measure.gpu): routing skew 0
        p = scenario_params(build_scenario(model=model, gpu=gpu, tp=tp, engine=engine, batch=int(pt["M"]), ctx=512,
                                           dtype=dtype[0] if dtype else None, routing_skew=0.0))
        p.update(overrides or {})
        out.append((pt, p))
    return out


def per_call_us(p: dict, op) -> float:
    """What the cost model charges for one kernel of ``op`` in a graph replay (its row of the forward's table)."""
    from ..physics.cost import evaluate_ops

    row = evaluate_ops(p, [op], 1.0, keep_rows=True)["rows"][0]
    return float(row["us"]) / float(row["count"])


def _wide_config(pt: dict, p: dict) -> bool:
    """The point ran SGLang's bf16 default 64 x 64 x 32 tiles (the ones ``moe_wide_tile_mem_efficiency`` is for)."""
    cfg = pt["config"]
    return not p["moe_fp8_tiles"] and cfg.get("BLOCK_SIZE_K") == 32 and cfg.get("BLOCK_SIZE_M") == 64


def measured_op(pt: dict, p: dict, op):
    """The model's operator for a measured point, with the grid and weight bytes the point ran: its config's
    tiles, the rows ``moe_align_block_size`` padded (``padded_rows``), the grid the benchmark launched
    (``pairs + (E + 1) x (BLOCK_M - 1)`` rows, as SGLang v0.5.6 does) and the bytes of the experts it read,
    the shared expert included where it rides in the kernel."""
    cfg = pt["config"]
    bm, bn = float(cfg["BLOCK_SIZE_M"]), float(cfg["BLOCK_SIZE_N"])
    tiles_n = math.ceil(op.n_cols / bn)
    fused = bool(pt.get("shared_expert_fused"))
    e_kernel = p["num_experts"] + (1 if fused else 0)
    pairs = pt["M"] * (p["experts_per_token"] + (1 if fused else 0))
    launched = math.ceil((pairs + (e_kernel + 1) * (bm - 1)) / bm) * tiles_n
    wide = _wide_config(pt, p)
    live = pt["padded_rows"] / bm * tiles_n
    return dataclasses.replace(op, bytes=float(pt["weight_bytes"]), rows_padded=float(pt["padded_rows"]),
                               ctas=live, ctas_launched=float(launched), tile_units=live * bm * bn / (64.0 * 128.0),
                               bw_eff=p["moe_wide_tile_mem_efficiency"] if wide else p["moe_mem_efficiency"])


def with_values(p: dict, values: dict | None) -> dict:
    """A copy of ``p`` with :data:`GRID_PARAMS` values in place (the CTA rate as the deployment's scales take it)."""
    q = dict(p)
    for k, v in (values or {}).items():
        if k in _FP8_NAMES:  # the block-scaled kind: the deployment's parameter where its tiles are block-scaled
            if q["moe_block_scaled"]:
                q[_FP8_NAMES[k]] = v
        elif k in _BY_SCALES:
            if not q["moe_block_scaled"]:
                q[k] = v
        else:
            q[k] = v
    return q


def rows(pairs: list, values: dict | None = None, as_measured: bool = True) -> list[dict]:
    """Every point beside the model's charge: on the grid it ran (``as_measured``), else the operator as a
    forward builds it (tiles from the config rule, expected padding) plus a fused shared expert's GEMM."""
    from ..physics.operators import target_ops

    out = []
    for pt, base in pairs:
        p = with_values(base, values)
        ops = {o.name: o for o in target_ops(p, 1.0)}
        op = ops[OPS[pt["part"]]]
        if as_measured:
            us = per_call_us(p, measured_op(pt, p, op))
        else:
            us = per_call_us(p, op)
            shared = ops[SHARED_OPS[pt["part"]]]
            if pt.get("shared_expert_fused") and np.any(np.asarray(shared.count) > 0):
                us += per_call_us(p, shared)  # an engine preset that costs the fused shared expert as its own GEMM
        out.append({"shape": pt["shape"], "part": pt["part"], "M": pt["M"], "measured_us": pt["us"], "modeled_us": us,
                    "error_pct": 100.0 * (us / pt["us"] - 1.0)})
    return out


def stats(rs: list[dict]) -> dict:
    e = [abs(r["error_pct"]) for r in rs]
    return {"points": len(e), "mape_pct": statistics.mean(e) if e else None, "worst_pct": max(e) if e else None}


def identifiable(pairs: list) -> list[str]:
    """The :data:`GRID_PARAMS` these points can set: a tile kind's numbers only where some point has that kind."""
    names = ["moe_mem_efficiency", "moe_cta_exit_us"]
    if any(_wide_config(pt, p) for pt, p in pairs):
        names.append("moe_wide_tile_mem_efficiency")
    if any(not p["moe_block_scaled"] for _, p in pairs):
        names += ["moe_cta_bytes_per_s", "moe_cta_tile_us"]
    if any(p["moe_block_scaled"] for _, p in pairs):
        names += ["moe_cta_bytes_per_s_fp8", "moe_cta_tile_us_fp8"]
    return names


POINT_SD_LOG = 0.1  # with a prior: a point's modeled time is good to ~10 % (the fit's residual scale)


def fit(pairs: list, keep: list[int] | None = None, names: tuple[str, ...] | None = None,
        start: dict | None = None, prior_sd_log: float | None = None) -> dict:
    """:data:`GRID_PARAMS` (or ``names`` of them) fitted to the points ``keep`` (default all), from ``start`` (default
    the table's start values); returns the values, the fitted points' stats and the others' (held out).
    ``prior_sd_log``: each parameter also pulled toward its start with that spread (log units), so what a few
    points do not pin stays near the start instead of wandering to a bound."""
    from scipy.optimize import least_squares

    names = list(names or GRID_PARAMS)
    keep = list(range(len(pairs))) if keep is None else list(keep)
    scale = np.array([(start or {}).get(k) or GRID_PARAMS[k][1] for k in names])  # a zero start: the table's

    def resid(x):
        rs = rows([pairs[i] for i in keep], dict(zip(names, x * scale)))
        data = [np.log(r["modeled_us"] / r["measured_us"]) for r in rs]
        if prior_sd_log is None:
            return data
        return [d / POINT_SD_LOG for d in data] + list(np.log(np.maximum(x, 1e-12)) / prior_sd_log)

    lo = np.array([GRID_PARAMS[k][2][0] for k in names]) / scale
    hi = np.array([GRID_PARAMS[k][2][1] for k in names]) / scale
    x0 = np.clip(np.ones(len(names)), lo + 1e-9, hi - 1e-9)  # a start outside the bounds moves inside
    sol = least_squares(resid, x0, bounds=(lo, hi), x_scale=1.0, diff_step=1e-3)
    values = dict(zip(names, (float(v) for v in sol.x * scale)))
    rs = rows(pairs, values)
    kept = set(keep)
    return {"values": values, "rows": rs, "fitted": stats([r for i, r in enumerate(rs) if i in kept]),
            "held_out": stats([r for i, r in enumerate(rs) if i not in kept])}
