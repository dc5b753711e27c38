"""The schema's constants, ranges and cross-field rules as plain Python (no pydantic), declared once.

:mod:`specsim.physics.schema` builds its pydantic models from these, and the start-up path of
``specsim predict`` (:mod:`specsim.physics.record`) checks a deployment's overrides with the same
functions without loading pydantic at all.
"""

from __future__ import annotations

import math

DTYPE_BYTES: dict[str, float] = {
    # bytes per weight element, including the scale overhead of group-quantised formats
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0 + 4.0 / 128 / 128,  # block-scaled 128x128 fp32 scales (DeepSeek-V3 style)
    "int8": 1.0 + 2.0 / 128,  # per-group-128 bf16 scales
    "int4": 0.5 + 2.0 / 32,  # group 32, bf16 scales (Kimi-K2 compressed-tensors, group_size 32)
    "fp4": 0.5 + 1.0 / 16,  # NVFP4: fp8 scale per 16 elements
}
MAX_ALLREDUCE_CHAIN = 3  # all-reduce implementations one path may chain (one-shot -> two-shot -> NCCL)
MAX_SAMPLES = 1e13  # draft training samples a field or flag may name (published drafts: 3.7e4-1.4e6)
MAX_GPUS_PER_REPLICA = 100_000  # GPUs one serving replica may span (the largest clusters hold ~1e5)
MAX_ALLREDUCE_ALPHA_US = 1e6  # an all-reduce latency a field or flag may give, us (1 s)
MAX_LIST = 4096  # items in any list of numbers (capture sizes, rates)
MAX_TEXT = 10_000  # characters in any text field (names, sources, notes): longer input is refused, not rendered
CAPTURE_SIZES = (1, 10_000_000)  # inclusive range of a captured CUDA-graph size (requests or tokens)

#: inclusive ranges of the fields a deployment's flags set: ``model.field`` -> (lowest, highest)
LIMITS: dict[str, tuple[float, float]] = {
    "Parallel.tp": (1, 4096),
    "Speculation.steps": (1, 64),
    "Speculation.topk": (1, 64),
    "Speculation.num_draft_tokens": (1, 4096),
    "Acceptance.accept_length": (1, 65),
    "Workload.batch": (1, 1_000_000),
    "Workload.ctx": (0, 100_000_000),
    "Engine.max_running_requests": (1, 10_000_000),
    "Engine.kv_pool_tokens": (1, 10_000_000_000),
    "Engine.kv_memory_fraction": (0.01, 1.0),
}
#: a deployment flag -> the :data:`LIMITS` range its value must lie in
FLAG_LIMITS: dict[str, str] = {
    "batch": "Workload.batch", "ctx": "Workload.ctx", "tp": "Parallel.tp", "steps": "Speculation.steps",
    "topk": "Speculation.topk", "draft-tokens": "Speculation.num_draft_tokens",
    "max-running-requests": "Engine.max_running_requests",
    "kv-pool-tokens": "Engine.kv_pool_tokens", "mem-fraction": "Engine.kv_memory_fraction",
}


def bounds(name: str) -> dict[str, float]:
    """``ge`` / ``le`` keywords of a :data:`LIMITS` range, for the schema's ``Field``."""
    lo, hi = LIMITS[name]
    return {"ge": lo, "le": hi}


def in_limits(name: str, value) -> bool:
    lo, hi = LIMITS[name]
    return lo <= value <= hi


def check_range(lo: float | None, hi: float | None, value, flag: str):
    """Refuse ``value`` outside [lo, hi] with the one-line error naming ``flag``; else return it."""
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        from ..errors import SpecsimError, fmt_bound

        lo_s = "" if lo is None else fmt_bound(lo)
        hi_s = "" if hi is None else fmt_bound(hi)
        what = "an integer" if float(lo if lo is not None else 0).is_integer() and float(hi if hi is not None else 0).is_integer() else "a number"
        raise SpecsimError(flag, value, f"allowed: {what} in [{lo_s}, {hi_s}]" if lo is not None and hi is not None
                           else f"allowed: >= {lo_s}" if lo is not None else f"allowed: <= {hi_s}")
    return value


def check_limit(name: str, value, flag: str | None = None):
    """:func:`check_range` on the :data:`LIMITS` range ``name`` (``"Workload.batch"``)."""
    return check_range(*LIMITS[name], value, flag or name.split(".")[1])


def draft_tokens_for(steps: int, topk: int, requested: int | None = None) -> int | None:
    """The one draft-token rule (SGLang's): the verify width for steps/topk, None if ``requested`` is impossible.

    topk = 1: "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1"; a tree keeps
    the best ``num_draft_tokens - 1`` of its ``topk + (steps - 1) topk^2`` candidates (default
    ``steps x topk + 1``, at most the pool + 1 and 64).
    """
    if topk == 1:
        return steps + 1
    pool = topk + (steps - 1) * topk * topk
    if requested is None:
        return min(steps * topk + 1, pool + 1, 64)
    return requested if requested - 1 <= pool else None


def acceptance_problem(accept_length, rates, pmf, shape_rates) -> str | None:
    """What is wrong with an acceptance (exactly one of accept length, rates, PMF), or None."""
    if sum(x is not None for x in (accept_length, rates, pmf)) != 1:
        return "give exactly one of accept_length, rates, pmf"
    if rates is not None and (not rates or any(not 0 <= r <= 1 for r in rates)):
        return "rates must be a non-empty list of values in [0, 1]"
    if pmf is not None and (len(pmf) < 1 or any(p < 0 for p in pmf) or abs(sum(pmf) - 1) > 1e-6):
        return "pmf must be non-negative and sum to 1"
    if shape_rates is not None and (not shape_rates or any(not 0 < r < 1 for r in shape_rates)):
        return "shape_rates must be a non-empty list of values in (0, 1)"
    if accept_length is not None and accept_length < 1:
        return "accept_length must be >= 1"
    return None


def scenario_problem(tp: int, target_heads: int, draft_heads: int, accept_length, steps: int) -> str | None:
    """What makes a whole scenario inconsistent (TP must divide the heads, tau <= steps + 1), or None."""
    if target_heads % tp:
        return f"parallel.tp={tp} must divide target.attention.num_heads={target_heads}"
    if draft_heads % tp:
        return f"parallel.tp={tp} must divide draft.num_heads={draft_heads}"
    if accept_length is not None and accept_length > steps + 1 + 1e-9:
        return f"acceptance.accept_length={accept_length} must be <= steps+1={steps + 1}"
    return None


def finite_number(x: object) -> bool:
    """A JSON number as the schema takes it: an int or a finite float (not a bool)."""
    return (type(x) is int and abs(x) < 1e300) or (type(x) is float and math.isfinite(x))
