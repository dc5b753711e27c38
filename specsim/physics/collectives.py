"""Tensor-parallel collectives: the small-message regime decode and verify live in, and the large messages
of wide verifies and prefills, which an engine hands to another implementation past a size limit."""

from __future__ import annotations

import numpy as np

from .numeric import scalars as _scalars


def allreduce_us(payload_bytes, tp, alpha_us, bus_bytes_per_s, large=None):
    """Ring/one-shot all-reduce: alpha + bytes * 2(tp-1)/tp / bus bandwidth; zero at tp=1.

    alpha (latency) dominates below ~1 MB, which is where a verify of a few tokens sits
    (k x hidden x 2 bytes = 14 KB per token for a 7168-wide model). ``large`` = (size limit in bytes,
    fallback alpha, fallback bandwidth): a message past the limit takes the fallback (SGLang's custom
    all-reduce hands messages above 8 MiB to NCCL, whose ring streams faster: a wide verify or a prefill).
    """
    if large is not None:
        limit, fb_alpha, fb_bw = large
        if _scalars(payload_bytes, limit):  # one message size: one implementation takes it
            if float(payload_bytes) > float(limit):
                alpha_us, bus_bytes_per_s = fb_alpha, fb_bw
        else:
            over = np.asarray(payload_bytes, dtype=float) > np.asarray(limit, dtype=float)
            own = _ring_us(payload_bytes, tp, alpha_us, bus_bytes_per_s)
            if not over.any():  # no point past the limit: the implementation's own cost throughout
                return own
            return np.where(over, _ring_us(payload_bytes, tp, fb_alpha, fb_bw), own)
    return _ring_us(payload_bytes, tp, alpha_us, bus_bytes_per_s)


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
