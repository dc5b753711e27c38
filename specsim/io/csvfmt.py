"""Vectorised CSV writing of numeric columns (no per-row or per-cell Python).

Every cell of a column is a fixed-width byte field built with integer arithmetic on whole
columns: digits come four at a time from a 10,000-entry table of ASCII words, leading zeros of
the integer part are NUL bytes, the separator (``,`` or ``\\n``) is the field's last byte. The
fields of a chunk of rows are laid side by side in one byte matrix (one strided 8-byte store
per field word) and the NUL bytes are dropped in one C pass (``bytes.translate``), which gives
the CSV text of the chunk.

Number formats (every value parses back with ``float()`` to within 1e-6 relative, integers
exactly):

* integers as integers;
* floats in fixed point, with one number of decimals per column, enough for 7 significant
  digits at the column's smallest non-zero magnitude (trailing zeros stay); a column whose range
  would need more than ``_FIXED_MAX_DIGITS`` digits is written in scientific notation with
  7 significant digits (``-1.234568e-07``);
* NaN and infinities as ``nan``, ``inf``, ``-inf``;
* label columns by index into a list of names.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

CHUNK_ROWS = 65_536  # rows per byte matrix (a few MB: stays in cache while filled and compacted)
_SIG = 7  # significant digits kept at a column's smallest magnitude: relative error <= 5e-7
_FIXED_MAX_DIGITS = 14  # integer + fraction digits beyond which a float column goes scientific
_U = np.uint64
_P4 = 10_000


_RAW = np.frombuffer(b"".join(b"%04d" % i for i in range(_P4)), dtype=np.uint8).reshape(_P4, 4)
_TABLES: dict[tuple[str, int, bytes], np.ndarray] = {}


def _table(kind: str, width: int, suffix: bytes = b"") -> np.ndarray:
    """uint64 ASCII words, one per 4-digit group value g (0..9999): the last ``width`` digits of g
    then ``suffix``, first byte in the low byte. ``kind``: "full" keeps leading zeros, "zs"
    turns them into NUL (the units digit always shows), "zn" too but 0 is all NUL; "zs+full" and
    "zn+full" are indexed by g + 10000 * started (digits before this group are non-zero)."""
    key = (kind, width, suffix)
    t = _TABLES.get(key)
    if t is None:
        if "+" in kind:
            t = np.concatenate([_table(kind.split("+")[0], width, suffix), _table("full", width, suffix)])
        else:
            d = _RAW.copy()
            if kind != "full":
                i = np.arange(_P4)
                for k, p in enumerate((1000, 100, 10)):
                    d[i < p, k] = 0
                if kind == "zn":
                    d[0] = 0
            mat = np.zeros((_P4, 8), dtype=np.uint8)
            mat[:, :width] = d[:, 4 - width:]
            if suffix:
                mat[:, width:width + len(suffix)] = np.frombuffer(suffix, dtype=np.uint8)
            t = mat.view("<u8").reshape(_P4)
        _TABLES[key] = t
    return t


class _Field:
    """A fixed-width byte field per row, as little-endian uint64 words (bytes appended left to right)."""

    def __init__(self, m: int):
        self.m = m
        self.words: list[np.ndarray | None] = []
        self.const: list[int] = []
        self.width = 0

    def _grow(self, nbytes: int) -> None:
        need = (self.width + nbytes + 7) // 8
        while len(self.words) < need:
            self.words.append(None)
            self.const.append(0)

    def add(self, piece: np.ndarray, nbytes: int) -> None:
        """Append ``nbytes`` (<= 8) bytes held in the low bytes of each element of ``piece``."""
        self._grow(nbytes)
        j, s = divmod(self.width, 8)
        lo = piece << _U(8 * s) if s else piece
        self.words[j] = lo if self.words[j] is None else (self.words[j] | lo)
        if s and s + nbytes > 8:
            hi = piece >> _U(8 * (8 - s))
            self.words[j + 1] = hi if self.words[j + 1] is None else (self.words[j + 1] | hi)
        self.width += nbytes

    def add_const(self, data: bytes) -> None:
        self._grow(len(data))
        for b in data:
            j, s = divmod(self.width, 8)
            self.const[j] |= b << (8 * s)
            self.width += 1

    def skip(self, nbytes: int) -> None:
        self._grow(nbytes)
        self.width += nbytes

    def put_byte(self, pos: np.ndarray, byte: int, where: np.ndarray) -> None:
        """OR ``byte`` at per-row byte position ``pos`` where ``where``."""
        wj = pos // 8
        val = _U(byte) << ((pos % 8) * 8).astype(_U)
        for j in range(len(self.words)):
            self._or(j, np.where(where & (wj == j), val, _U(0)))

    def _or(self, j: int, arr: np.ndarray) -> None:
        self.words[j] = arr if self.words[j] is None else (self.words[j] | arr)

    def finish(self) -> list[np.ndarray]:
        out = []
        for w, c in zip(self.words, self.const):
            if w is None:
                w = np.full(self.m, c, dtype=_U)
            elif c:
                w |= _U(c)
            out.append(w)
        return out


def _ndig(v: int) -> int:
    return len(str(int(v))) if v > 0 else 1


def _table5(suffix: bytes) -> np.ndarray:
    """uint64 ASCII words of the 5 digits of 0..99999 (leading zeros kept), then ``suffix``."""
    key = ("full5", 5, suffix)
    t = _TABLES.get(key)
    if t is None:
        mat = np.zeros((10 * _P4, 8), dtype=np.uint8)
        v = np.arange(10 * _P4)
        for k in range(4, -1, -1):
            v, mat[:, k] = np.divmod(v, 10)
        mat[:, :5] += 48
        if suffix:
            mat[:, 5:5 + len(suffix)] = np.frombuffer(suffix, dtype=np.uint8)
        t = _TABLES[key] = mat.view("<u8").reshape(10 * _P4)
    return t


def _qr(v: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Quotient and remainder (int64) of non-negative integers ``v`` < 2e15 by ``p``, in float64
    arithmetic (exact there: (v + 0.5) / p is at least 0.5 / p away from an integer, far more
    than its rounding error), several times faster than int64 division."""
    vf = v if v.dtype == np.float64 else v.astype(np.float64)
    q = vf + 0.5
    q *= 1.0 / p
    np.floor(q, out=q)
    r = vf - q * p
    return q.astype(np.int64), r.astype(np.int64)


def _add_int(f: _Field, v: np.ndarray, ndig: int, suppress: bool = True, suffix: bytes = b"") -> None:
    """``ndig`` decimal digits of the non-negative int64 ``v`` (leading zeros as NUL if ``suppress``;
    the units digit always shows), then ``suffix``."""
    if ndig == 5 and not suppress and len(suffix) <= 3:  # one lookup for 5 digits (fractions)
        f.add(_table5(suffix)[v], 5 + len(suffix))
        return
    g = -(-ndig // 4)
    groups = []
    rest = v
    for _ in range(g - 1):
        rest, r = _qr(rest, _P4) if ndig <= 15 else np.divmod(rest, _P4)
        groups.append(r)
    groups.append(rest)
    groups.reverse()
    for k, gk in enumerate(groups):
        width = 4 if k else ndig - 4 * (g - 1)
        suf = suffix if k == g - 1 else b""
        if not suppress:
            piece = _table("full", width, suf)[gk]
        elif g == 1:
            piece = _table("zs", width, suf)[gk]
        elif k == 0:
            piece = _table("zn", width, suf)[gk]
        else:
            table = _table("zs+full" if k == g - 1 else "zn+full", width, suf)
            piece = table[gk + _P4 * (v >= 10 ** (4 * (g - k)))]
        f.add(piece, width + len(suf))


def _lead(v: np.ndarray, ndig: int) -> np.ndarray:
    """Leading zeros of ``v`` written in ``ndig`` digits."""
    lead = np.zeros(v.shape, dtype=np.int64)
    for k in range(1, ndig):
        lead += v < 10**k
    return lead


class _FloatFmt:
    """How one float column is written (decided once from the column's finite range)."""

    def __init__(self, x: np.ndarray):
        lo, hi = (float(np.min(x)), float(np.max(x))) if x.size else (0.0, 0.0)
        self.nonfinite = not (math.isfinite(lo) and math.isfinite(hi))
        if self.nonfinite:
            fin = x[np.isfinite(x)]
            lo, hi = (float(fin.min()), float(fin.max())) if fin.size else (0.0, 0.0)
        self.neg = lo < 0 or (self.nonfinite and bool(np.any(x == -np.inf)))
        amax = max(abs(lo), abs(hi))
        if lo > 0:
            amin = lo
        elif hi < 0:
            amin = -hi
        else:
            ax = np.abs(x)
            ax = ax[(ax > 0) & (ax < np.inf)]
            amin = float(ax.min()) if ax.size else 0.0
        self.sci = False
        if amin == 0.0:  # only zeros
            self.dec, self.idig = 0, 1
        else:
            dec = max(0, math.ceil(_SIG - 1 - math.log10(amin)))
            while dec < 400 and 0.5 * 10.0**-dec > 0.5 * 10.0 ** (1 - _SIG) * amin:
                dec += 1
            self.dec = dec
            self.idig = _ndig(math.floor(amax) + 1) if dec < 400 else 400
            self.sci = self.idig + dec > _FIXED_MAX_DIGITS
        self.edig = 3 if self.sci and (amax >= 1e100 or amin < 1e-99) else 2
        if not self.sci and self.nonfinite:
            # "-inf" must fit: sign slot + integer digits (+ fraction) >= 4
            self.idig = max(self.idig, 4 - (self.dec + 1 if self.dec else 0) - 1)

    def field(self, x: np.ndarray, sep: bytes) -> _Field:
        m = x.shape[0]
        f = _Field(m)
        if self.nonfinite:  # written as 0 here; _nonfinite_fill overwrites those fields
            ok = np.isfinite(x)
            if not ok.all():
                x = np.where(ok, x, 0.0)
        ax = np.abs(x) if self.neg else x
        if self.sci:
            self._sci(f, x, ax)
        else:
            q = ax * 10.0**self.dec
            np.rint(q, out=q)  # an integer < 1e15: exact in float64
            if self.dec:
                ip, fp = _qr(q, 10**self.dec)
            else:
                ip = q.astype(np.int64)
            if self.neg:
                start = f.width
                f.skip(1)
            _add_int(f, ip, self.idig, suffix=b"." if self.dec else sep)
            self.frac_at = f.width
            if self.dec:
                _add_int(f, fp, self.dec, suppress=False, suffix=sep)
            if self.neg:
                f.put_byte(start + _lead(ip, self.idig), ord("-"), x < 0)
            return f
        f.add_const(sep)
        return f

    def _sci(self, f: _Field, x: np.ndarray, ax: np.ndarray) -> None:
        pos = ax > 0
        e = np.floor(np.log10(np.where(pos, ax, 1.0))).astype(np.int64)

        def mant(e):
            s = _SIG - 1 - e
            a = np.clip(s, -300, 300)
            return np.rint(ax * np.power(10.0, a) * np.power(10.0, s - a))

        mv = mant(e)
        hi = mv >= 10.0**_SIG
        if hi.any():
            e = e + hi
            mv = np.where(hi, mant(e), mv)
        low = pos & (mv < 10.0 ** (_SIG - 1))
        if low.any():
            e = e - low
            mv = np.where(low, mant(e), mv)
        mi = np.minimum(mv, 10.0**_SIG - 1).astype(np.int64)
        if self.neg:
            f.add(np.where(x < 0, _U(ord("-")), _U(0)), 1)
        lead = mi // 10 ** (_SIG - 1)
        f.add(lead.astype(_U) + _U(48), 1)
        f.add_const(b".")
        _add_int(f, mi - lead * 10 ** (_SIG - 1), _SIG - 1, suppress=False)
        f.add_const(b"e")
        f.add(np.where(e < 0, _U(ord("-")), _U(ord("+"))), 1)
        _add_int(f, np.abs(e), self.edig, suppress=False)


class _IntFmt:
    def __init__(self, v: np.ndarray):
        lo, hi = (int(np.min(v)), int(np.max(v))) if v.size else (0, 0)  # int() truncates like astype
        self.neg = lo < 0
        self.ndig = _ndig(max(abs(lo), abs(hi)))

    def field(self, v: np.ndarray, sep: bytes) -> _Field:
        f = _Field(v.shape[0])
        if self.neg:
            a = np.abs(v)
            start = f.width
            f.skip(1)
            _add_int(f, a, self.ndig, suffix=sep)
            f.put_byte(start + _lead(a, self.ndig), ord("-"), v < 0)
        else:
            _add_int(f, v, self.ndig, suffix=sep)
        return f


class _LabelFmt:
    def __init__(self, names: list[str], sep: bytes):
        enc = [s.encode() for s in names] or [b""]
        w = max(1, max(len(b) for b in enc))
        k = -(-(w + 1) // 8)
        rows = [(b.rjust(w, b"\0") + sep).ljust(8 * k, b"\0") for b in enc]
        self.width = w + 1
        self.tables = [np.array([int.from_bytes(r[8 * j:8 * j + 8], "little") for r in rows], dtype=_U)
                       for j in range(k)]

    def words(self, codes: np.ndarray) -> list[np.ndarray]:
        return [t[codes] for t in self.tables]


def _nonfinite_fill(words: list[np.ndarray], width: int, x: np.ndarray, sep: bytes) -> None:
    """Overwrite the fields of NaN and infinite values with ``nan``, ``inf``, ``-inf``."""
    for val, text in ((np.nan, b"nan"), (np.inf, b"inf"), (-np.inf, b"-inf")):
        rows = np.isnan(x) if val != val else (x == val)
        if rows.any():
            data = (text + sep).rjust(width, b"\0").ljust(8 * len(words), b"\0")
            for j, w in enumerate(words):
                w[rows] = int.from_bytes(data[8 * j:8 * j + 8], "little")


def _strip_zeros(words: list[np.ndarray], at: int, dec: int) -> list[np.ndarray]:
    """Trailing zeros of the ``dec`` fraction digits from byte ``at`` become NUL, and the point
    too when all are (for the few values of a column in runs)."""
    b = np.ascontiguousarray(np.stack(words, axis=1)).view(np.uint8)
    frac = b[:, at:at + dec]
    trail = np.logical_and.accumulate((frac == 48)[:, ::-1], axis=1)[:, ::-1]
    frac[trail] = 0
    b[trail[:, 0], at - 1] = 0
    w = b.view("<u8")
    return [np.ascontiguousarray(w[:, j]) for j in range(w.shape[1])]


def _column_words(kind: str, fmt, col: np.ndarray, sep: bytes, runs: bool = True) -> tuple[list[np.ndarray], int]:
    """Field words and width of one column chunk; columns in long runs (sweep axes) are
    formatted once per run and repeated."""
    m = col.shape[0]
    h = min(m, 1024)
    if runs and m > 64 and np.count_nonzero(col[1:h] != col[:h - 1]) < h // 16:
        change = np.flatnonzero(col[1:] != col[:-1]) + 1
        if change.size < m // 16:
            starts = np.concatenate(([0], change))
            reps = np.diff(np.append(starts, m))
            words, width = _column_words(kind, fmt, col[starts], sep, runs=False)
            if kind == "float" and not fmt.sci and fmt.dec:
                words = _strip_zeros(words, fmt.frac_at, fmt.dec)
            if starts.size == 1:  # one value: stored by broadcasting
                return [w[0] for w in words], width
            return [np.repeat(w, reps) for w in words], width
    if kind == "label":
        return fmt.words(col.astype(np.int64)), fmt.width
    if kind == "int":
        f = fmt.field(col.astype(np.int64), sep)
    else:
        x = col.astype(np.float64, copy=False)
        f = fmt.field(x, sep)
        if fmt.nonfinite and not np.isfinite(x).all():
            words = f.finish()
            _nonfinite_fill(words, f.width, x, sep)
            return words, f.width
    return f.finish(), f.width


def iter_csv(header: list[str], columns: list[tuple[str, np.ndarray]],
             labels: dict[int, list[str]] | None = None, chunk_rows: int | None = None) -> Iterator[bytes | bytearray]:
    """CSV bytes of equal-length columns, header first, then one piece per chunk of rows.

    ``columns`` is a list of (kind, array) with kind ``"int"``, ``"float"`` or ``"label"``
    (then ``labels[i]`` names the values of column i)."""
    yield (",".join(header) + "\n").encode()
    n = len(columns[0][1]) if columns else 0
    last = len(columns) - 1
    fmts = []
    for i, (kind, col) in enumerate(columns):
        col = np.asarray(col)
        if kind == "label":
            fmts.append(_LabelFmt(list((labels or {})[i]), b"\n" if i == last else b","))
        elif kind == "int":
            fmts.append(_IntFmt(col))
        else:
            fmts.append(_FloatFmt(col.astype(np.float64, copy=False)))
    step = chunk_rows or CHUNK_ROWS
    buf = mat = None
    for start in range(0, n, step):
        stop = min(n, start + step)
        m = stop - start
        fields = []
        for i, ((kind, col), fmt) in enumerate(zip(columns, fmts)):
            fields.append(_column_words(kind, fmt, np.asarray(col)[start:stop], b"\n" if i == last else b","))
        words, width = fields[-1]
        if width > 8 and width % 8:  # the last word ends exactly at the row's end
            r = width % 8
            words = words[:-2] + [words[-2], (words[-1] << _U(8 * (8 - r))) | (words[-2] >> _U(8 * r))]
            fields[-1] = (words, width)
        total = sum(w for _, w in fields)
        reach, off = total, 0
        for i, (words, width) in enumerate(fields):
            ends = [off + 8 * j + 8 for j in range(len(words))]
            if i == len(fields) - 1 and width > 8 and width % 8:
                ends[-1] = off + width
            reach = max(reach, *ends)
            off += width
        stride = reach
        if mat is None or mat.shape != (m, stride):
            # a bytearray, so that translate needs no copy; every field byte is rewritten per
            # chunk and only NULs are ever written past the last field, so it is reused
            buf = bytearray(m * stride)
            mat = np.frombuffer(buf, dtype=np.uint8).reshape(m, stride)
        # 8-byte stores at any byte offset of a row; fields go left to right, so the bytes a word
        # writes past its field's end are overwritten by the next field (the last one's are NUL)
        view = np.ndarray((m, stride - 7), dtype="<u8", buffer=mat, strides=(stride, 1))
        off = 0
        for i, (words, width) in enumerate(fields):
            for j, w in enumerate(words):
                at = off + 8 * j
                if i == len(fields) - 1 and j == len(words) - 1 and width > 8 and width % 8:
                    at = off + width - 8
                view[:, at] = w
            off += width
        yield buf.translate(None, b"\0")


def columns_to_csv(header: list[str], columns: list[tuple[str, np.ndarray]],
                   labels: dict[int, list[str]] | None = None) -> str:
    """CSV text of equal-length columns (see :func:`iter_csv`)."""
    return "".join([part.decode("ascii") for part in iter_csv(header, columns, labels)])
