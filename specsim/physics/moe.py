"""Routed-expert weight traffic: how many experts a forward over n tokens reads."""

from __future__ import annotations

import numpy as np


def _scalars(*xs) -> bool:
    return all(isinstance(x, (float, int)) for x in xs)


def expected_distinct_experts(num_experts, experts_per_token, n_tokens):
    """E[distinct experts hit] by n tokens each routed to k of E experts, uniform routing.

    Each expert is missed by one token with probability (1 - k/E), so
    E[distinct] = E * (1 - (1 - k/E)^n): k for one token, tending to E for many.
    Skewed (real) routing reads fewer; this is the upper bound a fused kernel pays.
    """
    if _scalars(num_experts, experts_per_token, n_tokens):  # one scenario: same formula on floats
        e = float(num_experts)
        return e * -np.expm1(float(n_tokens) * np.log1p(-min(float(experts_per_token) / e, 1.0 - 1e-15)))
    e = np.asarray(num_experts, dtype=float)
    k = np.asarray(experts_per_token, dtype=float)
    n = np.asarray(n_tokens, dtype=float)
    return e * -np.expm1(n * np.log1p(-np.minimum(k / e, 1.0 - 1e-15)))


def experts_read(num_experts, experts_per_token, n_tokens, per_token_kernel):
    """Expert weight reads per forward: distinct experts (fused grouped GEMM) or n*k (gathered)."""
    fused = expected_distinct_experts(num_experts, experts_per_token, n_tokens)
    if _scalars(num_experts, experts_per_token, n_tokens, per_token_kernel):
        return float(n_tokens) * float(experts_per_token) if per_token_kernel else fused
    gathered = np.asarray(n_tokens, dtype=float) * np.asarray(experts_per_token, dtype=float)
    return np.where(np.asarray(per_token_kernel, dtype=bool), gathered, fused)
