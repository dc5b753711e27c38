"""A MoE router's skew across its experts, read from expert counts (``specsim routing``).

From each layer's counts the share p_e of tokens that pick expert e gives the distinct experts n independent tokens
hit, sum_e 1 - (1 - p_e)^n (averaged over the layers). ``routing_skew`` is the c whose Beta-distributed shares
(:func:`specsim.physics.moe.expected_distinct_experts`, ``target.moe.routing_skew``) give that curve best, in
log terms over n = 2 ... 1024 (or the tokens counted, if fewer). Counting noise alone makes shares vary by
``noise_cv`` = sqrt((1 - k/E) / m), m the mean count per expert; a fit is reported as unreliable beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import SpecsimError
from ..io.expert_counts import ExpertCounts
from ..physics.moe import expected_distinct_experts, max_routing_skew, prior_routing_skew

#: the token counts the curve is compared at (a decode batch up to a large verify)
CURVE_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
MIN_COUNT_PER_EXPERT = 50.0  # below this the counts' own noise is a large part of the spread (warning)


@dataclass
class RoutingFit:
    """What the counts say about the router; ``routing_skew`` is the value to give ``--routing-skew``."""

    num_experts: int
    experts_per_token: int
    layers: int
    tokens_per_layer: float  # median over layers: the tokens the dump counted
    mean_count_per_expert: float
    noise_cv: float
    cv_median: float  # per-layer CV of the shares, counting noise removed
    cv_min: float
    cv_max: float
    routing_skew: float
    curve: list[dict]  # n, from the counts, uniform, modeled at routing_skew
    fit_max_error_pct: float
    warnings: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    rows_read: int = 0
    rows_skipped: int = 0

    @property
    def prior(self) -> float:
        """The c a scenario of this router takes when none is given (:func:`specsim.physics.moe.prior_routing_skew`)."""
        return prior_routing_skew(self.num_experts)

    def to_dict(self) -> dict:
        return {"kind": "measured", "what": "router skew across experts from expert counts",
                "num_experts": self.num_experts, "experts_per_token": self.experts_per_token, "layers": self.layers,
                "tokens_per_layer": self.tokens_per_layer, "mean_count_per_expert": self.mean_count_per_expert,
                "noise_cv": self.noise_cv, "cv_per_layer": {"median": self.cv_median, "min": self.cv_min,
                                                            "max": self.cv_max},
                "routing_skew": self.routing_skew,
                "prior": self.prior,
                "distinct_experts_vs_tokens": self.curve, "fit_max_error_pct": self.fit_max_error_pct,
                "files": self.files, "rows_read": self.rows_read, "rows_skipped": self.rows_skipped,
                "warnings": self.warnings}


def _layer_shares(counts: dict[int, int], e: int, k: int) -> tuple[np.ndarray, float]:
    """(p_e for each of the E experts, tokens counted) of one layer: each token picks k experts."""
    c = np.zeros(e)
    for idx, n in counts.items():
        c[idx] = n
    tokens = c.sum() / k
    return np.minimum(c / tokens, 1.0), tokens


def fit_routing(data: ExpertCounts, num_experts: int | None = None, experts_per_token: int | None = None) -> RoutingFit:
    """The router's skew from ``data`` (:func:`specsim.io.expert_counts.read_expert_counts`); E and k from the
    arguments (a model preset's), else what the files state; E defaults to the highest expert id + 1."""
    warnings = []
    highest = max((max(d) for d in data.layers.values() if d), default=0)
    e = num_experts or data.num_experts
    if e is None:
        e = highest + 1
        warnings.append(f"num_experts not given: {e} (the highest expert id + 1); give --model or --num-experts")
    k = experts_per_token or data.experts_per_token
    if k is None:
        raise SpecsimError("top-k", None, "the experts each token picks are not in the files; give --model (a MoE "
                           "preset or config.json) or --top-k", show_value=False)
    if highest >= e:
        raise SpecsimError("num-experts", e, f"allowed: more than the highest expert id in the counts ({highest})")
    if not 1 <= k < e:
        raise SpecsimError("top-k", k, f"allowed: an integer in [1, {e - 1}] (fewer than the {e} experts)")
    layers = [lid for lid, d in sorted(data.layers.items()) if sum(d.values()) > 0]
    mu = k / e
    cvs, tokens, curves = [], [], []
    ns = np.asarray(CURVE_TOKENS, dtype=float)
    for lid in layers:
        p, t = _layer_shares(data.layers[lid], e, k)
        busiest = max(data.layers[lid], key=data.layers[lid].get)
        top = data.layers[lid][busiest]
        if top > t * (1 + 1e-9):
            raise SpecsimError("top-k", k, f"layer {lid}: expert {busiest} "
                               f"counts {top:,} picks of {t:,.0f} tokens (its counts / k); each token picks an expert "
                               "at most once, so the router picks fewer experts a token: give its own --top-k")
        m = t * mu  # mean count per expert
        raw = float(p.std() / p.mean())
        cvs.append(float(np.sqrt(max(raw * raw - (1.0 - mu) / m, 0.0))))
        tokens.append(t)
        curves.append((-np.expm1(np.outer(ns, np.log1p(-np.minimum(p, 1 - 1e-15))))).sum(axis=1))
    measured = np.mean(curves, axis=0)
    t_med = float(np.median(tokens))
    m_mean = float(np.mean(tokens)) * mu
    noise = float(np.sqrt((1.0 - mu) / m_mean))
    use = ns <= max(2.0, min(1024.0, t_med))
    use[0] = False  # one token reads k under any c: it carries no information
    c_fit = _fit_c(e, k, ns[use], measured[use]) if use.any() else 0.0
    modeled = np.asarray(expected_distinct_experts(float(e), float(k), ns, np.full(ns.shape, c_fit)), dtype=float)
    uniform = np.asarray(expected_distinct_experts(float(e), float(k), ns, np.zeros(ns.shape)), dtype=float)
    err = 100.0 * float(np.max(np.abs(modeled[use] / measured[use] - 1.0))) if use.any() else 0.0
    if m_mean < MIN_COUNT_PER_EXPERT:
        warnings.append(f"{m_mean:.1f} counts per expert on average: counting noise alone spreads the shares by a CV of "
                        f"{noise:.2f}; count more tokens before trusting the skew")
    curve = [{"tokens": int(n), "from_counts": float(a), "uniform": float(u), "modeled": float(b), "used_in_fit": bool(f)}
             for n, a, u, b, f in zip(ns, measured, uniform, modeled, use)]
    return RoutingFit(e, k, len(layers), t_med, m_mean, noise, float(np.median(cvs)), float(np.min(cvs)),
                      float(np.max(cvs)), c_fit, curve, err, warnings, list(data.files), data.rows_read,
                      data.rows_skipped)


def _fit_c(e: int, k: int, ns: np.ndarray, measured: np.ndarray) -> float:
    """The c in [0, 3] whose Beta shares give ``measured`` distinct experts at ``ns`` best (least squares in logs)."""
    from scipy.optimize import minimize_scalar

    target = np.log(np.maximum(measured, 1e-12))

    def loss(c: float) -> float:
        d = np.asarray(expected_distinct_experts(float(e), float(k), ns, np.full(ns.shape, c)), dtype=float)
        return float(np.sum((np.log(d) - target) ** 2))

    res = minimize_scalar(loss, bounds=(0.0, max_routing_skew(e, k)), method="bounded", options={"xatol": 1e-4})
    return float(res.x) if loss(float(res.x)) <= loss(0.0) else 0.0
