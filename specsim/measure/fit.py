"""Torch-free fits of measured timings: latency + bandwidth of collectives, graph replay costs.

The collectives model is the usual alpha-beta one, in nccl-tests' bus-bandwidth convention:

    t(size) = alpha_us + bus_bytes(op, size, n) / bus_bytes_per_s

with ``bus_bytes = 2 (n-1)/n * size`` for an all-reduce of ``size`` bytes and
``(n-1)/n * size`` for an all-gather whose gathered output is ``size`` bytes. The fit minimises
the relative error (small messages, which decide the latency, weigh as much as large ones) with
both parameters kept non-negative.
"""

from __future__ import annotations

import math

import numpy as np

from . import MeasureError

COLLECTIVE_OPS = ("all_reduce", "all_gather")


def bus_bytes(op: str, size_bytes, n: int):
    """Bytes each rank sends over the bus (nccl-tests' busbw convention) for one collective."""
    if n < 1:
        raise MeasureError(f"collectives: world size must be >= 1, got {n}")
    s = np.asarray(size_bytes, dtype=float)
    if op == "all_reduce":
        return s * 2.0 * (n - 1) / n
    if op == "all_gather":
        return s * (n - 1) / n
    raise MeasureError(f"collectives: unknown op {op!r}; expected one of {', '.join(COLLECTIVE_OPS)}")


def _nn_lstsq_2(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares min |A x - b| with x >= 0 for two columns (enumerate the active sets)."""
    best, best_r = None, math.inf
    cands = []
    try:
        x, *_ = np.linalg.lstsq(A, b, rcond=None)
        cands.append(x)
    except np.linalg.LinAlgError:
        pass
    for j in range(2):
        col = A[:, j]
        den = float(col @ col)
        x = np.zeros(2)
        if den > 0:
            x[j] = max(float(col @ b) / den, 0.0)
        cands.append(x)
    for x in cands:
        if np.all(x >= 0):
            r = float(np.sum((A @ x - b) ** 2))
            if r < best_r:
                best, best_r = x, r
    return best if best is not None else np.zeros(2)


def fit_alpha_beta(x_bytes, t_us) -> dict:
    """Fit ``t = alpha_us + x / bw`` (x in bytes, t in us), relative error, alpha and 1/bw >= 0.

    Returns ``alpha_us``, ``bytes_per_s`` (inf when the data show no size dependence), the
    relative residuals' median / max in percent and the number of points.
    """
    x = np.asarray(x_bytes, dtype=float)
    t = np.asarray(t_us, dtype=float)
    ok = np.isfinite(x) & np.isfinite(t) & (t > 0) & (x >= 0)
    x, t = x[ok], t[ok]
    if x.size < 2:
        raise MeasureError("fit: need at least two positive, finite timings")
    A = np.stack([np.ones_like(x), x], axis=1) / t[:, None]
    b = np.ones_like(t)
    alpha, inv_bw = _nn_lstsq_2(A, b)
    pred = alpha + inv_bw * x
    rel = np.abs(pred - t) / t
    return {
        "alpha_us": float(alpha),
        "bytes_per_s": float(1e6 / inv_bw) if inv_bw > 0 else math.inf,
        "median_err_pct": float(100 * np.median(rel)),
        "max_err_pct": float(100 * np.max(rel)),
        "n": int(x.size),
    }


def fit_collective(op: str, n: int, sizes_bytes, t_us) -> dict:
    """alpha (us) and bus bandwidth (bytes/s) of one collective at world size n."""
    f = fit_alpha_beta(bus_bytes(op, sizes_bytes, n), t_us)
    return {
        "alpha_us": f["alpha_us"],
        "bus_bytes_per_s": f["bytes_per_s"],
        "median_err_pct": f["median_err_pct"],
        "max_err_pct": f["max_err_pct"],
        "n_points": f["n"],
    }


def fit_linear(x, y, relative: bool = False) -> tuple[float, float]:
    """Least squares ``y = a + b x`` with a, b >= 0 (graph replay: fixed + per node).

    ``relative=True`` minimises the relative error, so small x (which fix ``a``) weigh as much as
    large ones."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & ((y > 0) if relative else True)
    x, y = x[ok], y[ok]
    if x.size < 2:
        raise MeasureError("fit: need at least two points")
    A = np.stack([np.ones_like(x), x], axis=1)
    b = y
    if relative:
        A, b = A / y[:, None], np.ones_like(y)
    a0, b0 = _nn_lstsq_2(A, b)
    return float(a0), float(b0)


def fit_collectives_section(section: dict) -> dict:
    """Fit every (tp, op, mode) series of a collectives section in place; returns the section.

    ``section = {"tp": {"2": {"all_reduce": {"graph": {"points": [{"bytes", "us"}...]}, "eager": ...}}}}``;
    each series gains ``fit = {alpha_us, bus_bytes_per_s, ...}``.
    """
    if not isinstance(section, dict) or not isinstance(section.get("tp"), dict):
        raise MeasureError("collectives: expected an object with a 'tp' object")
    for tp_key, ops in section["tp"].items():
        try:
            n = int(tp_key)
        except ValueError:
            raise MeasureError(f"collectives.tp: key {tp_key!r} is not an integer world size") from None
        if not isinstance(ops, dict):
            raise MeasureError(f"collectives.tp.{tp_key}: expected an object")
        for op, modes in ops.items():
            if op not in COLLECTIVE_OPS:
                continue
            for series in modes.values():
                pts = series.get("points", []) if isinstance(series, dict) else []
                good = [p for p in pts if isinstance(p, dict) and p.get("us") and p.get("bytes") is not None]
                if len(good) >= 2:
                    series["fit"] = fit_collective(op, n, [p["bytes"] for p in good], [p["us"] for p in good])
    return section


def collective_sizes(
    hidden_sizes=(4096, 7168, 8192),
    tokens=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
    vocabs=(128256, 163840),
    gather_tokens=(1, 2, 4, 8, 16, 32, 64),
    itemsize: int = 2,
) -> dict:
    """Message sizes (bytes) the engines send: all-reduce of tokens x hidden, all-gather of logits.

    All-gather sizes are the gathered output (tokens x vocab), which the logits gather of a TP
    lm_head produces; sizes not divisible by the world size are rounded down to it at run time.
    """
    ar = sorted({t * h * itemsize for t in tokens for h in hidden_sizes})
    ag = sorted({t * v * itemsize for t in gather_tokens for v in vocabs} | set(ar))
    return {"all_reduce": ar, "all_gather": ag}
