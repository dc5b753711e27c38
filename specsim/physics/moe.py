"""Routed-expert weight traffic: how many experts a forward over n tokens reads."""

from __future__ import annotations

import math

import numpy as np

from .numeric import ndim as _ndim
from .numeric import scalars as _scalars
from .numeric import where as _w

#: c, the coefficient of variation of a real router's per-expert token share within a layer, for a model without a
#: routing trace of its own: the median of the three public decode traces on real weights (Qwen3-30B-A3B 1.13,
#: Qwen3-Next-80B-A3B 1.00, DeepSeek-R1 1.28; ``calibration/datasets/moe-routing-skew.json``, with their sources)
ROUTING_SKEW_PRIOR = 1.13
#: the traces behind the prior are all of fine-grained routers (128-512 experts; 64 for the GLM-4.7-Flash check):
#: a coarser router (Mixtral's 8) has no public count and keeps uniform routing until measured (``specsim routing``)
PRIOR_MIN_EXPERTS = 64
#: the largest c a scenario takes (``target.moe.routing_skew``); a model's own limit may be lower (max_routing_skew)
ROUTING_SKEW_MAX = 3.0


def max_routing_skew(num_experts: float, experts_per_token: float) -> float:
    """The largest CV a share with mean k/E can have in [0, 1]: sqrt((E - k) / k) (each expert picked by every token
    or by none), capped at :data:`ROUTING_SKEW_MAX`."""
    return min(ROUTING_SKEW_MAX, math.sqrt(max(num_experts - experts_per_token, 0.0) / experts_per_token))


def prior_routing_skew(num_experts: float) -> float:
    """The c a router of ``num_experts`` takes when none is given: :data:`ROUTING_SKEW_PRIOR` from
    :data:`PRIOR_MIN_EXPERTS` experts on, 0 below."""
    return ROUTING_SKEW_PRIOR if num_experts >= PRIOR_MIN_EXPERTS else 0.0


def routing_skew_of(moe) -> float:
    """A MoE's c: its own ``routing_skew``, else the prior for its granularity (:func:`prior_routing_skew`)."""
    c = getattr(moe, "routing_skew", None)
    return prior_routing_skew(moe.num_experts) if c is None else float(c)


def check_routing_skew(value, num_experts: float, experts_per_token: float, field: str) -> float:
    """``value`` as a c this router can have, else a one-line :class:`SpecsimError` naming ``field``."""
    from ..errors import SpecsimError
    from ..io.checks import check_number

    c = check_number(value, field, 0.0, ROUTING_SKEW_MAX) + 0.0  # -0 is 0
    hi = max_routing_skew(num_experts, experts_per_token)
    if c > hi:
        raise SpecsimError(field, value, f"allowed: at most {hi:.3g} for {int(num_experts)} experts, top-"
                           f"{int(experts_per_token)} (sqrt((E - k) / k): every expert then taken by all tokens or none)")
    return c


def expected_distinct_experts(num_experts, experts_per_token, n_tokens, skew=0.0):
    """E[distinct experts hit] by n independent tokens each routed to k of E experts.

    An expert that a token picks with probability p is missed by n tokens with probability (1 - p)^n.
    Uniform routing (``skew`` 0) has p = k/E for every expert: E[distinct] = E (1 - (1 - k/E)^n), k for one
    token, tending to E for many. Real routers favour some experts (``target.moe.routing_skew``, the
    coefficient of variation c of p across a layer's experts): p ~ Beta with mean mu = k/E and CV c, whose
    E[(1 - p)^n] = B(alpha, beta + n) / B(alpha, beta) with alpha + beta = nu = (1 - mu) / (c^2 mu) - 1, written
    as (1 - mu) times the ratio for the other n - 1 tokens, so that one token reads exactly k (E[p] = mu) as
    under uniform routing; a batch reads fewer than uniform, all E in the limit.
    """
    if _scalars(num_experts, experts_per_token, n_tokens, skew):  # one scenario: the same formulas on floats
        e = float(num_experts)
        mu = min(float(experts_per_token) / e, 1.0 - 1e-15)
        nu = _beta_nu(mu, float(skew))
        if nu is None:
            return e * -math.expm1(float(n_tokens) * math.log1p(-mu))
        b, n = (1.0 - mu) * nu, float(n_tokens)
        rest = math.lgamma(b + n) - math.lgamma(b + 1.0) + math.lgamma(nu + 1.0) - math.lgamma(nu + n)
        return e * -math.expm1(math.log1p(-mu) + rest)
    e = np.asarray(num_experts, dtype=float)
    mu = np.minimum(np.asarray(experts_per_token, dtype=float) / e, 1.0 - 1e-15)
    n = np.asarray(n_tokens, dtype=float)
    uniform = e * -np.expm1(n * np.log1p(-mu))
    c = np.asarray(skew, dtype=float)
    if not np.any(c > 0):
        return uniform
    from scipy.special import gammaln  # only a skewed batch of scenarios needs it (CLI start-up stays light)

    raw = (1.0 - mu) / np.maximum(c * c * mu, 1e-300) - 1.0
    nu = np.clip(raw, MIN_BETA_NU, MAX_BETA_NU)
    b = (1.0 - mu) * nu
    rest = gammaln(b + n) - gammaln(b + 1.0) + gammaln(nu + 1.0) - gammaln(nu + n)
    skewed = e * -np.expm1(np.log1p(-mu) + rest)
    return np.where(raw <= MAX_BETA_NU, skewed, uniform)


#: the Beta's smallest alpha + beta: a CV near its bound sqrt((1 - mu) / mu) (every expert's p at 0 or 1) is held here
MIN_BETA_NU = 1e-6
#: above this alpha + beta (a CV of ~0.01 or less) the Beta is uniform routing to ~1e-6, and lgamma differences of
#: such large arguments would lose more than that: the uniform formula is used
MAX_BETA_NU = 1e6


def _beta_nu(mu: float, c: float) -> float | None:
    """alpha + beta of the Beta with mean ``mu`` and CV ``c``; None where the Beta is uniform routing (c ~ 0)."""
    raw = (1.0 - mu) / max(c * c * mu, 1e-300) - 1.0
    return None if raw > MAX_BETA_NU else max(raw, MIN_BETA_NU)


def experts_read(num_experts, experts_per_token, n_tokens, per_token_kernel, independent_tokens=None, skew=0.0):
    """Expert weight reads per forward: distinct experts (fused grouped GEMM) or n*k (gathered).

    A fused kernel reads each distinct expert once: those of ``independent_tokens`` (default n) independent
    tokens, fewer than n where tokens share experts (``target.moe.routing_locality``); a gathered kernel reads
    every token's k experts whatever they share.
    """
    indep = n_tokens if independent_tokens is None else independent_tokens
    fused = expected_distinct_experts(num_experts, experts_per_token, indep, skew)
    if _scalars(num_experts, experts_per_token, n_tokens, per_token_kernel, indep, skew):
        return float(n_tokens) * float(experts_per_token) if per_token_kernel else fused
    gathered = np.asarray(n_tokens, dtype=float) * np.asarray(experts_per_token, dtype=float)
    return np.where(np.asarray(per_token_kernel, dtype=bool), gathered, fused)


def fused_moe_tiles(tokens, num_experts, fp8, tuned):
    """(BLOCK_SIZE_M, BLOCK_SIZE_N, wide) of the fused-MoE Triton kernel over ``tokens`` tokens.

    ``tuned`` = 0: SGLang v0.5.6's ``get_default_config`` (fused_moe_triton_config.py): fp8 block-wise
    64 x 128 x 128; bf16 16 x 32 x 64 while tokens <= experts, else 64 x 64 x 32 (``wide`` = 1: the
    tiles whose bandwidth ``moe_wide_tile_mem_efficiency`` is). ``tuned`` = 1: a tuned table, taken as
    v0.5.6's H200 tables are (``calibration/kernels/sglang_moe_configs/``: the nearest key to the token
    count): 16-row tiles up to ~128 tokens (bf16) / ~512 (fp8), then 32, 64, 128; N tiles of 64 (bf16,
    up to 16 tokens) or 128. The tables' own N tiles vary (64, 128, 256), so a tuned deployment's live
    CTAs can be off by up to 2x (``calibration/kernels/compare.py`` sets the rule's operators beside the
    points' own tiles). int8 weights take the bf16 branch, as ``get_default_config`` does.
    """
    m = tokens
    tuned, fp8 = tuned > 0, fp8 > 0  # 0/1 parameters as booleans (scalars stay Python bools)
    small = m <= num_experts
    d_bm = _w(fp8, 64.0, _w(small, 16.0, 64.0))
    d_bn = _w(fp8, 128.0, _w(small, 32.0, 64.0))
    t_bm = _w(fp8, _w(m <= 768, 16.0, 64.0), _w(m <= 192, 16.0, _w(m <= 384, 32.0, _w(m <= 768, 64.0, 128.0))))
    t_bn = _w(fp8, 128.0, _w(m <= 16, 64.0, 128.0))
    wide = _w(tuned, 0.0, _w(fp8, 0.0, _w(small, 0.0, 1.0)))
    return _w(tuned, t_bm, d_bm), _w(tuned, t_bn, d_bn), wide


def fused_moe_grid(num_experts, experts_per_token, tokens, active, block_m, n_out, block_n, clamp=0.0):
    """(live CTAs, launched CTAs, padded rows) of one fused-MoE GEMM's grid over ``tokens`` rows of the
    kernel (a graph replay's padding rows too) routed to ``active`` distinct experts.

    Rows are the tokens' (token, expert) pairs sorted by expert, each expert's padded to BLOCK_M
    (``moe_align_block_size``): an expert with work holds about max(1, rows/BLOCK_M + 1/2) blocks. The
    grid is launched for the worst case, ``pairs + (E + 1) x (BLOCK_M - 1)`` rows (SGLang v0.5.6's
    ``fused_moe_triton/moe_align_block_size.py``; later releases launch ``pairs x BLOCK_M`` rows while
    pairs < E + 1); blocks past the real rows exit at once. ``clamp`` = 1 (vLLM's
    ``invoke_fused_moe_kernel``): below BLOCK_M tokens at most ``pairs`` blocks are launched. Each
    block spans ceil(N / BLOCK_N) CTAs.
    """
    pairs = tokens * experts_per_token
    if _scalars(num_experts, pairs, active, block_m, n_out, block_n, clamp, tokens):  # one scenario: the same on floats
        per = max(float(pairs) / max(float(active), 1e-9) / block_m + 0.5, 1.0)
        tiles = float(math.ceil(n_out / block_n))
        launched = float(math.ceil((pairs + (num_experts + 1) * (block_m - 1)) / block_m))
        if clamp and tokens < block_m:
            launched = min(launched, float(pairs))
        blocks = max(float(active), 1e-9) * per
        return blocks * tiles, launched * tiles, blocks * block_m
    a = np.maximum(active, 1e-9) if _ndim(active) else max(float(active), 1e-9)
    per_expert = pairs / a / block_m + 0.5
    blocks = a * (np.maximum(per_expert, 1.0) if _ndim(per_expert) else max(per_expert, 1.0))
    tiles_n = np.ceil(n_out / block_n)
    launched_blocks = np.ceil((pairs + (num_experts + 1) * (block_m - 1)) / block_m)
    launched_blocks = np.where((np.asarray(clamp) > 0) & (tokens < block_m), np.minimum(launched_blocks, pairs), launched_blocks)
    if _ndim(tiles_n) == 0 and _ndim(launched_blocks) == 0:
        tiles_n, launched_blocks = float(tiles_n), float(launched_blocks)
    return blocks * tiles_n, launched_blocks * tiles_n, blocks * block_m
