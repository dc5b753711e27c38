"""Vectorised CSV formatting of numeric columns (no per-row Python).

Each chunk of rows is laid out as one 2-D byte matrix (fields right-aligned with a filler byte,
separators and newlines included) built with integer arithmetic on whole columns; dropping the
filler bytes gives the CSV text. Floats get 6 significant digits in fixed notation with
trailing zeros dropped (``%.6g`` without the exponent; values beyond 1e15 or below 1e-10, and
NaN/inf, fall back to ``%.6g`` for that column), integers are written as integers, label
columns by index into a list of names.
"""

from __future__ import annotations

import numpy as np

CHUNK_ROWS = 250_000
_SIG = 6
_FILL = 0
_POW10 = np.array([10**i for i in range(19)], dtype=np.int64)


def _digits(v: np.ndarray, width: int, lead_fill: bool = True) -> np.ndarray:
    """(n, width) ASCII digits of non-negative ints ``v`` (one divmod per digit, from the right);
    leading zeros become filler when ``lead_fill`` (the units digit always shows)."""
    n = v.shape[0]
    if v.size and int(v.max()) < 2**31:
        v = v.astype(np.int32)
    out = np.empty((n, width), dtype=np.uint8)
    rest = v
    for m in range(width - 1, -1, -1):
        rest, r = np.divmod(rest, 10)
        out[:, m] = r
    out += 48
    if lead_fill and width > 1:
        lead = np.zeros(n, dtype=np.int64)  # leading zero digits (at most width-1)
        vv = np.asarray(v, dtype=np.int64)
        for m in range(width - 1):
            lead += vv < _POW10[width - 1 - m]
        cols = np.arange(width)[None, :]
        out[cols < lead[:, None]] = _FILL
    return out


def _ndigits(v: np.ndarray) -> int:
    m = int(v.max()) if v.size else 0
    return max(1, len(str(m)))


def _int_block(col: np.ndarray) -> np.ndarray:
    v = np.asarray(col).astype(np.int64)
    neg = v < 0
    a = np.abs(v)
    w = _ndigits(a)
    body = _digits(a, w)
    if neg.any():
        sign = np.where(neg, ord("-"), _FILL).astype(np.uint8)[:, None]
        body = np.concatenate([sign, body], axis=1)
    return body


def _fallback_block(strings: np.ndarray) -> np.ndarray:
    s = np.asarray(strings).astype("S")
    w = max(1, int(np.strings.str_len(s).max()) if s.size else 1)
    s = s.astype(f"S{w}")  # null-padded: the padding is filler, dropped with the rest
    return np.frombuffer(s.tobytes(), dtype=np.uint8).reshape(len(s), w).copy()


def _float_block(col: np.ndarray) -> np.ndarray:
    x = np.asarray(col, dtype=np.float64)
    if not np.isfinite(x).all():
        return _fallback_block(np.char.mod("%.6g", x))
    ax = np.abs(x)
    nz = ax > 0
    if nz.any() and (ax[nz].max() >= 1e15 or ax[nz].min() < 1e-10):
        return _fallback_block(np.char.mod("%.6g", x))
    exp = np.zeros(x.shape, dtype=np.int64)
    exp[nz] = np.floor(np.log10(ax[nz])).astype(np.int64)
    d = _SIG - 1 - exp  # decimals for 6 significant digits
    q = np.rint(ax * np.power(10.0, d)).astype(np.int64)
    # rounding up to a new power of ten (9.999995 -> 10.0000) keeps 6 significant digits
    over = q >= 10**_SIG
    if over.any():
        q = np.where(over, q // 10, q)
        d = np.where(over, d - 1, d)
    dpos = np.maximum(d, 0)
    ip = np.where(d >= 0, q // _POW10[dpos], q * _POW10[np.maximum(-d, 0)])
    fp = np.where(d > 0, q % _POW10[dpos], 0)
    wi = _ndigits(ip)
    wf = int(dpos.max()) if dpos.size else 0
    parts = []
    neg = (x < 0) & (q > 0)
    if neg.any():
        parts.append(np.where(neg, ord("-"), _FILL).astype(np.uint8)[:, None])
    parts.append(_digits(ip, wi))
    if wf:
        # fp has dpos digits: left-align them in wf columns, then drop trailing zeros
        frac = _digits(fp * _POW10[wf - dpos], wf, lead_fill=False)
        cols = np.arange(wf)[None, :]
        nonzero = frac != 48
        last = np.where(nonzero.any(axis=1), wf - np.argmax(nonzero[:, ::-1], axis=1), 0)  # digits to keep
        frac[cols >= last[:, None]] = _FILL
        parts.append(np.where(last > 0, ord("."), _FILL).astype(np.uint8)[:, None])
        parts.append(frac)
    return np.concatenate(parts, axis=1)


def columns_to_csv(header: list[str], columns: list[tuple[str, np.ndarray]],
                   labels: dict[int, list[str]] | None = None) -> str:
    """CSV text of equal-length columns; ``columns`` is a list of (kind, array) with kind
    ``"int"``, ``"float"`` or ``"label"`` (then ``labels[i]`` names the values of column i)."""
    n = len(columns[0][1]) if columns else 0
    out = [(",".join(header) + "\n").encode()]
    names = {i: _fallback_block(np.array([s.encode() for s in v])) for i, v in (labels or {}).items()}
    comma = np.full((1, 1), ord(","), dtype=np.uint8)
    newline = np.full((1, 1), ord("\n"), dtype=np.uint8)
    for start in range(0, n, CHUNK_ROWS):
        stop = min(n, start + CHUNK_ROWS)
        m = stop - start
        blocks = []
        for i, (kind, col) in enumerate(columns):
            c = col[start:stop]
            if kind == "int":
                b = _int_block(c)
            elif kind == "label":
                b = names[i][np.asarray(c).astype(np.int64)]
            else:
                b = _float_block(c)
            if blocks:
                blocks.append(np.broadcast_to(comma, (m, 1)))
            blocks.append(b)
        blocks.append(np.broadcast_to(newline, (m, 1)))
        mat = np.concatenate(blocks, axis=1).ravel()
        out.append(mat[mat != _FILL].tobytes())
    return b"".join(out).decode("ascii")
