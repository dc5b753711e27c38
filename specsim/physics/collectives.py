"""Tensor-parallel collectives: the small-message regime decode and verify live in, and the large messages
of wide verifies and prefills, which an engine hands to another implementation past a size limit."""

from __future__ import annotations

import numpy as np

from .numeric import scalars as _scalars


def allreduce_us(payload_bytes, tp, alpha_us, bus_bytes_per_s, large=()):
    """All-reduce of one implementation chain: alpha + bytes * 2(tp-1)/tp / bus bandwidth; zero at tp=1.

    alpha (latency) dominates below ~1 MB, which is where a verify of a few tokens sits
    (k x hidden x 2 bytes = 14 KB per token for a 7168-wide model). ``large``: one (size limit in bytes,
    next alpha, next bandwidth) per link of the fallback chain, in order: a message past a link's limit takes the
    next implementation (SGLang's custom all-reduce: one-shot, two-shot past 512 KiB at TP 4, NCCL past 8 MiB).
    """
    alpha, bw = alpha_us, bus_bytes_per_s
    if _scalars(payload_bytes) and all(_scalars(limit) for limit, _, _ in large):  # one size: one implementation
        for limit, nxt_alpha, nxt_bw in large:
            if float(payload_bytes) <= float(limit):
                break
            alpha, bw = nxt_alpha, nxt_bw
        return _ring_us(payload_bytes, tp, alpha, bw)
    size = np.asarray(payload_bytes, dtype=float)
    t = _ring_us(payload_bytes, tp, alpha, bw)
    past = np.ones(size.shape, dtype=bool)  # past every limit so far
    for limit, nxt_alpha, nxt_bw in large:
        past = past & (size > np.asarray(limit, dtype=float))
        if not past.any():  # no point past this limit: the chain ends here
            break
        t = np.where(past, _ring_us(payload_bytes, tp, nxt_alpha, nxt_bw), t)
    return t


def _ring_us(payload_bytes, tp, alpha_us, bus_bytes_per_s):
    """alpha + bytes * 2(tp-1)/tp / bus bandwidth of one implementation; zero at tp=1."""
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
