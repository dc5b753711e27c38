"""Ingest SGLang / vLLM speculative-decoding logs and benchmark outputs as calibration data.

Recognised per line (a file may mix formats):

* SGLang ``Decode batch`` stats lines, all known versions (``Decode batch.`` / ``Decode batch,`` /
  ``Decode batch [iter],``; with or without ``accept len``, ``accept rate``, ``cuda graph`` /
  ``cpu graph``, PD-decode and hybrid SWA / mamba fields, trailing comma, log prefix).
* SGLang CUDA-graph capture lines (``Capture cuda graph begin/end/bs [...]``, ``Capture draft
  [extend] cuda graph ...`` and the phase-named ``Capture target verify CUDA graph ...`` style).
* ``bench_speculative.py`` and ``bench_serving.py`` JSON lines.
* vLLM spec-decode metrics lines (V1 ``SpecDecoding metrics: ...`` and V0 ``Speculative
  metrics: ...``).
* Side information: overlap-scheduler messages and ``server_args`` / CLI spec settings.

Every line lands in exactly one bucket: parsed (gave at least one record), skipped (looked like a
known format but was truncated / corrupt / out of range, or was unrecognised JSON) or ignored
(anything else, including the side-information lines) or idle (an SGLang ``Decode batch`` line
of an idle scheduler or a warm-up window, dropped and counted in ``lines_idle``), so
``lines_total == parsed lines + lines_skipped + lines_ignored + lines_idle``. Parsing never
raises except :class:`IngestError` (missing / unreadable file, or nothing usable at all).

Bounded work: files are streamed in 4 MiB blocks (a line longer than 1 MiB counts as one
skipped line), summaries are running statistics, and at most ``MAX_STORED_RECORDS`` records of
each kind are kept as objects, so memory does not grow with the length of a log. A common
``Decode batch`` layout is matched by one regular expression (fast path); every other line
takes the general parser.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import re
import stat as stat_mod
import statistics
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from .safe_read import LONG_LINE

__all__ = [
    "BenchRecord",
    "CaptureRecord",
    "DecodeRecord",
    "IngestError",
    "IngestResult",
    "VllmSpecRecord",
    "ingest_files",
    "ingest_text",
]


class IngestError(ValueError):
    """Raised (one-line message) for a missing/unreadable file or when no record was found."""


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecodeRecord:
    """One SGLang ``Decode batch`` line (stats over the last ``--decode-log-interval`` steps).

    ``accept_length`` is the mean tokens committed per request per cycle (incl. bonus token);
    ``None`` on non-speculative servers. ``accept_rate`` is version dependent (see reference
    section 3.2): recompute it from ``accept_length`` rather than trusting it.
    """

    running_req: int
    accept_length: float | None
    accept_rate: float | None
    cuda_graph: bool | None
    gen_throughput_tok_s: float
    queue_req: int | None
    timestamp: str | None
    tp_rank: int | None
    version_hint: str  # "v0.4.3", "v0.4.6", "v0.5.3" or "newest"


@dataclass(frozen=True)
class CaptureRecord:
    """One SGLang CUDA-graph capture line (startup)."""

    phase: str  # "target", "target_verify", "draft_decode", "draft_extend" or "unknown"
    event: str  # "begin" | "end" | "bs_list"
    avail_mem_gb: float | None
    mem_usage_gb: float | None
    elapsed_s: float | None
    batch_sizes: tuple[int, ...] | None


@dataclass(frozen=True)
class BenchRecord:
    """One ``bench_speculative.py`` or ``bench_serving.py`` JSON line.

    bench_speculative: ``step_time_ms`` is the p20 wall time of one decode iteration (= one spec
    cycle) at ``batch_size``; ``speed_tok_s`` is per-request tokens/s. bench_serving:
    ``output_throughput_tok_s`` is aggregate, ``median_itl_ms`` ~ cycle time, ``batch_size`` is
    ``max_concurrency`` and steps/topk/num_draft_tokens come from ``server_info`` when present
    (0 when the server ran without speculative decoding).
    """

    source: str  # "bench_speculative" | "bench_serving"
    batch_size: int | None
    steps: int | None
    topk: int | None
    num_draft_tokens: int | None
    accept_length: float | None
    step_time_ms: float | None
    speed_tok_s: float | None
    output_throughput_tok_s: float | None
    median_itl_ms: float | None


@dataclass(frozen=True)
class VllmSpecRecord:
    """One vLLM spec-decode metrics line.

    ``per_position_rates`` are as printed by vLLM V1: the fraction of drafts whose position ``i``
    was accepted, i.e. the *unconditional* P(accepted length > i). ``draft_acceptance_rate`` is a
    fraction in [0, 1] (V1 prints a percentage, V0 a fraction). For V0 lines
    ``mean_acceptance_length`` is derived as ``emitted * k / drafted`` (or
    ``system_efficiency * (k + 1)``); for V1 ``num_spec_tokens`` is the number of positions.
    """

    mean_acceptance_length: float | None
    per_position_rates: tuple[float, ...] | None
    num_spec_tokens: int | None
    draft_acceptance_rate: float | None
    accepted_tokens: int | None
    drafted_tokens: int | None


# --------------------------------------------------------------------------------------------
# Result: running statistics (memory independent of the log's length)
# --------------------------------------------------------------------------------------------

MAX_STORED_RECORDS = 10_000  # records of each kind kept as objects (decode, capture, bench, vLLM)
MAX_GROUPS = 20_000  # summary groups (source, steps, topk, draft tokens, batch)
MEDIAN_SAMPLE = 10_000  # cycle times kept per group for the median (a uniform sample beyond)
WARMUP_FACTOR = 8.0  # a decode line this many times slower than its group's typical is warm-up
IDLE_GAP_S = 30.0  # a decode line after a gap this long, far slower than the line before, is idle
_BINS_PER_OCTAVE = 8
_ZERO_BIN = -(10**9)

# per-bin statistics: index names
_N, _ACC_S, _ACC_N, _TOK_S, _TOK_N, _PR_S, _PR_N, _CYC_S, _CYC_N, _BASE_N, _WACC_S, _W_S = range(12)


def _new_stats() -> list[float]:
    return [0, 0.0, 0, 0.0, 0, 0.0, 0, 0.0, 0, 0, 0.0, 0.0]


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((x is None, "" if x is None else x) for x in key)


def _conditional_rates(uncond: list[float]) -> tuple[float, ...]:
    """Convert P(accepted length > i) into P(accept i | accepted 0..i-1)."""
    out: list[float] = []
    prev = 1.0
    for u in uncond:
        c = u / prev if prev > 0 else 0.0
        out.append(min(1.0, max(0.0, c)))
        prev = u
    return tuple(out)


class _RateAcc:
    """Running drafts-weighted (and unweighted) sums of vLLM per-position rates, per length."""

    __slots__ = ("by_len",)

    def __init__(self) -> None:
        # length -> [count, all have drafted tokens, sum w, sum w*u (list), sum u (list)]
        self.by_len: dict[int, list[Any]] = {}

    def add(self, rec: VllmSpecRecord) -> None:
        rates = rec.per_position_rates
        if not rates:
            return
        n = len(rates)
        acc = self.by_len.get(n)
        if acc is None:
            acc = self.by_len[n] = [0, True, 0.0, [0.0] * n, [0.0] * n]
        acc[0] += 1
        w = float(rec.drafted_tokens or 0)
        if not rec.drafted_tokens:
            acc[1] = False
        acc[2] += w
        sw, su = acc[3], acc[4]
        for i, u in enumerate(rates):
            sw[i] += w * u
            su[i] += u

    def conditional(self) -> tuple[float, ...] | None:
        """Mean unconditional rates of the most common length (drafts-weighted when every record
        gives its drafted tokens), made conditional."""
        if not self.by_len:
            return None
        best = max(self.by_len.values(), key=lambda a: a[0])  # first of the most common
        count, all_drafted, wsum, sw, su = best
        if all_drafted and wsum > 0:
            uncond = [x / wsum for x in sw]
        else:
            uncond = [x / count for x in su]
        return _conditional_rates(uncond)


class _Group:
    """Running statistics of one summary group, split by throughput bin (for warm-up removal)."""

    __slots__ = ("bins", "sample", "seen", "rates")

    def __init__(self) -> None:
        self.bins: dict[int, list[float]] = {}
        self.sample: list[tuple[int, float]] = []  # (bin, cycle_ms)
        self.seen = 0
        self.rates: _RateAcc | None = None


def _tput_bin(tok_s: float) -> int:
    return int(math.floor(math.log2(tok_s) * _BINS_PER_OCTAVE)) if tok_s > 0 else _ZERO_BIN


@dataclass
class IngestResult:
    """Everything parsed from one or more files (see module docstring for line accounting).

    ``decode`` / ``captures`` / ``bench`` / ``vllm`` hold the first
    :data:`MAX_STORED_RECORDS` records of each kind (without the dropped idle / warm-up decode
    lines); :meth:`summary`, :meth:`mean_accept_length`, :meth:`acceptance_rates` and
    ``formats`` cover every record, from running statistics. ``lines_idle`` counts the SGLang
    ``Decode batch`` records dropped as idle or warm-up (``#running-req: 0``; throughput below
    1/:data:`WARMUP_FACTOR` of the group's typical; or the first line after a gap of more than
    :data:`IDLE_GAP_S` s that is that much slower than the line before it).
    """

    files: list[str]
    formats: dict[str, int]  # detected format -> number of parsed records
    decode: list[DecodeRecord]
    captures: list[CaptureRecord]
    bench: list[BenchRecord]
    vllm: list[VllmSpecRecord]
    lines_total: int
    lines_skipped: int
    lines_ignored: int
    overlap_scheduler: bool | None
    spec_config: dict | None  # {"steps", "topk", "num_draft_tokens"} from server args, or None
    lines_idle: int = 0
    records_not_stored: int = 0
    # KV-cache pool per GPU (tokens) from the engine's startup lines, in the order first seen (distinct values)
    kv_pools: list[int] = field(default_factory=list)
    # spec config in force (per file, at that line) for each entry of ``decode``
    _decode_spec: list[dict | None] = field(default_factory=list, repr=False, compare=False)
    _groups: dict[tuple[Any, ...], _Group] = field(default_factory=dict, repr=False, compare=False)
    _kept_bins: dict[tuple[Any, ...], set[int]] = field(default_factory=dict, repr=False, compare=False)
    _rates: _RateAcc = field(default_factory=_RateAcc, repr=False, compare=False)

    # ---- derived views -------------------------------------------------------------------

    def _points(self) -> list[dict[str, Any]]:
        """One normalised dict per stored decode / bench / vLLM record (captures excluded)."""
        pts: list[dict[str, Any]] = []
        aligned = len(self._decode_spec) == len(self.decode)
        for i, d in enumerate(self.decode):
            pts.append(_decode_point(d, (self._decode_spec[i] if aligned else self.spec_config) or {}))
        pts.extend(_bench_point(b) for b in self.bench)
        pts.extend(_vllm_point(v) for v in self.vllm)
        return pts

    def _kept(self, key: tuple[Any, ...]) -> list[list[float]]:
        g = self._groups[key]
        keep = self._kept_bins.get(key)
        return [st for b, st in g.bins.items() if keep is None or b in keep]

    def summary(self) -> list[dict]:
        """Group records per (source, steps, topk, num_draft_tokens, batch), over every record.

        Each row: ``n``, ``accept_length_mean``, ``tok_s_mean`` (aggregate over the batch),
        ``tok_s_per_req_mean``, ``cycle_ms_mean`` / ``cycle_ms_median`` (bench_speculative
        ``step_time``; bench_serving ``median_itl_ms``; decode logs
        ``1000 * accept_len * running_req / gen_throughput``; the median is exact up to
        :data:`MEDIAN_SAMPLE` values per group, else over a uniform sample of that size) and
        ``per_position_rates`` (conditional, vLLM groups only). vLLM groups use
        ``steps = num_spec_tokens``. Decode-log steps/topk/num_draft_tokens come from the server
        args seen in the log. Idle / warm-up decode lines are not included.
        """
        rows: list[dict] = []
        for key in sorted(self._groups, key=_sort_key):
            stats = self._kept(key)
            n = int(sum(st[_N] for st in stats))
            if n == 0:
                continue
            tot = _new_stats()
            for st in stats:
                for i in range(len(tot)):
                    tot[i] += st[i]
            keep = self._kept_bins.get(key)
            g = self._groups[key]
            cycles = sorted(c for b, c in g.sample if keep is None or b in keep)
            rates = g.rates.conditional() if g.rates is not None else None
            rows.append({
                "source": key[0],
                "steps": key[1],
                "topk": key[2],
                "num_draft_tokens": key[3],
                "batch": key[4],
                "n": n,
                "baseline": tot[_BASE_N] == n,
                "accept_length_mean": tot[_ACC_S] / tot[_ACC_N] if tot[_ACC_N] else None,
                "tok_s_mean": tot[_TOK_S] / tot[_TOK_N] if tot[_TOK_N] else None,
                "tok_s_per_req_mean": tot[_PR_S] / tot[_PR_N] if tot[_PR_N] else None,
                "cycle_ms_mean": tot[_CYC_S] / tot[_CYC_N] if tot[_CYC_N] else None,
                "cycle_ms_median": statistics.median(cycles) if cycles else None,
                "per_position_rates": list(rates) if rates is not None else None,
            })
        return rows

    def acceptance_rates(self) -> tuple[float, ...] | None:
        """Mean per-position *conditional* acceptance rates from vLLM records, or None.

        vLLM prints, per position i, the fraction of drafts whose token i was accepted, i.e.
        the unconditional ``u_i = P(accepted length > i)``. The unconditional vectors are
        averaged (weighted by drafted tokens; records with the most common number of
        positions only) and converted to ``c_0 = u_0``, ``c_i = u_i / u_{i-1}`` (0 if
        ``u_{i-1} == 0``), i.e. P(position i accepted | positions < i accepted).
        """
        return self._rates.conditional()

    def mean_accept_length(self) -> float | None:
        """Weighted mean accept length over all non-baseline records that carry one.

        Weights are the request-verifications a record stands for where the log gives them
        (decode lines: ``#running-req``; vLLM: number of drafts), else 1.
        """
        num = den = 0.0
        for key in self._groups:
            for st in self._kept(key):
                num += st[_WACC_S]
                den += st[_W_S]
        return num / den if den > 0 else None

    def cycle_points(self) -> list[dict]:
        """Calibration points with a known cycle time, one per stored decode / bench record.

        Keys: steps, topk, num_draft_tokens, batch, accept_length, cycle_ms, tok_s (aggregate
        tokens/s; bench_speculative: ``speed * batch_size``), baseline, plus source,
        tok_s_per_req and cuda_graph (decode lines only).

        ``baseline`` marks a plain decode step without speculation (accept_length 1.0):
        bench lines with ``steps == 0`` (or steps and num_draft_tokens missing/0), bench_serving
        lines without server_info and without accept_length, and decode lines without
        ``accept len`` (reported with steps = topk = num_draft_tokens = 0). Idle and warm-up
        decode lines (see the class docstring) are already dropped.
        """
        out: list[dict] = []
        for p in self._points():
            if p["cycle_ms"] is None or p["cycle_ms"] <= 0:
                continue
            out.append({k: p[k] for k in (
                "steps", "topk", "num_draft_tokens", "batch", "accept_length", "cycle_ms",
                "tok_s", "baseline", "source", "tok_s_per_req", "cuda_graph")})
        return out

    def to_dict(self) -> dict:
        """JSON-serialisable view (records, counters, summary and derived values)."""

        def rec(r: Any) -> dict:
            d = asdict(r)
            return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

        rates = self.acceptance_rates()
        return {
            "files": list(self.files),
            "formats": dict(self.formats),
            "lines_total": self.lines_total,
            "lines_skipped": self.lines_skipped,
            "lines_ignored": self.lines_ignored,
            "lines_idle": self.lines_idle,
            "records_not_stored": self.records_not_stored,
            "overlap_scheduler": self.overlap_scheduler,
            "spec_config": dict(self.spec_config) if self.spec_config else None,
            "kv_pool_tokens": list(self.kv_pools),
            "decode": [rec(r) for r in self.decode],
            "captures": [rec(r) for r in self.captures],
            "bench": [rec(r) for r in self.bench],
            "vllm": [rec(r) for r in self.vllm],
            "summary": self.summary(),
            "cycle_points": self.cycle_points(),
            "acceptance_rates": list(rates) if rates is not None else None,
            "mean_accept_length": self.mean_accept_length(),
        }


def _decode_point(d: DecodeRecord, cfg: dict) -> dict[str, Any]:
    acc = d.accept_length
    if acc is None:  # no "accept len": the server ran without speculation
        cfg = {"steps": 0, "topk": 0, "num_draft_tokens": 0}
    steps = cfg.get("steps")
    eff_acc = acc if acc is not None else 1.0
    cycle = None
    if d.gen_throughput_tok_s > 0 and d.running_req > 0:
        cycle = 1000.0 * eff_acc * d.running_req / d.gen_throughput_tok_s
    return {
        "source": "decode",
        "steps": steps,
        "topk": cfg.get("topk"),
        "num_draft_tokens": cfg.get("num_draft_tokens"),
        "batch": d.running_req,
        "accept_length": eff_acc,
        "cycle_ms": cycle,
        "tok_s": d.gen_throughput_tok_s,
        "tok_s_per_req": d.gen_throughput_tok_s / d.running_req if d.running_req > 0 else None,
        "baseline": acc is None or steps == 0,
        "cuda_graph": d.cuda_graph,
        "weight": float(max(d.running_req, 1)),
        "rates": None,
    }


def _bench_point(b: BenchRecord) -> dict[str, Any]:
    if b.source == "bench_speculative":
        baseline = b.steps == 0 or (b.steps is None and not b.num_draft_tokens)
        tok_s = b.speed_tok_s * b.batch_size if b.speed_tok_s is not None and b.batch_size else None
        per_req = b.speed_tok_s
        cycle = b.step_time_ms
    else:
        baseline = b.steps == 0 if b.steps is not None else b.accept_length is None
        tok_s = b.output_throughput_tok_s
        per_req = tok_s / b.batch_size if tok_s is not None and b.batch_size else None
        cycle = b.median_itl_ms if b.median_itl_ms else None
    acc = b.accept_length if b.accept_length is not None else (1.0 if baseline else None)
    return {
        "source": b.source,
        "steps": b.steps,
        "topk": b.topk,
        "num_draft_tokens": b.num_draft_tokens,
        "batch": b.batch_size,
        "accept_length": acc,
        "cycle_ms": cycle,
        "tok_s": tok_s,
        "tok_s_per_req": per_req,
        "baseline": baseline,
        "cuda_graph": None,
        "weight": 1.0,
        "rates": None,
    }


def _vllm_point(v: VllmSpecRecord) -> dict[str, Any]:
    weight = 1.0
    if v.drafted_tokens and v.num_spec_tokens:
        weight = v.drafted_tokens / v.num_spec_tokens
    return {
        "source": "vllm",
        "steps": v.num_spec_tokens,
        "topk": None,
        "num_draft_tokens": None,
        "batch": None,
        "accept_length": v.mean_acceptance_length,
        "cycle_ms": None,
        "tok_s": None,
        "tok_s_per_req": None,
        "baseline": False,
        "cuda_graph": None,
        "weight": weight,
        "rates": v,
    }


# --------------------------------------------------------------------------------------------
# Low-level parsing helpers
# --------------------------------------------------------------------------------------------

_A = re.ASCII
_INT = r"[0-9]{1,18}"
_FLOAT = r"-?[0-9]{1,15}(?:\.[0-9]{1,12})?"
_INT_RE = re.compile(_INT, _A)
_FLOAT_RE = re.compile(_FLOAT, _A)


class _Corrupt(Exception):
    """Internal: the line looks like a known format but cannot be trusted."""


def _int(s: str, lo: int = 0) -> int:
    if not _INT_RE.fullmatch(s):
        raise _Corrupt
    v = int(s)
    if v < lo:
        raise _Corrupt
    return v


def _float(s: str, lo: float = 0.0, hi: float = math.inf) -> float:
    if not _FLOAT_RE.fullmatch(s):
        raise _Corrupt
    v = float(s)
    if not (lo <= v <= hi):
        raise _Corrupt
    return v


MAX_STEP_TIME_S = 3600.0  # one decode iteration (s)
MIN_STEP_TIME_S = 1e-6  # one decode iteration launches at least one kernel, a few us (s)
MAX_BENCH_STEPS = 64  # draft steps and topk (the schema's range)
MAX_BENCH_DRAFT_TOKENS = 4096
MAX_BENCH_BATCH = 1_000_000
MAX_SPEED_TOK_S = 1e7  # per request


def _jnum(x: Any, lo: float = 0.0, hi: float = math.inf, *, allow_none: bool = True,
          lo_open: bool = False) -> float | None:
    """Validate a JSON number; None passes through if allowed."""
    if x is None:
        if allow_none:
            return None
        raise _Corrupt
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise _Corrupt
    try:
        v = float(x)
    except OverflowError:
        raise _Corrupt from None
    if not math.isfinite(v) or v < lo or v > hi or (lo_open and v == lo):
        raise _Corrupt
    return v


def _jint(x: Any, lo: int = 0, hi: int = 10**15, *, allow_none: bool = True) -> int | None:
    if x is None:
        if allow_none:
            return None
        raise _Corrupt
    if isinstance(x, bool):
        raise _Corrupt
    if isinstance(x, float) and x.is_integer() and abs(x) < 2**53:
        x = int(x)
    if not isinstance(x, int) or x < lo or x > hi:
        raise _Corrupt
    return x


# ---- log prefix ------------------------------------------------------------------------------

_TS = r"[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?"
_BRACKET_PREFIX_RE = re.compile(r"\[(" + _TS + r")([^\]]*)\]", _A)
_BARE_TS_RE = re.compile(_TS, _A)
_TP_RE = re.compile(r"\bTP([0-9]{1,6})\b", _A)


def _prefix_info(prefix: str) -> tuple[str | None, int | None]:
    m = _BRACKET_PREFIX_RE.search(prefix)
    if m:
        tp = _TP_RE.search(m.group(2))
        return m.group(1), (int(tp.group(1)) if tp else None)
    m2 = _BARE_TS_RE.search(prefix)
    tp = _TP_RE.search(prefix)
    return (m2.group(0) if m2 else None), (int(tp.group(1)) if tp else None)


# ---- SGLang Decode batch -----------------------------------------------------------------------

_DECODE_MARK_RE = re.compile(r"Decode batch(?: \[([0-9]{1,18})\])?([.,])(?: |$)", _A)
_KV_RE = re.compile(r"(#?[A-Za-z][A-Za-z0-9 _/().\-]{0,60}): (\S{1,40})", _A)
_GENERIC_VALUE_RE = re.compile(r"[A-Za-z0-9_.+\-%/:]+", _A)
_INT_KEYS = {
    "#running-req", "#token", "#queue-req", "#full token", "#swa token", "mamba num",
    "#prealloc-req", "#transfer-req", "#retracted-req",
}
_FLOAT_KEYS = {
    "token usage", "full token usage", "swa token usage", "mamba usage",
    "pre-allocated usage",
}



def _format_hint(newest: bool, has_accept_rate: bool, no_cuda_graph: bool, trailing_comma: bool) -> str:
    """The SGLang release whose decode-line format this is (newest: comma separators or an iteration count)."""
    if newest:
        return "newest"
    if has_accept_rate:
        return "v0.5.3"
    if no_cuda_graph:
        return "v0.4.3"
    return "v0.5.3" if trailing_comma else "v0.4.6"

def _parse_decode(seg: str, prefix: str) -> DecodeRecord:
    """Parse one ``Decode batch...`` segment (``seg`` starts at the marker)."""
    m = _DECODE_MARK_RE.match(seg)
    if not m:
        raise _Corrupt
    iter_no, sep = m.group(1), m.group(2)
    body = seg[m.end():].rstrip()
    trailing_comma = body.endswith(",")
    if trailing_comma:
        body = body[:-1]
    if not body:
        raise _Corrupt
    fields: dict[str, str] = {}
    order: list[str] = []
    for part in body.split(", "):
        kv = _KV_RE.fullmatch(part)
        if not kv:
            raise _Corrupt
        key, val = kv.group(1), kv.group(2)
        if key in fields:
            raise _Corrupt
        fields[key] = val
        order.append(key)
    if not order or order[0] != "#running-req":
        raise _Corrupt
    for key in ("#running-req", "gen throughput (token/s)", "#queue-req"):
        if key not in fields:
            raise _Corrupt
    cuda_graph: bool | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    for key, val in fields.items():
        if key in _INT_KEYS:
            _int(val)
        elif key in _FLOAT_KEYS:
            _float(val)
        elif key == "accept len":
            accept_len = _float(val, lo=1.0, hi=1e4)
        elif key == "accept rate":
            accept_rate = _float(val, lo=0.0, hi=1.0)
        elif key.endswith(" graph"):  # cuda / cpu / npu / musa graph
            if val not in ("True", "False"):
                raise _Corrupt
            cuda_graph = val == "True"
        elif key == "gen throughput (token/s)":
            pass
        elif not _GENERIC_VALUE_RE.fullmatch(val):
            raise _Corrupt
    gen = _float(fields["gen throughput (token/s)"], lo=0.0)
    running = _int(fields["#running-req"])
    queue = _int(fields["#queue-req"])
    hint = _format_hint(sep == "," or iter_no is not None, accept_rate is not None, cuda_graph is None, trailing_comma)
    ts, tp = _prefix_info(prefix)
    return DecodeRecord(
        running_req=running,
        accept_length=accept_len,
        accept_rate=accept_rate,
        cuda_graph=cuda_graph,
        gen_throughput_tok_s=gen,
        queue_req=queue,
        timestamp=ts,
        tp_rank=tp,
        version_hint=hint,
    )


# ---- SGLang CUDA-graph capture ---------------------------------------------------------------

_CAPTURE_RE = re.compile(
    r"Capture (?:(target|draft) )?(?:(decode|verify|extend|prefill) )?(?:cuda|CUDA) graph "
    r"(begin|end|bs)\b", _A)
_AVAIL_RE = re.compile(r"avail mem=(" + _FLOAT + r") GB", _A)
#: the KV-cache pool per GPU a startup prints: SGLang's "KV Cache is allocated. #tokens: N" and
#: "max_total_num_tokens=N", vLLM V1's "GPU KV cache size: N tokens" (thousands separated by commas)
_KV_POOL_RE = re.compile(r"(?:KV Cache is allocated\. #tokens: |max_total_num_tokens=|GPU KV cache size: )"
                         r"([0-9]{1,3}(?:,[0-9]{3})+|[0-9]{1,13})\b", _A)
MAX_KV_POOLS = 64  # distinct pool sizes kept (one per launch in the files; more is not one deployment)
_USAGE_RE = re.compile(r"mem usage=(" + _FLOAT + r") GB", _A)
_ELAPSED_RE = re.compile(
    r"(?:Time elapsed: (" + _FLOAT + r") s\.|elapsed=(" + _FLOAT + r") s,)", _A)
_BS_LIST_RE = re.compile(r"\[([0-9, ]{0,4000})\]", _A)
_PHASES = {
    (None, None): "target",
    ("target", None): "target",
    ("target", "decode"): "target",
    ("target", "verify"): "target_verify",
    ("draft", None): "draft_decode",
    ("draft", "decode"): "draft_decode",
    ("draft", "extend"): "draft_extend",
}


def _int_list(s: str) -> tuple[int, ...]:
    parts = [p.strip() for p in s.split(",")]
    if not parts or any(not p for p in parts):
        raise _Corrupt
    vals = tuple(_int(p, lo=1) for p in parts)
    return vals


def _parse_capture(m: re.Match[str], line: str) -> CaptureRecord:
    phase = _PHASES.get((m.group(1), m.group(2)), "unknown")
    event = m.group(3)
    rest = line[m.end():].rstrip()
    if event == "bs":
        bm = _BS_LIST_RE.match(rest.lstrip())
        if not bm or rest.lstrip()[bm.end():].strip():
            raise _Corrupt
        return CaptureRecord(phase, "bs_list", None, None, None, _int_list(bm.group(1)))
    if event == "begin":
        am = _AVAIL_RE.search(rest)
        if not am or not rest.endswith("GB"):
            raise _Corrupt
        bs: tuple[int, ...] | None = None
        if "bs=" in rest:
            bi = rest.index("bs=") + 3
            bm = _BS_LIST_RE.match(rest, bi)
            if not bm:
                raise _Corrupt
            bs = _int_list(bm.group(1))
        return CaptureRecord(phase, "begin", _float(am.group(1)), None, None, bs)
    em = _ELAPSED_RE.search(rest)
    am = _AVAIL_RE.search(rest)
    um = _USAGE_RE.search(rest)
    if not (em and am and um) or not rest.endswith("GB."):
        raise _Corrupt
    elapsed = _float(em.group(1) or em.group(2))
    return CaptureRecord(phase, "end", _float(am.group(1)), _float(um.group(1)), elapsed, None)


# ---- vLLM ------------------------------------------------------------------------------------

_VLLM_V1_MARK = "SpecDecoding metrics: "
_VLLM_V0_MARK = "Speculative metrics: "
_NUM_OR_NAN = r"(?:" + _FLOAT + r"|nan)"
_V1_FIELDS: list[tuple[str, re.Pattern[str]]] = [
    ("avg_rate_pct", re.compile(r"Avg Draft acceptance rate: (" + _NUM_OR_NAN + r")%", _A)),
    ("rate_pct", re.compile(r"Draft acceptance rate: (" + _NUM_OR_NAN + r")%", _A)),
    ("mean_len", re.compile(r"Mean acceptance length: (" + _NUM_OR_NAN + r")", _A)),
    ("acc_tput", re.compile(r"Accepted throughput: (" + _NUM_OR_NAN + r") tokens/s", _A)),
    ("draft_tput", re.compile(r"Drafted? throughput: (" + _NUM_OR_NAN + r") tokens/s", _A)),
    ("accepted", re.compile(r"Accepted: (" + _INT + r") tokens", _A)),
    ("drafted", re.compile(r"Drafted: (" + _INT + r") tokens", _A)),
    ("per_pos", re.compile(
        r"Per-position acceptance rate: (" + _NUM_OR_NAN + r"(?:, " + _NUM_OR_NAN + r"){0,63})",
        _A)),
]
_V1_KNOWN_KEYS = (
    "Avg Draft acceptance rate", "Draft acceptance rate", "Mean acceptance length",
    "Accepted throughput", "Drafted throughput", "Draft throughput", "Accepted", "Drafted",
    "Per-position acceptance rate",
)
_GENERIC_FIELD_RE = re.compile(r"([A-Za-z][A-Za-z0-9 _/()\-]{0,60}): ([^,]{1,60})", _A)
_SEP_RE = re.compile(r", ", _A)


def _nan_or_float(s: str, lo: float = 0.0, hi: float = math.inf) -> float | None:
    return None if s == "nan" else _float(s, lo, hi)


def _parse_vllm_v1(body: str) -> VllmSpecRecord | None:
    """Parse the text after ``SpecDecoding metrics: ``; None for an idle (0 drafted) line."""
    body = body.rstrip().removesuffix(".")
    vals: dict[str, str] = {}
    pos = 0
    n = len(body)
    while True:
        for name, rx in _V1_FIELDS:
            fm = rx.match(body, pos)
            if fm and (fm.end() == n or body.startswith(", ", fm.end())):
                if name in vals:
                    raise _Corrupt
                vals[name] = fm.group(1)
                pos = fm.end()
                break
        else:
            gm = _GENERIC_FIELD_RE.match(body, pos)
            if not gm or gm.group(1) in _V1_KNOWN_KEYS:
                raise _Corrupt
            if not (gm.end() == n or body.startswith(", ", gm.end())):
                raise _Corrupt
            pos = gm.end()
        if pos == n:
            break
        pos += 2
    if "accepted" not in vals or "drafted" not in vals:
        raise _Corrupt  # every V1 variant prints both counts; a cut line lacks them
    accepted = _int(vals["accepted"])
    drafted = _int(vals["drafted"])
    pct = vals.get("avg_rate_pct", vals.get("rate_pct"))
    rate = _nan_or_float(pct, 0.0, 100.0) if pct is not None else None
    mean_len = _nan_or_float(vals["mean_len"], 0.0) if "mean_len" in vals else None
    for k in ("acc_tput", "draft_tput"):
        if k in vals:
            _nan_or_float(vals[k])
    per_pos: tuple[float, ...] | None = None
    if "per_pos" in vals:
        items = vals["per_pos"].split(", ")
        if "nan" in items:
            if drafted == 0:
                per_pos = None
            else:
                raise _Corrupt
        else:
            per_pos = tuple(_float(x, 0.0, 1.0) for x in items)
    if drafted == 0:
        return None  # idle interval: well-formed, but carries no data
    if accepted > drafted:
        raise _Corrupt
    if mean_len is None and rate is None and per_pos is None:
        raise _Corrupt
    if rate is not None and abs(100.0 * accepted / drafted - rate) > 0.06:
        raise _Corrupt
    if mean_len is not None and mean_len < 1.0:
        raise _Corrupt
    if per_pos is not None:
        for a, b in itertools.pairwise(per_pos):
            if b > a + 0.0015:
                raise _Corrupt
        if mean_len is not None:
            tol = 0.001 * len(per_pos) + 0.006
            if abs(sum(per_pos) - (mean_len - 1.0)) > tol:
                raise _Corrupt  # e.g. a per-position list cut short
            if mean_len > len(per_pos) + 1 + 0.006:
                raise _Corrupt
    return VllmSpecRecord(
        mean_acceptance_length=mean_len,
        per_position_rates=per_pos,
        num_spec_tokens=len(per_pos) if per_pos is not None else None,
        draft_acceptance_rate=rate / 100.0 if rate is not None else None,
        accepted_tokens=accepted,
        drafted_tokens=drafted,
    )


_V0_KEYS = {
    "Draft acceptance rate": "rate",
    "System efficiency": "eff",
    "Number of speculative tokens": "k",
    "Number of accepted tokens": "accepted",
    "Number of draft tokens": "drafted",
    "Number of emitted tokens": "emitted",
}
_V0_PART_RE = re.compile(r"([A-Za-z][A-Za-z ]{0,60}): (" + _NUM_OR_NAN + r")", _A)


def _parse_vllm_v0(body: str) -> VllmSpecRecord | None:
    """Parse the text after ``Speculative metrics: `` (vLLM V0); None for an idle line."""
    body = body.rstrip()
    if not body.endswith("."):
        raise _Corrupt  # V0 lines end with "Number of emitted tokens: N."
    vals: dict[str, str] = {}
    for part in body[:-1].split(", "):
        pm = _V0_PART_RE.fullmatch(part)
        if not pm or pm.group(1) not in _V0_KEYS or _V0_KEYS[pm.group(1)] in vals:
            raise _Corrupt
        vals[_V0_KEYS[pm.group(1)]] = pm.group(2)
    if not {"rate", "eff", "k"} <= vals.keys():
        raise _Corrupt
    k = _int(vals["k"], lo=1)
    accepted = _int(vals["accepted"]) if "accepted" in vals else None
    drafted = _int(vals["drafted"]) if "drafted" in vals else None
    emitted = _int(vals["emitted"]) if "emitted" in vals else None
    rate = _nan_or_float(vals["rate"], 0.0, 1.0)
    eff = _nan_or_float(vals["eff"], 0.0, 1.0)
    if drafted == 0 or (rate is None and eff is None):
        return None
    if accepted is not None and drafted is not None and accepted > drafted:
        raise _Corrupt
    mean_len: float | None = None
    if emitted is not None and drafted:
        mean_len = emitted * k / drafted
    elif eff is not None:
        mean_len = eff * (k + 1)
    if mean_len is not None:
        if mean_len < 1.0 - 0.001 * (k + 1) or mean_len > k + 1 + 0.01:
            raise _Corrupt
        mean_len = min(max(mean_len, 1.0), k + 1.0)
    return VllmSpecRecord(
        mean_acceptance_length=mean_len,
        per_position_rates=None,
        num_spec_tokens=k,
        draft_acceptance_rate=rate,
        accepted_tokens=accepted,
        drafted_tokens=drafted,
    )


# ---- JSON bench lines ------------------------------------------------------------------------


def _parse_bench_json(obj: Any) -> BenchRecord:
    if not isinstance(obj, dict):
        raise _Corrupt
    if "step_time" in obj and ("batch_size" in obj or "acc_length" in obj or "speed" in obj):
        # a record outside what one decode iteration can be (an hour, 64 steps + 1 tokens, 1e7 tok/s per request)
        # is corrupt: skipped and counted like any malformed line
        step_time_s = _jnum(obj.get("step_time"), lo=MIN_STEP_TIME_S, hi=MAX_STEP_TIME_S, allow_none=False)
        steps = _jint(obj.get("steps"), hi=MAX_BENCH_STEPS)
        acc = _jnum(obj.get("acc_length", obj.get("accept_length")), lo=1.0,
                    hi=MAX_BENCH_STEPS + 1.0 if steps is None else steps + 1.0)
        speed = _jnum(obj.get("speed"), hi=MAX_SPEED_TOK_S)
        return BenchRecord(
            source="bench_speculative",
            batch_size=_jint(obj.get("batch_size"), lo=1, hi=MAX_BENCH_BATCH),
            steps=steps,
            topk=_jint(obj.get("topk"), hi=MAX_BENCH_STEPS),
            num_draft_tokens=_jint(obj.get("num_draft_tokens"), hi=MAX_BENCH_DRAFT_TOKENS),
            accept_length=acc,
            step_time_ms=(step_time_s or 0.0) * 1000.0,
            speed_tok_s=speed,
            output_throughput_tok_s=None,
            median_itl_ms=None,
        )
    if "output_throughput" in obj or "median_itl_ms" in obj:
        out_tput = _jnum(obj.get("output_throughput"))
        itl = _jnum(obj.get("median_itl_ms"))
        if out_tput is None and itl is None:
            raise _Corrupt
        acc_raw = obj.get("accept_length")
        acc = None if acc_raw == 0 else _jnum(acc_raw, lo=1.0)
        batch = obj.get("max_concurrency")
        if batch is None:
            batch = obj.get("batch_size")
        steps = topk = ndt = None
        info = obj.get("server_info")
        if isinstance(info, dict):
            if "speculative_algorithm" in info and info.get("speculative_algorithm") is None:
                steps = topk = ndt = 0
            else:
                steps = _jint(info.get("speculative_num_steps"), lo=1, hi=MAX_BENCH_STEPS)
                topk = _jint(info.get("speculative_eagle_topk"), lo=1, hi=MAX_BENCH_STEPS)
                ndt = _jint(info.get("speculative_num_draft_tokens"), lo=1, hi=MAX_BENCH_DRAFT_TOKENS)
        return BenchRecord(
            source="bench_serving",
            batch_size=_jint(batch, lo=1),
            steps=steps,
            topk=topk,
            num_draft_tokens=ndt,
            accept_length=acc,
            step_time_ms=None,
            speed_tok_s=None,
            output_throughput_tok_s=out_tput,
            median_itl_ms=itl,
        )
    raise _Corrupt


# ---- side information ----------------------------------------------------------------------

_SPEC_ARG_RES = {
    "steps": re.compile(r"(?:speculative_num_steps=|--speculative-num-steps[= ])(-?[0-9]{1,40})\b",
                        _A),
    "topk": re.compile(r"(?:speculative_eagle_topk=|--speculative-eagle-topk[= ])(-?[0-9]{1,40})\b",
                       _A),
    "num_draft_tokens": re.compile(
        r"(?:speculative_num_draft_tokens=|--speculative-num-draft-tokens[= ])(-?[0-9]{1,40})\b",
        _A),
}
#: what a speculative server argument may be; a line with a value outside is skipped and counted
_SPEC_ARG_RANGES = {"steps": (1, MAX_BENCH_STEPS), "topk": (1, MAX_BENCH_STEPS),
                    "num_draft_tokens": (1, MAX_BENCH_DRAFT_TOKENS)}
_DISABLE_OVERLAP_RE = re.compile(r"\bdisable_overlap_schedule=(True|False)\b", _A)


def _overlap_from_line(line: str) -> bool | None:
    if "Overlap scheduler is disabled" in line or "Non-overlap (synchronous) spec" in line:
        return False
    if "Overlap spec v2 is enabled" in line or "overlap schedule is turned on" in line:
        return True
    return None


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


# Tests set this to surface parser bugs that ``_State.feed`` would otherwise count as skipped.
_RAISE_INTERNAL_ERRORS = False

_UF = r"[0-9]+(?:\.[0-9]+)?"  # unsigned float (lengths checked where they matter)
# The common Decode batch layout with a ``[timestamp ...]`` prefix, as one whole-line match;
# anything else (other prefixes, extra fields, glued records, odd values) takes the general
# parser, which gives the same record.
_FAST_DECODE_RE = re.compile(
    r"\[(" + _TS + r")([^\]]{0,200})\] Decode batch(?: \[([0-9]{1,18})\])?([.,]) #running-req: ([0-9]{1,18}), "
    r"#token: [0-9]{1,18}, token usage: " + _UF + r", (?:accept len: (" + _UF + r"), )?(?:accept rate: (" + _UF
    + r"), )?(?:(?:cuda|cpu|npu|musa) graph: (True|False), )?gen throughput \(token/s\): ([0-9]{1,15}(?:\.[0-9]{1,12})?), "
    r"#queue-req: ([0-9]{1,18})(,?) ?$", _A)


# Block-level fast path: the layout of _FAST_DECODE_RE with its value checks built in (so it
# matches a subset of the lines that pass there; any other line is found between matches and takes
# the per-line path), one match per whole line, found with one pass over a block ("\n" + block:
# the leading newline is the literal the regex engine searches for; possessive repeats, same
# matches, less backtracking bookkeeping). Groups: timestamp, #running-req, accept len, gen
# throughput.
_BLOCK_ACC = r"[1-9][0-9]{0,3}+(?:\.[0-9]{1,23}+)?"  # in [1, 1e4], < 29 characters
_BLOCK_RATE = r"(?:0(?:\.[0-9]{1,26}+)?|1(?:\.0{1,26}+)?)"  # in [0, 1], < 29 characters
_BLOCK_DECODE_PATTERN = (
    r"\n\[([0-9]{4}+-[0-9]{2}+-[0-9]{2}+[ T][0-9]{2}+:[0-9]{2}+:[0-9]{2}+(?:[.,][0-9]{1,9}+)?)[^\]\n]{0,200}+\] "
    r"Decode batch(?: \[[0-9]{1,18}+\])?[.,] #running-req: ([0-9]{1,18}+), #token: [0-9]{1,18}+, "
    r"token usage: [0-9]++(?:\.[0-9]++)?, (?:accept len: (" + _BLOCK_ACC + r"), )?(?:accept rate: "
    + _BLOCK_RATE + r", )?(?:(?:cuda|cpu|npu|musa) graph: (?:True|False), )?gen throughput \(token/s\): "
    r"([0-9]{1,15}+(?:\.[0-9]{1,12}+)?), #queue-req: [0-9]{1,18}+,? ?$")
if sys.version_info < (3, 11):  # no possessive repeats before 3.11 (greedy ones match the same)
    _BLOCK_DECODE_PATTERN = re.sub(r"([}+])\+", r"\1", _BLOCK_DECODE_PATTERN)
_BLOCK_DECODE_RE = re.compile(_BLOCK_DECODE_PATTERN, _A | re.MULTILINE)
_BLOCK_STRIDE = 5  # re.split pieces per record: the text before it, then the 4 groups
# A line containing none of these is 'ignored' by _State._line and changes no state (JSON,
# decode, capture, vLLM, overlap-scheduler and server-args lines all contain one; so does the
# over-long-line marker).
_MARKERS = ("Decode batch", "speculative", "verlap", "{", "Capture ", "metrics: ", "\x00", "KV Cache is allocated",
            "max_total_num_tokens=", "GPU KV cache size:")
_MIN_RUN = 32  # shorter runs of decode lines take the per-line path (numpy has a fixed cost)


class _NumberCache(dict):
    """str -> number (``float`` or ``int``) for the few distinct accept lengths and batch sizes
    of a log, each parsed once (``map(cache.__getitem__, strings)`` stays in C)."""

    def __init__(self, kind: type) -> None:
        super().__init__()
        self.kind = kind

    def __missing__(self, key: str) -> float:
        if len(self) > 100_000:
            self.clear()
        v = self[key] = self.kind(key)
        return v


def _has_marker(text: str) -> bool:
    return any(mk in text for mk in _MARKERS)


def _split_lines(block: str) -> list[str]:
    """The lines of a block as iter_lines gives them (one trailing ``\\r`` removed)."""
    lines = block.split("\n")
    if "\r" in block:
        lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
    return lines


def _ts_seconds(ts: str, _ord: dict[str, int] = {}) -> float | None:  # noqa: B006 - a cache
    try:
        day = _ord.get(ts[:10])
        if day is None:
            import datetime

            day = datetime.date(int(ts[:4]), int(ts[5:7]), int(ts[8:10])).toordinal()
            if len(_ord) > 1024:
                _ord.clear()
            _ord[ts[:10]] = day
        return day * 86400.0 + int(ts[11:13]) * 3600 + int(ts[14:16]) * 60 + float(ts[17:].replace(",", "."))
    except ValueError:
        return None


class _State:
    """Accumulates running statistics, a bounded set of records and counters across lines."""

    def __init__(self) -> None:
        self.decode_store: list[tuple[DecodeRecord, dict | None, tuple[Any, ...], int]] = []
        self.captures: list[CaptureRecord] = []
        self.bench: list[BenchRecord] = []
        self.vllm: list[VllmSpecRecord] = []
        self.formats: Counter[str] = Counter()
        self.lines_total = 0
        self.lines_skipped = 0
        self.lines_ignored = 0
        self.idle = 0
        self.not_stored = 0
        self.groups: dict[tuple[Any, ...], _Group] = {}
        self.rates = _RateAcc()
        self.overlap_explicit: bool | None = None
        self.overlap_from_args: bool | None = None
        self.spec_config: dict | None = None
        self.kv_pools: list[int] = []
        self.cur_spec: dict | None = None  # per file
        self.prev_decode: tuple[str, float] | None = None  # per file: (timestamp, tok/s per request)
        self._rng = random.Random(0x5EC5)
        self._floats = _NumberCache(float)
        self._ints = _NumberCache(int)

    def new_file(self) -> None:
        self.cur_spec = None
        self.prev_decode = None

    # -- many lines (the hot loop) -------------------------------------------------------------

    def feed_many(self, lines: list[str]) -> None:
        fast = _FAST_DECODE_RE.match
        add = self._add_decode
        for line in lines:
            if line.startswith("[") and "Decode batch" in line:
                m = fast(line)
                if m is not None:
                    ts, rest, it, sep, running, acc, rate, graph, gen, queue, comma = m.groups()
                    acc_v = float(acc) if acc is not None else None
                    rate_v = float(rate) if rate is not None else None
                    if ((acc_v is None or (1.0 <= acc_v <= 1e4 and len(acc) < 29))
                            and (rate_v is None or (rate_v <= 1.0 and len(rate) < 29))):
                        g = None if graph is None else graph == "True"
                        hint = _format_hint(sep == "," or it is not None, rate_v is not None, g is None, bool(comma))
                        tp = None
                        if "TP" in rest:
                            tm = _TP_RE.search(rest)
                            tp = int(tm.group(1)) if tm else None
                        self.lines_total += 1
                        add(int(running), acc_v, rate_v, g, float(gen), int(queue), ts, tp, hint, None)
                        continue
            self.feed(line)

    # -- whole blocks (the fast path for long SGLang logs) ---------------------------------------

    def feed_block(self, block: str) -> None:
        """Account a block of whole lines (``\\n``-separated, no final newline; ``\\r`` before a
        newline allowed), giving exactly what :meth:`feed_many` gives for its lines.

        Once the first :data:`MAX_STORED_RECORDS` decode records are stored, runs of ``Decode
        batch`` lines in the common layout are found with one regular expression over the whole
        block and accounted with numpy (same sums, in the same order, as line by line); lines
        without any marker of a known format are counted as ignored without being looked at
        one by one; everything else takes the per-line path.
        """
        if block == LONG_LINE:
            self.feed(block)
            return
        if not _has_marker(block):  # nothing any parser recognises (blank lines, other chatter): ignored
            n_lines = block.count("\n") + 1
            self.lines_total += n_lines
            self.lines_ignored += n_lines
            return
        if len(self.decode_store) < MAX_STORED_RECORDS or "Decode batch" not in block:
            self.feed_many(_split_lines(block))
            return
        text = "\n" + block
        parts = _BLOCK_DECODE_RE.split(text)
        n_rows = len(parts) // _BLOCK_STRIDE
        if n_rows >= _MIN_RUN:
            other = "".join(parts[0::_BLOCK_STRIDE])
            if not _has_marker(other) and self._fast_rows(parts, n_rows):
                n_lines = block.count("\n") + 1
                self.lines_total += n_lines
                self.lines_ignored += n_lines - n_rows
                return
        self._feed_runs(text)

    def _feed_runs(self, text: str) -> None:
        """The general block path: runs of common-layout decode lines between lines that need
        the per-line parser (``text`` starts with the newline before the block's first line)."""
        run: list[re.Match[str]] = []
        pos = 0

        def flush() -> None:
            if not run:
                return
            rows: list[Any] = []
            for m in run:
                rows.append(m.group(0)[1:])
                rows.extend(m.groups())
            if len(run) < _MIN_RUN or not self._fast_rows(rows, len(run)):
                self.feed_many(rows[0::_BLOCK_STRIDE])
            else:
                self.lines_total += len(run)
            run.clear()

        for m in _BLOCK_DECODE_RE.finditer(text):
            s = m.start()
            if s > pos:
                self._feed_gap(text[pos:s], flush)
            run.append(m)
            pos = m.end()
        if pos < len(text):
            self._feed_gap(text[pos:], flush)
        flush()

    def _feed_gap(self, gap: str, flush: Any) -> None:
        """Lines between two common-layout decode lines (``gap`` starts with a newline)."""
        if _has_marker(gap):
            flush()
            self.feed_many(_split_lines(gap[1:]))
        else:  # nothing any parser recognises: ignored, whatever the state
            n = gap.count("\n")
            self.lines_total += n
            self.lines_ignored += n

    def _fast_rows(self, parts: list[Any], n: int) -> bool:
        """Account ``n`` common-layout decode records given as ``re.split`` pieces of
        :data:`_BLOCK_DECODE_RE` (the text before each record, then timestamp, #running-req,
        accept len and gen throughput) exactly as :meth:`_add_decode` would one by one, once the
        stored records are full (the regex has the per-line path's value checks built in).
        False (nothing changed) when they need the per-line path."""
        import numpy as np

        if len(self.decode_store) < MAX_STORED_RECORDS:
            return False
        k = _BLOCK_STRIDE
        ts_c = parts[1::k]
        run_c = parts[2::k]
        acc_c = parts[3::k]
        gen_c = parts[4::k]
        conv = self._floats
        if None in acc_c or "" in acc_c:
            has = np.array([bool(a) for a in acc_c], dtype=bool)
            acc = np.fromiter((conv[a] if a else 1.0 for a in acc_c), np.float64, n)
        else:
            has = None
            acc = np.fromiter(map(conv.__getitem__, acc_c), np.float64, n)
        running = np.fromiter(map(self._ints.__getitem__, run_c), np.int64, n)
        gen = np.fromiter(map(float, gen_c), np.float64, n)

        # idle: #running-req 0, or the first window after an idle gap (see _add_decode)
        busy = np.flatnonzero(running != 0)
        n_zero = n - busy.size
        keep = busy
        prev_decode = self.prev_decode
        if busy.size:
            per_req = gen[busy] / running[busy]
            prev_pr = np.empty_like(per_req)
            prev_pr[0] = prev_decode[1] if prev_decode is not None else np.nan
            prev_pr[1:] = per_req[:-1]
            cand = np.flatnonzero(per_req * WARMUP_FACTOR < prev_pr)
            gap_idle: list[int] = []
            for c in cand.tolist():
                t_prev = prev_decode[0] if c == 0 else ts_c[busy[c - 1]]  # type: ignore[index]
                t0, t1 = _ts_seconds(t_prev), _ts_seconds(ts_c[busy[c]])
                if t0 is not None and t1 is not None and t1 - t0 > IDLE_GAP_S:
                    gap_idle.append(c)
            prev_decode = (ts_c[busy[-1]], float(per_req[-1]))
            if gap_idle:
                mask = np.ones(busy.size, dtype=bool)
                mask[gap_idle] = False
                keep, per_req = busy[mask], per_req[mask]
        n_idle = n_zero + (busy.size - keep.size)
        m = keep.size
        if m == 0:
            self.prev_decode = prev_decode
            self.idle += n_idle
            return True

        run = running[keep]
        g = gen[keep]
        cfg = self.cur_spec
        if has is None:
            hk = np.ones(m, dtype=bool)
        else:
            hk = has[keep]
        eff = np.where(hk, acc[keep], 1.0)
        spec_key = (cfg.get("steps"), cfg.get("topk"), cfg.get("num_draft_tokens")) if cfg else (None, None, None)
        base_spec = spec_key[0] == 0
        baseline = ~hk if not base_spec else np.ones(m, dtype=bool)

        # groups in order of first appearance
        code = run * 2 + hk
        uniq, first_idx, ginv = np.unique(code, return_index=True, return_inverse=True)
        ginv = ginv.reshape(-1)
        keys: list[tuple[Any, ...]] = []
        for c in uniq.tolist():
            r, h = c >> 1, c & 1
            keys.append(("decode", *spec_key, r) if h else ("decode", 0, 0, 0, r))
        new = sum(1 for k in keys if k not in self.groups)
        if new and len(self.groups) + new > MAX_GROUPS:
            return False  # the per-line path counts what does not fit
        for gi in np.argsort(first_idx, kind="stable").tolist():
            if keys[gi] not in self.groups:
                self.groups[keys[gi]] = _Group()
        groups = [self.groups[k] for k in keys]

        # throughput bins, exactly as _tput_bin
        pos = g > 0
        with np.errstate(divide="ignore"):
            v = np.log2(np.where(pos, g, 1.0)) * _BINS_PER_OCTAVE
        bins = np.floor(v).astype(np.int64)
        for i in np.flatnonzero(pos & (np.abs(v - np.rint(v)) < 1e-6)).tolist():
            bins[i] = _tput_bin(float(g[i]))
        bins[~pos] = _ZERO_BIN

        # (group, bin) cells in order of first appearance; sums added in record order
        lo = int(bins.min())
        span = int(bins.max()) - lo + 1
        combo = ginv.astype(np.int64) * span + (bins - lo)
        cu, cfirst, cinv = np.unique(combo, return_index=True, return_inverse=True)
        cinv = cinv.reshape(-1)
        cells: list[list[float]] = [[] for _ in range(cu.size)]
        for ci in np.argsort(cfirst, kind="stable").tolist():
            c = int(cu[ci])
            grp = groups[c // span]
            b = c % span + lo
            st = grp.bins.get(b)
            if st is None:
                st = grp.bins[b] = _new_stats()
            cells[ci] = st
        nc = len(cells)
        cnt = np.bincount(cinv, minlength=nc).tolist()
        cyc_n = np.bincount(cinv[pos], minlength=nc).tolist()
        base_n = np.bincount(cinv[baseline], minlength=nc).tolist()
        cycle = 1000.0 * eff * run / np.where(pos, g, 1.0)
        nb = ~baseline
        sums = []
        for idx, vals, sel in ((_ACC_S, eff, None), (_TOK_S, g, None), (_PR_S, per_req, None),
                               (_CYC_S, cycle, pos), (_WACC_S, eff * run, nb), (_W_S, run.astype(np.float64), nb)):
            acc_arr = np.array([st[idx] for st in cells], dtype=np.float64)
            if sel is None:
                np.add.at(acc_arr, cinv, vals)
            else:
                np.add.at(acc_arr, cinv[sel], vals[sel])
            sums.append((idx, acc_arr.tolist()))
        for ci, st in enumerate(cells):
            k = cnt[ci]
            st[_N] += k
            st[_ACC_N] += k
            st[_TOK_N] += k
            st[_PR_N] += k
            st[_CYC_N] += cyc_n[ci]
            st[_BASE_N] += base_n[ci]
            for idx, vals_l in sums:
                st[idx] = vals_l[ci]

        # median samples: fill, then the same reservoir draws in the same order as _sample
        sp = np.flatnonzero(pos)
        if sp.size:
            sg = ginv[sp]
            seen0 = np.array([grp.seen for grp in groups], dtype=np.int64)
            order = np.argsort(sg, kind="stable")
            sorted_g = sg[order]
            starts = np.searchsorted(sorted_g, sorted_g, side="left")
            rank = np.empty(sp.size, dtype=np.int64)
            rank[order] = np.arange(sp.size) - starts
            seen_after = seen0[sg] + rank + 1
            cyc_l = cycle[sp].tolist()
            bin_l = bins[sp].tolist()
            sg_l = sg.tolist()
            cap = MEDIAN_SAMPLE
            for i in np.flatnonzero(seen_after <= cap).tolist():
                groups[sg_l[i]].sample.append((bin_l[i], cyc_l[i]))
            late = np.flatnonzero(seen_after > cap)
            if late.size:
                # random.randrange(n) is _randbelow(n): getrandbits(n.bit_length()) until < n
                bits = self._rng.getrandbits
                for i, nn in zip(late.tolist(), seen_after[late].tolist()):
                    nb_ = nn.bit_length()
                    j = bits(nb_)
                    while j >= nn:
                        j = bits(nb_)
                    if j < cap:
                        groups[sg_l[i]].sample[j] = (bin_l[i], cyc_l[i])
            for gi, k in enumerate(np.bincount(sg, minlength=len(groups)).tolist()):
                groups[gi].seen += k

        self.prev_decode = prev_decode
        self.idle += n_idle
        self.formats["sglang_decode"] += m
        self.not_stored += m
        return True

    # -- one line ---------------------------------------------------------------------------

    def feed(self, raw: str) -> None:
        self.lines_total += 1
        line = raw.rstrip("\r\n")
        if line == LONG_LINE:
            self.lines_skipped += 1
            return
        try:
            outcome = self._line(line)
        except Exception:  # defensive: a parser bug must never escape to the caller
            if _RAISE_INTERNAL_ERRORS:
                raise
            outcome = "skipped"
        if outcome == "skipped":
            self.lines_skipped += 1
        elif outcome == "ignored":
            self.lines_ignored += 1

    def _line(self, line: str) -> str:
        stripped = line.strip()
        if not stripped:
            return "ignored"
        if stripped.startswith("{"):
            try:
                obj = json.loads(stripped)
            except (ValueError, RecursionError):
                return "skipped"
            try:
                rec = _parse_bench_json(obj)
            except _Corrupt:
                return "skipped"
            self._add_bench(rec)
            return "parsed"
        if "Decode batch" in line:
            return self._decode_line(line)
        if "KV Cache is allocated" in line or "max_total_num_tokens=" in line or "GPU KV cache size:" in line:
            m = _KV_POOL_RE.search(line)
            if m is None:
                return "skipped"
            tokens = int(m.group(1).replace(",", ""))
            if tokens <= 0:
                return "skipped"
            if tokens not in self.kv_pools and len(self.kv_pools) < MAX_KV_POOLS:
                self.kv_pools.append(tokens)
            self.formats["kv_pool"] += 1
            return "parsed"
        if "Capture " in line and " graph " in line:
            m = _CAPTURE_RE.search(line)
            if m:
                try:
                    cap = _parse_capture(m, line)
                except _Corrupt:
                    return "skipped"
                self._store(self.captures, cap)
                self.formats["sglang_capture"] += 1
                return "parsed"
        for mark, parser, fmt in ((_VLLM_V1_MARK, _parse_vllm_v1, "vllm_spec_v1"),
                                  (_VLLM_V0_MARK, _parse_vllm_v0, "vllm_spec_v0")):
            idx = line.find(mark)
            if idx >= 0:
                try:
                    vrec = parser(line[idx + len(mark):])
                except _Corrupt:
                    return "skipped"
                if vrec is None:
                    return "ignored"
                self._add_vllm(vrec)
                self.formats[fmt] += 1
                return "parsed"
        return self._side_info(line)

    def _decode_line(self, line: str) -> str:
        """Parse every ``Decode batch`` record on the line (two may be glued together)."""
        starts = [m.start() for m in re.finditer("Decode batch", line)]
        got = bad = idle = 0
        prefix = line[:starts[0]]
        for i, start in enumerate(starts):
            seg = line[start:starts[i + 1]] if i + 1 < len(starts) else line[start:]
            next_prefix = ""
            if i + 1 < len(starts):
                # a glued line: the next record's log prefix sits at the end of this piece
                tails = list(_BRACKET_PREFIX_RE.finditer(seg)) or list(_BARE_TS_RE.finditer(seg))
                if tails:
                    cut = tails[-1].start()
                    seg, next_prefix = seg[:cut], seg[cut:]
            try:
                rec = _parse_decode(seg, prefix)
            except _Corrupt:
                bad += 1
            else:
                if self._add_decode(rec.running_req, rec.accept_length, rec.accept_rate, rec.cuda_graph,
                                    rec.gen_throughput_tok_s, rec.queue_req, rec.timestamp, rec.tp_rank,
                                    rec.version_hint, rec):
                    got += 1
                else:
                    idle += 1
            prefix = next_prefix
        if got:
            return "parsed"
        if idle:
            return "idle"
        return "skipped" if bad else "ignored"

    # -- records ------------------------------------------------------------------------------

    def _store(self, lst: list, rec: Any) -> None:
        if len(lst) < MAX_STORED_RECORDS:
            lst.append(rec)
        else:
            self.not_stored += 1

    def _group(self, key: tuple[Any, ...]) -> _Group | None:
        g = self.groups.get(key)
        if g is None:
            if len(self.groups) >= MAX_GROUPS:
                return None
            g = self.groups[key] = _Group()
        return g

    def _sample(self, g: _Group, b: int, cycle: float) -> None:
        g.seen += 1
        if len(g.sample) < MEDIAN_SAMPLE:
            g.sample.append((b, cycle))
        else:
            j = self._rng.randrange(g.seen)
            if j < MEDIAN_SAMPLE:
                g.sample[j] = (b, cycle)

    def _add_decode(self, running: int, acc: float | None, rate: float | None, graph: bool | None, gen: float,
                    queue: int, ts: str | None, tp: int | None, hint: str, rec: DecodeRecord | None) -> bool:
        """Account one decode record; False when it is dropped as idle."""
        if running == 0:  # an idle scheduler tick
            self.idle += 1
            return False
        per_req = gen / running
        if ts is not None:
            prev = self.prev_decode
            self.prev_decode = (ts, per_req)
            if prev is not None and per_req * WARMUP_FACTOR < prev[1]:
                t0, t1 = _ts_seconds(prev[0]), _ts_seconds(ts)
                if t0 is not None and t1 is not None and t1 - t0 > IDLE_GAP_S:
                    self.idle += 1  # first window after an idle gap: throughput averaged over the gap
                    return False
        cfg = self.cur_spec
        if acc is None:
            key: tuple[Any, ...] = ("decode", 0, 0, 0, running)
            baseline, eff = True, 1.0
        else:
            if cfg:
                key = ("decode", cfg.get("steps"), cfg.get("topk"), cfg.get("num_draft_tokens"), running)
            else:
                key = ("decode", None, None, None, running)
            baseline, eff = key[1] == 0, acc
        g = self._group(key)
        if g is None:  # more distinct groups than MAX_GROUPS: counted, not summarised
            self.formats["sglang_decode"] += 1
            self.not_stored += 1
            return True
        b = _tput_bin(gen)
        st = g.bins.get(b)
        if st is None:
            st = g.bins[b] = _new_stats()
        st[_N] += 1
        st[_ACC_S] += eff
        st[_ACC_N] += 1
        st[_TOK_S] += gen
        st[_TOK_N] += 1
        st[_PR_S] += per_req
        st[_PR_N] += 1
        if gen > 0:
            cycle = 1000.0 * eff * running / gen
            st[_CYC_S] += cycle
            st[_CYC_N] += 1
            self._sample(g, b, cycle)
        if baseline:
            st[_BASE_N] += 1
        else:
            st[_WACC_S] += eff * running
            st[_W_S] += running
        self.formats["sglang_decode"] += 1
        if len(self.decode_store) < MAX_STORED_RECORDS:
            if rec is None:
                rec = DecodeRecord(running, acc, rate, graph, gen, queue, ts, tp, hint)
            self.decode_store.append((rec, dict(cfg) if cfg else None, key, b))
        else:
            self.not_stored += 1
        return True

    def _add_point(self, p: dict[str, Any]) -> _Group | None:
        key = (p["source"], p["steps"], p["topk"], p["num_draft_tokens"], p["batch"])
        g = self._group(key)
        if g is None:
            return None
        st = g.bins.get(0)
        if st is None:
            st = g.bins[0] = _new_stats()
        st[_N] += 1
        acc = p["accept_length"]
        if acc is not None:
            st[_ACC_S] += acc
            st[_ACC_N] += 1
            if not p["baseline"]:
                st[_WACC_S] += acc * p["weight"]
                st[_W_S] += p["weight"]
        for v, si, ni in ((p["tok_s"], _TOK_S, _TOK_N), (p["tok_s_per_req"], _PR_S, _PR_N)):
            if v is not None:
                st[si] += v
                st[ni] += 1
        if p["cycle_ms"] is not None:
            st[_CYC_S] += p["cycle_ms"]
            st[_CYC_N] += 1
            self._sample(g, 0, p["cycle_ms"])
        if p["baseline"]:
            st[_BASE_N] += 1
        return g

    def _add_bench(self, rec: BenchRecord) -> None:
        self._add_point(_bench_point(rec))
        self._store(self.bench, rec)
        self.formats[rec.source] += 1

    def _add_vllm(self, rec: VllmSpecRecord) -> None:
        g = self._add_point(_vllm_point(rec))
        if g is not None and rec.per_position_rates:
            if g.rates is None:
                g.rates = _RateAcc()
            g.rates.add(rec)
        self.rates.add(rec)
        self._store(self.vllm, rec)

    def _side_info(self, line: str) -> str:
        """Overlap and speculative settings from a line that holds no record: "ignored", or "skipped" where a
        speculative argument lies outside what an engine accepts (``speculative_num_steps=-3``)."""
        ov = _overlap_from_line(line)
        if ov is not None and self.overlap_explicit is None:
            self.overlap_explicit = ov
        if "speculative" not in line:
            return "ignored"
        if "speculative_algorithm=None" in line:
            self.cur_spec = None
            return "ignored"
        found = {}
        for key, rx in _SPEC_ARG_RES.items():
            m = rx.search(line)
            if m:
                lo, hi = _SPEC_ARG_RANGES[key]
                found[key] = int(m.group(1))
                if not lo <= found[key] <= hi:
                    return "skipped"
        if found:
            base = dict(self.cur_spec) if (self.cur_spec and "--" in line) else {}
            cfg = {"steps": None, "topk": None, "num_draft_tokens": None, **base, **found}
            self.cur_spec = cfg
            if self.spec_config is None:
                self.spec_config = dict(cfg)
            dm = _DISABLE_OVERLAP_RE.search(line)
            if dm and self.overlap_from_args is None:
                self.overlap_from_args = dm.group(1) == "False"
        return "ignored"

    # -- end -------------------------------------------------------------------------------------

    def _warmup_filter(self) -> tuple[dict[tuple[Any, ...], set[int]], int]:
        """Per decode group with >= 2 records: keep the throughput bins within WARMUP_FACTOR of
        the (upper) median; returns the kept bins and the number of records dropped."""
        kept: dict[tuple[Any, ...], set[int]] = {}
        dropped = 0
        span = int(round(math.log2(WARMUP_FACTOR) * _BINS_PER_OCTAVE))
        for key, g in self.groups.items():
            if key[0] != "decode" or len(g.bins) < 2:
                continue
            order = sorted(g.bins)
            n = sum(g.bins[b][_N] for b in order)
            if n < 2:
                continue
            target, run, med = n // 2, 0, order[-1]
            for b in order:
                run += g.bins[b][_N]
                if run > target:
                    med = b
                    break
            keep = {b for b in order if b >= med - span}
            if len(keep) < len(order):
                kept[key] = keep
                dropped += int(sum(g.bins[b][_N] for b in order if b not in keep))
        return kept, dropped

    def result(self, names: list[str], allow_empty: bool = False, binary: list[str] | None = None) -> IngestResult:
        kept, dropped = self._warmup_filter()
        if dropped:
            self.formats["sglang_decode"] -= dropped
            if self.formats["sglang_decode"] <= 0:
                del self.formats["sglang_decode"]
        store = [t for t in self.decode_store if t[2] not in kept or t[3] in kept[t[2]]]
        n_records = sum(self.formats.values())
        if n_records == 0 and not allow_empty:
            looks = f"; {', '.join(binary)} {'looks' if len(binary) == 1 else 'look'} binary, not a text log" if binary else ""
            raise IngestError(
                f"file: no recognisable SGLang/vLLM records in {', '.join(names) or '<none>'} "
                f"({self.lines_total} lines read, {self.lines_skipped} skipped as corrupt, {self.lines_ignored} "
                f"unrelated{looks}); allowed: SGLang server logs, bench_speculative/bench_serving JSONL, vLLM logs")
        overlap = (self.overlap_explicit if self.overlap_explicit is not None
                   else self.overlap_from_args)
        return IngestResult(
            files=list(names),
            formats={k: v for k, v in self.formats.items() if v > 0},
            decode=[t[0] for t in store],
            captures=self.captures,
            bench=self.bench,
            vllm=self.vllm,
            lines_total=self.lines_total,
            lines_skipped=self.lines_skipped,
            lines_ignored=self.lines_ignored,
            overlap_scheduler=overlap,
            spec_config=self.spec_config,
            kv_pools=list(self.kv_pools),
            lines_idle=self.idle + dropped,
            records_not_stored=self.not_stored,
            _decode_spec=[t[1] for t in store],
            _groups=self.groups,
            _kept_bins=kept,
            _rates=self.rates,
        )


def ingest_files(paths: list[str | os.PathLike], *, allow_empty: bool = False) -> IngestResult:
    """Stream log / JSONL files (invalid UTF-8 becomes U+FFFD) into one :class:`IngestResult`.

    ``-`` reads standard input. Only regular files are read (a FIFO or device is refused
    without blocking); memory does not grow with the length of the files. Raises
    :class:`IngestError` for a missing or unreadable file, or, unless ``allow_empty``, when no
    record at all was found in any file.
    """
    from ..errors import SpecsimError
    from .safe_read import iter_blocks

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    names = [os.fspath(p) for p in paths]
    if not names:
        raise IngestError("no input files given")
    if names.count("-") > 1:
        raise IngestError("file: '-' (standard input) can be given once")
    for name in names:
        if name == "-":
            continue
        if not name:
            raise IngestError("file: got ''; an empty file name; give a log file or '-' for standard input")
        try:
            st = os.stat(name)
        except FileNotFoundError:
            raise IngestError(f"file: {name} does not exist") from None
        except OSError as exc:
            raise IngestError(f"file: {name} is not readable ({exc.strerror or exc})") from None
        if stat_mod.S_ISDIR(st.st_mode):
            raise IngestError(f"file: {name} is a directory")
        if not stat_mod.S_ISREG(st.st_mode):
            raise IngestError(f"file: {name} is not a regular file (a FIFO, device or socket); "
                              "only regular files are read, or '-' for standard input")
    state = _State()
    binary: list[str] = []  # files whose text is NUL bytes or mostly not UTF-8: named when nothing was recognised
    for name in names:
        state.new_file()
        try:
            for block in iter_blocks(name, "file"):
                if (not binary or binary[-1] != name) and ("\x00" in block or 20 * block.count("\ufffd") > len(block)):
                    binary.append(name)
                state.feed_block(block)
        except SpecsimError as exc:
            raise IngestError(str(exc)) from None
        except OSError as exc:
            raise IngestError(f"file: {name} is not readable ({exc.strerror or exc})") from None
    return state.result(names, allow_empty, binary)


def ingest_text(text: str, name: str = "<text>", *, allow_empty: bool = False) -> IngestResult:
    """Parse log text already in memory; same rules and errors as :func:`ingest_files`."""
    state = _State()
    lines = text.splitlines()
    if lines:
        state.feed_block("\n".join(lines))
    return state.result([name], allow_empty)
