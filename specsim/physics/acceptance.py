"""Acceptance models: accept length (tau), per-position conditional rates, PMF, tree drafts.

Conventions (SGLang's ``accept len``, EAGLE's tau): the accepted length L counts the bonus
token, so L is in [1, steps + 1]. ``rates[i]`` is P(draft token i+1 accepted | tokens 1..i
accepted). Then tau(steps) = 1 + sum_{i<=steps} prod_{j<=i} rates[j]. All functions broadcast
over leading axes; the last axis is the draft position.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .schema import Acceptance, Scenario


def extend_rates(rates, steps: int) -> np.ndarray:
    """Rates for positions 1..steps: a profile shorter than steps repeats its last value."""
    r = np.atleast_1d(np.asarray(rates, dtype=float))
    m = r.shape[-1]
    if m >= steps:
        return r[..., :steps]
    pad = np.repeat(r[..., -1:], steps - m, axis=-1)
    return np.concatenate([r, pad], axis=-1)


def survival(rates, steps: int) -> np.ndarray:
    """P(L >= i + 1) for i = 1..steps: the cumulative product of conditional rates."""
    return np.cumprod(extend_rates(rates, steps), axis=-1)


def tau_from_rates(rates, steps: int) -> np.ndarray:
    """Expected tokens committed per request per cycle (bonus included)."""
    if steps <= 0:
        return np.ones(np.shape(rates)[:-1])
    return 1.0 + survival(rates, steps).sum(axis=-1)


def pmf_from_rates(rates, steps: int) -> np.ndarray:
    """P(L = 1..steps+1) from conditional rates."""
    s = survival(rates, steps)
    ones = np.ones(s.shape[:-1] + (1,))
    ge = np.concatenate([ones, s], axis=-1)  # P(L >= 1..steps+1)
    nxt = np.concatenate([s, np.zeros(s.shape[:-1] + (1,))], axis=-1)
    return ge - nxt


def rates_from_pmf(pmf) -> np.ndarray:
    """Conditional rates from a PMF over L = 1..m (rate undefined past the support: 0)."""
    p = np.asarray(pmf, dtype=float)
    p = p / p.sum(axis=-1, keepdims=True)
    ge = np.flip(np.cumsum(np.flip(p, -1), -1), -1)  # P(L >= j)
    num, den = ge[..., 1:], ge[..., :-1]
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def constant_rate_from_tau(tau, steps) -> np.ndarray:
    """The i.i.d. rate alpha with (1 - alpha^(steps+1)) / (1 - alpha) = tau (Leviathan et al.)."""
    return scale_profile_to_tau(np.array([0.5]), tau, steps)


#: bracket of log theta when a profile's shape is scaled to an accept length (rates = base ** theta). An upper end of
#: 12 (theta 1.6e5) left a base rate of 1 - 1e-6 at 0.85: an accept length below ~1.85 was silently not reached
LOG_THETA_RANGE = (-30.0, 30.0)


def scale_profile_to_tau(base_rates, tau, steps, iters: int = 80) -> np.ndarray:
    """Reshape a base profile to hit tau at `steps`: rates_i = base_i ** theta (bisection on theta).

    theta -> 0 makes every rate 1 (tau = steps+1); theta -> inf makes them 0 (tau = 1); tau is
    monotone in theta, so the result keeps the base profile's shape (its decay with depth).
    Broadcasts over tau and steps; returns rates of length max(steps).
    """
    lo, hi = LOG_THETA_RANGE  # theta ~1e-13: rates -> 1; ~1e13: rates -> 0, even from a base rate of 1 - 1e-12
    if isinstance(steps, int) and isinstance(tau, (int, float)) and isinstance(base_rates, (list, tuple, np.ndarray)) \
            and np.ndim(base_rates) == 1 and len(base_rates):
        return _scaled_profile_one(base_rates, float(tau), steps, lo, hi)
    tau = np.asarray(tau, dtype=float)
    steps_arr = np.asarray(steps, dtype=int)
    smax = int(np.max(steps_arr))
    logb = np.log(np.clip(extend_rates(base_rates, smax), 1e-9, 1 - 1e-12))
    shape = np.broadcast(tau, steps_arr).shape
    pos = np.arange(1, smax + 1)
    mask = pos <= steps_arr[..., None] if shape else pos <= int(steps_arr)

    def tau_at(log_theta):
        r = np.exp(logb * np.exp(log_theta)[..., None])
        return 1.0 + np.where(mask, np.cumprod(r, axis=-1), 0.0).sum(axis=-1)

    if not shape:  # one scenario, a batch of base profiles: Brent's method
        from .roots import brentq

        t_lo, t_hi = float(tau_at(np.asarray(lo))), float(tau_at(np.asarray(hi)))
        if tau >= t_lo:
            x = lo
        elif tau <= t_hi:
            x = hi
        else:
            x = brentq(lambda v: float(tau_at(np.asarray(v))) - float(tau), lo, hi, xtol=1e-12)
        return np.exp(logb * np.exp(x))
    # many scenarios at once (sweeps): the same monotone root, bracketed in lock-step
    lo_a, hi_a = np.full(shape, lo), np.full(shape, hi)
    for _ in range(iters):
        mid = 0.5 * (lo_a + hi_a)
        too_high = tau_at(mid) > tau
        lo_a, hi_a = np.where(too_high, mid, lo_a), np.where(too_high, hi_a, mid)
    return np.exp(logb * np.exp(0.5 * (lo_a + hi_a))[..., None])


def _scaled_profile_one(base_rates, tau: float, steps: int, lo: float, hi: float) -> np.ndarray:
    """:func:`scale_profile_to_tau` of one profile, one tau and one step count: Brent's method on plain floats (the
    same formula and bracket as the array path)."""
    from .roots import brentq

    base = [float(v) for v in base_rates]
    base += [base[-1]] * (steps - len(base))  # a short profile repeats its last value (extend_rates)
    logb = [math.log(min(max(v, 1e-9), 1 - 1e-12)) for v in base]
    lb = logb[:steps]  # positions past steps are masked out

    def tau_f(log_theta: float) -> float:
        theta, prod, total = math.exp(log_theta), 1.0, 0.0
        for v in lb:
            prod *= math.exp(v * theta)
            total += prod
        return 1.0 + total

    if tau >= tau_f(lo):
        x = lo
    elif tau <= tau_f(hi):
        x = hi
    else:
        x = brentq(lambda v: tau_f(v) - tau, lo, hi, xtol=1e-12)
    return np.exp(np.array(lb) * math.exp(x))


def accept_length_std(rates, steps: int) -> np.ndarray:
    """Standard deviation of tokens committed per request per cycle."""
    if isinstance(steps, int) and isinstance(rates, np.ndarray) and rates.ndim == 1 and len(rates) >= steps >= 0:
        surv, prod = [1.0], 1.0  # one profile: P(L >= 1..steps+1) on plain floats
        for r in rates[:steps].tolist():
            prod *= r
            surv.append(prod)
        surv.append(0.0)
        pmf = [surv[i] - surv[i + 1] for i in range(steps + 1)]
        m = sum(q * (i + 1) for i, q in enumerate(pmf))
        return np.float64(math.sqrt(max(sum(q * (i + 1) ** 2 for i, q in enumerate(pmf)) - m * m, 0.0)))
    pmf = pmf_from_rates(rates, steps)
    L = np.arange(1, steps + 2)
    m = (pmf * L).sum(-1)
    return np.sqrt(np.maximum((pmf * L**2).sum(-1) - m**2, 0.0))


def candidate_rank_probs(rates_at_depth, topk: int) -> np.ndarray:
    """P(the rank-j draft candidate is the accepted token), j = 1..topk, at one depth.

    A draft whose top-1 is accepted with probability r is modelled as placing the target's
    token at rank j with probability r (1 - r)^(j-1): top-1 reproduces the chain, and the
    chance that some candidate matches, 1 - (1 - r)^topk, grows with the width of the tree.
    """
    r = np.asarray(rates_at_depth, dtype=float)[..., None]
    j = np.arange(topk)
    return r * (1 - r) ** j


def tree_accept_length(rates, steps: int, topk: int, num_draft_tokens: int) -> np.ndarray:
    """Expected accepted length of an EAGLE-2/3 dynamic tree, SGLang's construction.

    Level 1 offers ``topk`` candidates; each later level expands the ``topk`` best paths by
    ``topk`` children and keeps the best ``topk`` (pool = topk + (steps-1) topk^2); the verify
    takes the ``num_draft_tokens - 1`` highest-valued nodes. A node's value is the probability
    that its whole path is accepted, so tau = 1 + sum of the chosen values (positional
    independence, as in Sequoia). topk = 1 reduces exactly to :func:`tau_from_rates`.
    """
    r = extend_rates(rates, steps)
    budget = max(int(num_draft_tokens) - 1, 0)
    if topk == 1:
        return tau_from_rates(r, min(steps, budget)) if budget else np.ones(r.shape[:-1])
    lead = r.shape[:-1]
    beam = candidate_rank_probs(r[..., 0], topk)  # (..., topk) level-1 path values
    pool = [beam]
    for dpt in range(1, steps):
        child = beam[..., :, None] * candidate_rank_probs(r[..., dpt], topk)[..., None, :]
        child = child.reshape(lead + (topk * topk,))
        beam = -np.sort(-child, axis=-1)[..., :topk]
        pool.append(child)
    allv = np.concatenate(pool, axis=-1)
    take = min(budget, allv.shape[-1])
    best = -np.sort(-allv, axis=-1)[..., :take]
    return 1.0 + best.sum(axis=-1)


def rates_for(sc: Scenario, steps: int | None = None) -> np.ndarray:
    """Per-position conditional acceptance rates (length >= steps) the scenario implies."""
    a: Acceptance = sc.acceptance
    s = sc.speculation
    n = max(steps or s.steps, s.steps)
    if a.rates is not None:
        return extend_rates(a.rates, n)
    if a.pmf is not None:
        r = rates_from_pmf(a.pmf)
        return extend_rates(r if len(r) else [0.0], n)
    base = np.asarray(a.shape_rates or [0.6])
    if s.topk == 1:
        return extend_rates(scale_profile_to_tau(base, a.accept_length, s.steps)[: s.steps], n)
    # tree: the profile scale theta whose tree accept length matches tau (monotone in theta)
    from .roots import brentq

    b = np.clip(base, 1e-9, 1 - 1e-12)

    def miss(log_theta: float) -> float:
        return float(tree_accept_length(b ** np.exp(log_theta), s.steps, s.topk, s.num_draft_tokens)) - a.accept_length

    lo, hi = LOG_THETA_RANGE
    if miss(lo) <= 0:
        return extend_rates(b ** np.exp(lo), n)
    if miss(hi) >= 0:
        return extend_rates(b ** np.exp(hi), n)
    return extend_rates(b ** np.exp(brentq(miss, lo, hi, xtol=1e-10)), n)


def expected_accept_length(sc: Scenario) -> float:
    s = sc.speculation
    if sc.acceptance.accept_length is not None:
        return float(sc.acceptance.accept_length)
    r = rates_for(sc)
    return float(tree_accept_length(r, s.steps, s.topk, s.num_draft_tokens))
