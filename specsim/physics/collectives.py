"""Tensor-parallel collectives in the small-message regime that decode and verify live in."""

from __future__ import annotations

import numpy as np

from .numeric import scalars as _scalars


def allreduce_us(payload_bytes, tp, alpha_us, bus_bytes_per_s):
    """Ring/one-shot all-reduce: alpha + bytes * 2(tp-1)/tp / bus bandwidth; zero at tp=1.

    alpha (latency) dominates below ~1 MB, which is where a verify of a few tokens sits
    (k x hidden x 2 bytes = 14 KB per token for a 7168-wide model).
    """
    if _scalars(payload_bytes, tp, alpha_us, bus_bytes_per_s):  # one scenario: float arithmetic, same formula
        tp = float(tp)
        return alpha_us + float(payload_bytes) * 2.0 * (tp - 1.0) / tp / bus_bytes_per_s * 1e6 if tp > 1 else 0.0
    tp = np.asarray(tp, dtype=float)
    t = alpha_us + np.asarray(payload_bytes, dtype=float) * 2.0 * (tp - 1.0) / tp / bus_bytes_per_s * 1e6
    return np.where(tp > 1, t, 0.0)


def allgather_us(total_bytes, tp, alpha_us, bus_bytes_per_s):
    """All-gather of a tensor of total_bytes split over tp ranks: alpha + bytes (tp-1)/tp / bw."""
    if _scalars(total_bytes, tp, alpha_us, bus_bytes_per_s):
        tp = float(tp)
        return alpha_us + float(total_bytes) * (tp - 1.0) / tp / bus_bytes_per_s * 1e6 if tp > 1 else 0.0
    tp = np.asarray(tp, dtype=float)
    t = alpha_us + np.asarray(total_bytes, dtype=float) * (tp - 1.0) / tp / bus_bytes_per_s * 1e6
    return np.where(tp > 1, t, 0.0)
