"""The tree verify's attention kernel (FlashInfer's FA2 prefill with a custom mask) fitted to measured calls.

SGLang verifies a tree (topk > 1) of a model without MLA on that kernel (``engine.tree_attention_fa2_custom_mask``).
Each measured point is one call over B requests x k query tokens on ctx cached tokens for a GQA shape (query and
KV heads per GPU, head dim), as ``calibration/kernels/flashinfer_tree.py`` and ``specsim measure gpu --sections
flashinfer`` write them. The fit moves the three engine numbers the attention operator takes on that path
(:data:`ENGINE_FIELDS`) by least squares on log time; everything else is the deployment's (GPU, the ``sglang``
preset's attention terms).
"""

from __future__ import annotations

import numpy as np

from ..errors import SpecsimError

#: the engine fields the fit sets, and the parameter names the operators read them by
ENGINE_FIELDS = ("tree_mask_attention_slowdown", "tree_mask_attention_flop_efficiency",
                 "tree_mask_attention_us_per_tile_row")
PARAM_KEYS = ("tree_mask_attention_slowdown", "tree_mask_flop_efficiency", "tree_mask_us_per_tile_row")
START, LOWER, UPPER = (1.5, 0.2, 0.05), (1.0, 0.01, 0.0), (10.0, 1.0, 1.0)
SCALE = (1.0, 0.1, 0.05)
#: a GQA shape per GPU -> a preset whose attention has it (the fit's operator needs a model's layer)
SHAPE_MODELS = {(32, 8, 128): ("qwen3-8b", 1), (16, 2, 128): ("llama-3.1-70b", 4), (64, 8, 128): ("llama-3.1-70b", 1),
                (8, 1, 128): ("llama-3.1-70b", 8)}
MIN_POINTS = 6
MAX_MAPE_PCT = 30.0  # a kernel this far from the operator's form is not the kernel the points claim


def usable(points: list[dict]) -> list[dict]:
    """The points with a custom-mask time on a shape the fit can build (:data:`SHAPE_MODELS`)."""
    return [p for p in points if p.get("kernel") == "prefill_paged" and p.get("custom_mask_gpu_ms")
            and (p["num_qo_heads"], p["num_kv_heads"], p["head_dim"]) in SHAPE_MODELS]


def point_params(points: list[dict], gpu=None, gpu_fields: dict | None = None,
                 engine_fields: dict | None = None) -> list[dict]:
    """One parameter dict per point: the ``sglang`` preset's deployment of that shape on the ``h200`` preset, or
    on ``gpu`` (a :class:`~specsim.physics.schema.GPU`) when given, with the FA2 custom-mask path on; ``gpu_fields``
    / ``engine_fields``: values fitted already (a profile's attention terms) in place of the presets'."""
    from ..physics.params import scenario_params
    from .build import build_scenario

    out = []
    for r in points:
        model, tp = SHAPE_MODELS[(r["num_qo_heads"], r["num_kv_heads"], r["head_dim"])]
        sc = build_scenario(None, model=model, gpu="h200", tp=tp, engine="sglang", steps=3, topk=4,
                            draft_tokens=int(r["qo_len"]), batch=int(r["batch"]), ctx=int(r["ctx"]),
                            max_running_requests=int(r["batch"]))
        g = sc.gpu if gpu is None else gpu
        sc = sc.model_copy(update={"gpu": g.model_copy(update=gpu_fields or {}),
                                   "engine": sc.engine.model_copy(update=engine_fields or {})})
        p = dict(scenario_params(sc))
        p["tree_fa2_custom_mask"] = 1.0
        out.append(p)
    return out


def modeled_us(p: dict, r: dict, x) -> float:
    """The operator's us per call of the verify's attention kernel for point ``r`` with the numbers ``x``."""
    from ..physics.cycle import verify_breakdown

    q = {**p, **dict(zip(PARAM_KEYS, map(float, x)))}
    rows = verify_breakdown(q, num_draft_tokens=float(r["qo_len"]), keep_rows=True)["rows"]
    op = next(o for o in rows if o["name"] == "attention_gqa")
    return op["us"] / op["count"]


PLAN_FIELDS = ("tree_verify_plan_extra_us", "tree_plan_us_per_request")
PREFILL_PLANS_PER_CYCLE = 2  # the verify's (custom mask) and the draft extend's (causal) prefill plan


def plan_costs(points: list[dict]) -> dict | None:
    """The host side of the same points: each prefill ``plan()``'s time, fitted as ``a + b x batch`` by least
    squares for the custom-mask and the causal plan. Returns the custom-mask plan's intercept over the causal one's
    (``tree_verify_plan_extra_us``) and the prefill plans' per-request slope, the mean of the two, times the
    :data:`PREFILL_PLANS_PER_CYCLE` such plans a tree cycle makes (``tree_plan_us_per_request``); None when the
    points do not carry both plan timings at two batch sizes or more."""
    pts = [p for p in points if p.get("kernel") == "prefill_paged" and p.get("custom_mask_plan_host_us")
           and p.get("causal_plan_host_us")]
    if len({p["batch"] for p in pts}) < 2:
        return None
    b = np.array([float(p["batch"]) for p in pts])
    a = np.vstack([np.ones_like(b), b]).T
    (cm0, cm1), (ca0, ca1) = (np.linalg.lstsq(a, np.array([p[k] for p in pts], dtype=float), rcond=None)[0]
                              for k in ("custom_mask_plan_host_us", "causal_plan_host_us"))
    return {"tree_verify_plan_extra_us": float(max(cm0 - ca0, 0.0)),
            "tree_plan_us_per_request": float(max(PREFILL_PLANS_PER_CYCLE * (cm1 + ca1) / 2, 0.0)),
            "custom_mask_plan_us": [float(cm0), float(cm1)], "causal_plan_us": [float(ca0), float(ca1)],
            "points": len(pts)}


def fit(points: list[dict], gpu=None, gpu_fields: dict | None = None, engine_fields: dict | None = None) -> dict:
    """The three numbers (by :data:`ENGINE_FIELDS`), each point's error and the summary; a SpecsimError when
    fewer than :data:`MIN_POINTS` points are usable or the fit misses by more than :data:`MAX_MAPE_PCT`."""
    from scipy.optimize import least_squares

    pts = usable(points)
    if len(pts) < MIN_POINTS:
        raise SpecsimError("profile.flashinfer", f"{len(pts)} usable points",
                           f"need at least {MIN_POINTS} custom-mask timings on a known GQA shape "
                           f"({', '.join(f'{q}/{k} heads, dim {d}' for q, k, d in SHAPE_MODELS)})")
    ps = point_params(pts, gpu, gpu_fields, engine_fields)
    y = np.array([r["custom_mask_gpu_ms"] * 1e3 for r in pts])

    def resid(x):
        return np.log(np.array([modeled_us(p, r, x) for p, r in zip(ps, pts)]) / y)

    res = least_squares(resid, START, bounds=(LOWER, UPPER), x_scale=SCALE)
    err = 100 * (np.exp(resid(res.x)) - 1)
    mape = float(np.mean(np.abs(err)))
    if mape > MAX_MAPE_PCT:
        raise SpecsimError("profile.flashinfer", f"{len(pts)} points", f"the FA2 custom-mask model fits them only to "
                           f"MAPE {mape:.3g} % (at most {MAX_MAPE_PCT:g} % expected): not that kernel's timings")
    return {"values": {k: float(v) for k, v in zip(ENGINE_FIELDS, res.x)}, "points": len(pts),
            "mape_pct": mape, "worst_pct": float(np.max(np.abs(err))), "within_15_pct": int(np.sum(np.abs(err) <= 15)),
            "errors_pct": [float(e) for e in err]}
