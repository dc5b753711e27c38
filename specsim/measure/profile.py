"""Hardware profile JSON (what ``specsim measure`` writes): layout, loader, validator, lookups.

Torch-free (standard library + numpy). ``load_profile(path)`` reads a regular file of at most
64 MiB, rejects NaN/Infinity, nesting deeper than 32 and any field outside the layout's bounds,
and raises ``ProfileError`` with one line naming the field.

Layout (version 1; every section optional, at least one of gemm/attention/topk/graph/copy/collectives)::

    {
      "schema": "specsim.hw-profile", "version": 1,
      "measured": true,                         # false for --quick or CPU code-path runs
      "provenance": {"tool", "command", "date_utc", "torch", "gpu_name", "sm_count", "driver",
                     "cuda_runtime", "compute_capability", "memory_bytes", "l2_bytes", ...},
      "timing": {"method", "repeats", ...},
      "errors": ["what was skipped and why", ...],
      "gemm": {"curves": [{"name": "llama-3.1-8b/tp1/qkv", "model", "tp", "op",
                           "kind": "dense" | "grouped", "dtype": "bf16" | "fp8", "k", "n",
                           "experts"?, "topk"?, "impl",
                           "points": [{"m", "us", "p10_us", "p90_us", "bytes", "flops",
                                       "bytes_per_s", "flop_per_s", "rows"?, "active_experts"?}]}]},
      "attention": {"shape": {"q_heads", "kv_heads", "head_dim"},
                    "points": [{"phase": "decode" | "verify", "variant": "fold" | "gqa" | "fold_causal", "backend",
                                "batch", "ctx", "q_tokens", "kv_len", "kv_bytes", "us", "p10_us",
                                "p90_us", "kv_bytes_per_s"}]},
      "topk": {"points": [{"vocab", "rows", "k", "us", "p10_us", "p90_us"}]},
      "graph": {"fixed_us", "per_node_us", "replay": [{"nodes", "us", "p10_us", "p90_us", "host_us"}],
                "eager_launch_us", "eager": [{"op", "host_issue_us", "wall_us"}]},
      "copy": {"bytes_per_s", "points": [{"bytes", "us", "bytes_per_s"}]},
      "collectives": {"env": {...}, "tp": {"2": {"all_reduce": {"graph": {"points": [{"bytes", "us",
                      "p10_us", "p90_us"}], "fit": {"alpha_us", "bus_bytes_per_s"}}, "eager": {...}},
                      "all_gather": {...}}}}
    }

Times are microseconds of one call (the median over repeats; p10/p90 their spread); sizes bytes;
rates per second.
"""

from __future__ import annotations

import math
import os

import numpy as np

PROFILE_SCHEMA = "specsim.hw-profile"
PROFILE_VERSION = 1
MAX_BYTES = 64 * 2**20
MAX_DEPTH = 32
MAX_ITEMS = 200_000
SECTION_NAMES = ("gemm", "attention", "topk", "graph", "copy", "collectives", "host", "moe", "flashinfer")


class ProfileError(ValueError):
    """A profile file that cannot be used: the message names the file and the field."""


# ------------------------------------------------------------------------------------ reading
def _depth_and_size(obj, limit_depth=MAX_DEPTH, limit_items=MAX_ITEMS):
    stack = [(obj, 1)]
    count = 0
    while stack:
        o, d = stack.pop()
        count += 1
        if d > limit_depth:
            raise ProfileError(f"nesting deeper than {limit_depth}")
        if count > limit_items:
            raise ProfileError(f"more than {limit_items:,} values; allowed at most {limit_items:,}")
        if isinstance(o, dict):
            stack.extend((v, d + 1) for v in o.values())
        elif isinstance(o, list):
            stack.extend((v, d + 1) for v in o)


def shown_path(path) -> str:
    """A path as an error line names it: as given, or quoted with escapes when it holds a line break or another
    unprintable character (an error stays one line)."""
    p = os.fspath(path)
    return p if p.isprintable() else repr(p)


def read_json_bounded(path, max_bytes: int = MAX_BYTES):
    """Parse a profile through specsim's one bounded JSON reader (:func:`specsim.io.safe_read.read_json_file`:
    regular file only, at most ``max_bytes``, finite numbers, each key once, bounded nesting and size); what it
    refuses becomes a ProfileError naming the file."""
    from ..errors import SpecsimError, short_repr
    from ..io.safe_read import TooManyValues, read_json_file

    try:  # the text pre-check at 4x the limit (values <= commas + containers + 1); _depth_and_size counts exactly
        obj = read_json_file(path, "profile", max_bytes, max_depth=MAX_DEPTH, max_values=4 * MAX_ITEMS)
    except TooManyValues:
        raise ProfileError(f"{shown_path(path)}: more than {MAX_ITEMS:,} values; allowed at most {MAX_ITEMS:,}") from None
    except SpecsimError as exc:  # about the file (exc.allowed says why), or a number at exc.json_path
        where = getattr(exc, "json_path", None)
        what = f"{where}: got {short_repr(exc.value)}; {exc.allowed}" if where else exc.allowed
        raise ProfileError(f"{shown_path(path)}: {what}") from None
    try:
        _depth_and_size(obj)
    except ProfileError as exc:
        raise ProfileError(f"{shown_path(path)}: {exc}") from None
    return obj


def load_profile(path, max_bytes: int = MAX_BYTES) -> dict:
    """Read and validate a hardware profile; ProfileError (one line) on any problem."""
    obj = read_json_bounded(path, max_bytes=max_bytes)
    problems = validate_profile(obj)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ProfileError(f"{shown_path(path)}: {problems[0]}{more}")
    return obj


# --------------------------------------------------------------------------------- validation
def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _num(v, field, problems, positive=True, allow_none=False, integer=False):
    if v is None and allow_none:
        return
    try:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    except OverflowError:  # an integer too large for a float
        ok = False
    if ok and integer:
        ok = float(v).is_integer()
    if ok and positive:
        ok = v > 0
    elif ok:
        ok = v >= 0
    if not ok:
        kind = "a positive" if positive else "a non-negative"
        problems.append(f"{field}: must be {kind} finite {'integer' if integer else 'number'}, got {_short(v)}")


POINT_MIN_US = 1e-3  # a timed call takes at least 1 ns (the fits divide by it)
#: physical ceilings of a measured point's fields (a larger value is a corrupt file, and would overflow the fits)
POINT_MAX = {"us": 1e7, "vocab": 1 << 24, "rows": 1 << 24, "k": 1 << 24, "m": 1 << 24, "n": 1 << 24,
             "batch": 1 << 20, "ctx": 1 << 24, "q_tokens": 1 << 16, "nodes": 1 << 20, "bytes": 1e13,
             "bytes_per_s": 1e15, "experts": 1 << 16, "topk": 1 << 16, "kv_heads": 1 << 12, "kv_bytes": 1e13,
             "kv_bytes_per_s": 1e15}


def _points(section, key, field, problems, required):
    pts = section.get(key)
    if not isinstance(pts, list):
        problems.append(f"{field}.{key}: must be a list")
        return []
    out = []
    for i, p in enumerate(pts):
        if not isinstance(p, dict):
            problems.append(f"{field}.{key}[{i}]: must be an object")
            continue
        for name, kind in required.items():
            f = f"{field}.{key}[{i}].{name}"
            if name not in p:
                problems.append(f"{f}: missing")
            elif kind == "int":
                _num(p[name], f, problems, integer=True)
            elif kind == "num":
                _num(p[name], f, problems)
            elif kind == "num0":
                _num(p[name], f, problems, positive=False)
            elif kind == "str" and not isinstance(p[name], str):
                problems.append(f"{f}: must be a string")
            if kind != "str" and name in POINT_MAX:
                _in_range(p.get(name), POINT_MIN_US if name == "us" else 0, POINT_MAX[name], f, problems)
        for opt in ("p10_us", "p90_us"):
            if opt in p:
                _num(p[opt], f"{field}.{key}[{i}].{opt}", problems, allow_none=True)
        out.append(p)
    return out


MOE_POINTS_MAX = 2_000  # a full run writes 132; every --profile refits them (~3 s per 132)
MOE_M_MAX = 1_000_000  # tokens per call
MOE_BLOCK_MAX = 1024  # Triton tile sides


def _bound(x) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


def _in_range(v, lo, hi, field, problems) -> None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and not lo <= v <= hi:
        problems.append(f"{field}: got {_short(v)}; allowed {_bound(lo)} to {_bound(hi)}")


def _section_points(m, section: str, max_points: int, problems: list[str]):
    """(field name, point) for each object among a section's 1 to ``max_points`` points; the rest are problems."""
    pts = m.get("points") if isinstance(m, dict) else None
    if not isinstance(pts, list) or not pts or len(pts) > max_points:
        problems.append(f"{section}.points: must be a list of 1 to {max_points} points")
        return
    for i, p in enumerate(pts):
        f = f"{section}.points[{i}]"
        if not isinstance(p, dict):
            problems.append(f"{f}: must be an object")
            continue
        yield f, p


def _check_moe(m, problems: list[str]) -> None:
    """The moe section: points of SGLang's fused MoE kernel, as ``calibration/kernels/sglang_fused_moe.py`` writes them."""
    for f, p in _section_points(m, "moe", MOE_POINTS_MAX, problems):
        if not isinstance(p.get("shape"), str) or not p["shape"]:
            problems.append(f"{f}.shape: must be a non-empty string")
        if p.get("part") not in ("gate_up", "down"):
            problems.append(f"{f}.part: got {_short(p.get('part'))}; allowed: 'gate_up' or 'down'")
        if not isinstance(p.get("shared_expert_fused"), bool):
            problems.append(f"{f}.shared_expert_fused: must be true or false")
        for key in ("M", "experts_read", "padded_rows"):
            _num(p.get(key), f"{f}.{key}", problems, integer=True)
        _in_range(p.get("M"), 1, MOE_M_MAX, f"{f}.M", problems)
        for key in ("weight_bytes", "us"):
            _num(p.get(key), f"{f}.{key}", problems)
        _in_range(p.get("us"), 0.1, 1e7, f"{f}.us", problems)  # a kernel call: 0.1 us to 10 s
        _in_range(p.get("weight_bytes"), 1, 1e13, f"{f}.weight_bytes", problems)
        cfg = p.get("config")
        if not isinstance(cfg, dict):
            problems.append(f"{f}.config: must be an object (BLOCK_SIZE_M, BLOCK_SIZE_N, ...)")
        else:
            for key in ("BLOCK_SIZE_M", "BLOCK_SIZE_N"):
                _num(cfg.get(key), f"{f}.config.{key}", problems, integer=True)
                _in_range(cfg.get(key), 1, MOE_BLOCK_MAX, f"{f}.config.{key}", problems)


FLASHINFER_POINTS_MAX = 10_000


def _check_flashinfer(m, problems: list[str]) -> None:
    """The flashinfer section: FA2 prefill (and decode) calls, as ``calibration/kernels/flashinfer_tree.py`` writes them."""
    for f, p in _section_points(m, "flashinfer", FLASHINFER_POINTS_MAX, problems):
        kernel = p.get("kernel")
        if kernel not in ("prefill_paged", "decode_paged"):
            problems.append(f"{f}.kernel: got {_short(kernel)}; allowed: 'prefill_paged' or 'decode_paged'")
            continue
        sizes = (("num_qo_heads", 1024), ("num_kv_heads", 1024), ("head_dim", 1024), ("batch", 1 << 20), ("ctx", 1 << 24))
        for key, hi in sizes + ((("qo_len", 1 << 16),) if kernel == "prefill_paged" else ()):
            _num(p.get(key), f"{f}.{key}", problems, integer=True)
            _in_range(p.get(key), 1, hi, f"{f}.{key}", problems)
        for key in ("custom_mask_gpu_ms", "causal_gpu_ms", "gpu_ms"):
            if key in p:
                _num(p[key], f"{f}.{key}", problems)
                _in_range(p[key], 1e-4, 1e4, f"{f}.{key}", problems)  # a kernel call: 0.1 us to 10 s


def validate_profile(obj, strict: bool = True) -> list[str]:
    """Problems with a profile object (empty list = valid). ``strict=False`` skips the schema check."""
    problems: list[str] = []
    if not isinstance(obj, dict):
        return ["top level: must be a JSON object"]
    if strict or "schema" in obj:
        if obj.get("schema") != PROFILE_SCHEMA:
            problems.append(f"schema: expected {PROFILE_SCHEMA!r}, got {obj.get('schema')!r}")
        if obj.get("version") != PROFILE_VERSION:
            problems.append(f"version: expected {PROFILE_VERSION}, got {obj.get('version')!r}")
    prov = obj.get("provenance")
    if not isinstance(prov, dict):
        problems.append("provenance: must be an object (gpu_name, torch, date_utc, command, ...)")
    else:
        for key in ("gpu_name", "date_utc", "command", "torch"):
            if not isinstance(prov.get(key), str) or not prov.get(key):
                problems.append(f"provenance.{key}: must be a non-empty string")
        if "sm_count" in prov:  # torch's multiprocessor count (0: no CUDA device)
            _num(prov["sm_count"], "provenance.sm_count", problems, positive=False, integer=True)
            _in_range(prov["sm_count"], 0, 10_000, "provenance.sm_count", problems)
    present = [s for s in SECTION_NAMES if s in obj]
    if not present:
        problems.append(f"sections: none of {', '.join(SECTION_NAMES)} present")
    if "moe" in obj:
        _check_moe(obj["moe"], problems)
    if "flashinfer" in obj:
        _check_flashinfer(obj["flashinfer"], problems)
    if "host" in obj:
        h = obj["host"]
        sc = h.get("stop_check") if isinstance(h, dict) else None
        if not isinstance(sc, dict):
            problems.append("host.stop_check: must be an object")
        else:
            _num(sc.get("stop_string_decode_us"), "host.stop_check.stop_string_decode_us", problems, positive=False)
        sy = h.get("sync") if isinstance(h, dict) else None
        if sy is not None:
            if not isinstance(sy, dict):
                problems.append("host.sync: must be an object")
            else:
                _num(sy.get("item_idle_us"), "host.sync.item_idle_us", problems)
                if "device" in sy and not isinstance(sy["device"], str):
                    problems.append(f"host.sync.device: got {_short(sy['device'])}; allowed: a string (cuda or cpu)")
    if "gemm" in obj:
        g = obj["gemm"]
        curves = g.get("curves") if isinstance(g, dict) else None
        if not isinstance(curves, list):
            problems.append("gemm.curves: must be a list")
            curves = []
        for i, cv in enumerate(curves):
            f = f"gemm.curves[{i}]"
            if not isinstance(cv, dict):
                problems.append(f"{f}: must be an object")
                continue
            for key in ("k", "n"):
                _num(cv.get(key), f"{f}.{key}", problems, integer=True)
                _in_range(cv.get(key), 1, POINT_MAX[key], f"{f}.{key}", problems)
            if cv.get("kind") not in ("dense", "grouped"):
                problems.append(f"{f}.kind: expected dense or grouped, got {cv.get('kind')!r}")
            if cv.get("dtype") not in ("bf16", "fp8"):
                problems.append(f"{f}.dtype: expected bf16 or fp8, got {cv.get('dtype')!r}")
            if cv.get("kind") == "grouped":
                for key in ("experts", "topk"):
                    _num(cv.get(key), f"{f}.{key}", problems, integer=True)
                    _in_range(cv.get(key), 1, POINT_MAX[key], f"{f}.{key}", problems)
            pts = _points(cv, "points", f, problems, {"m": "int", "us": "num"})
            ms = [p.get("m") for p in pts if isinstance(p.get("m"), int)]
            if not pts:
                problems.append(f"{f}.points: must not be empty")
            elif any(b <= a for a, b in zip(ms, ms[1:])):
                problems.append(f"{f}.points: m must increase strictly")
    if "attention" in obj:
        a = obj["attention"]
        if not isinstance(a, dict):
            problems.append("attention: must be an object")
        else:
            pts = _points(
                a,
                "points",
                "attention",
                problems,
                {"batch": "int", "ctx": "int", "q_tokens": "int", "us": "num", "variant": "str"},
            )
            for i, p in enumerate(pts):
                if p.get("phase") not in ("decode", "verify"):
                    problems.append(f"attention.points[{i}].phase: expected decode or verify, got {p.get('phase')!r}")
                for key in ("kv_bytes", "kv_bytes_per_s"):  # optional; the attention fit reads them where present
                    if key in p:
                        _num(p[key], f"attention.points[{i}].{key}", problems, allow_none=True)
                        _in_range(p[key], 0, POINT_MAX[key], f"attention.points[{i}].{key}", problems)
            shape = a.get("shape")
            if shape is not None:
                if not isinstance(shape, dict):
                    problems.append("attention.shape: must be an object")
                elif "kv_heads" in shape:
                    _num(shape["kv_heads"], "attention.shape.kv_heads", problems, integer=True)
                    _in_range(shape["kv_heads"], 1, POINT_MAX["kv_heads"], "attention.shape.kv_heads", problems)
    if "topk" in obj:
        t = obj["topk"]
        if not isinstance(t, dict):
            problems.append("topk: must be an object")
        else:
            _points(t, "points", "topk", problems, {"vocab": "int", "rows": "int", "k": "int", "us": "num"})
    if "graph" in obj:
        g = obj["graph"]
        if not isinstance(g, dict):
            problems.append("graph: must be an object")
        else:
            for key in ("fixed_us", "per_node_us", "idle_replay_us"):
                if key in g:
                    _num(g[key], f"graph.{key}", problems, positive=False)
            if "eager_launch_us" in g:
                _num(g["eager_launch_us"], "graph.eager_launch_us", problems)
            if "replay" in g:
                _points(g, "replay", "graph", problems, {"nodes": "int", "us": "num"})
    if "copy" in obj:
        cp = obj["copy"]
        if not isinstance(cp, dict):
            problems.append("copy: must be an object")
        else:
            for i, p in enumerate(_points(cp, "points", "copy", problems, {"bytes": "int", "us": "num", "bytes_per_s": "num"})):
                if "variant" in p and not isinstance(p["variant"], str):
                    problems.append(f"copy.points[{i}].variant: got {_short(p['variant'])}; allowed: a string")
            if "bytes_per_s" in cp:
                _num(cp["bytes_per_s"], "copy.bytes_per_s", problems, allow_none=True)
    if "collectives" in obj:
        problems.extend(validate_collectives(obj["collectives"]))
    return problems


def validate_collectives(sec) -> list[str]:
    problems: list[str] = []
    if not isinstance(sec, dict) or not isinstance(sec.get("tp"), dict):
        return ["collectives.tp: must be an object keyed by world size"]
    for tp, ops in sec["tp"].items():
        f = f"collectives.tp.{tp}"
        if not str(tp).isdigit() or int(tp) < 2:
            problems.append(f"{f}: key must be a world size >= 2")
        if not isinstance(ops, dict):
            problems.append(f"{f}: must be an object")
            continue
        for op, modes in ops.items():
            if op not in ("all_reduce", "all_gather"):
                continue
            if not isinstance(modes, dict):
                problems.append(f"{f}.{op}: must be an object")
                continue
            for mode, series in modes.items():
                if not isinstance(series, dict):
                    problems.append(f"{f}.{op}.{mode}: must be an object")
                    continue
                _points(series, "points", f"{f}.{op}.{mode}", problems, {"bytes": "int", "us": "num"})
                fit = series.get("fit")
                if fit is not None:
                    if not isinstance(fit, dict):
                        problems.append(f"{f}.{op}.{mode}.fit: must be an object")
                    else:
                        _num(fit.get("alpha_us"), f"{f}.{op}.{mode}.fit.alpha_us", problems, positive=False)
    return problems


# ------------------------------------------------------------------------------------ lookups
def _section(profile: dict, name: str) -> dict:
    sec = profile.get(name)
    if not isinstance(sec, dict):
        raise ProfileError(f"profile has no {name} section (measure it with: specsim measure gpu --sections {name})")
    return sec


def interp_loglog(x, xs, ys, slope_above: float | None = 1.0):
    """Piecewise-linear interpolation in log-log. Below the first point: the first value; above the
    last: ``slope_above`` (1 = proportional, the compute-bound limit) or flat when None."""
    xs = np.asarray(xs, dtype=float)
    ys = np.asarray(ys, dtype=float)
    x = np.asarray(x, dtype=float)
    lx, ly = np.log(xs), np.log(ys)
    out = np.exp(np.interp(np.log(np.maximum(x, xs[0])), lx, ly))
    if slope_above is not None:
        above = x > xs[-1]
        out = np.where(above, ys[-1] * (np.maximum(x, 1e-300) / xs[-1]) ** slope_above, out)
    return out


def gemm_shapes_available(profile: dict, dtype: str | None = None) -> list[tuple]:
    return [
        (c.get("name"), c["kind"], c["dtype"], c["k"], c["n"])
        for c in _section(profile, "gemm")["curves"]
        if dtype is None or c["dtype"] == dtype
    ]


def _curve(profile: dict, k: int, n: int, dtype: str, kind: str | None):
    for c in _section(profile, "gemm")["curves"]:
        if c["k"] == k and c["n"] == n and c["dtype"] == dtype and (kind is None or c["kind"] == kind):
            return c
    return None


def gemm_curve(profile: dict, k: int, n: int, dtype: str = "bf16", kind: str | None = None):
    """(m array, us array) of the measured curve of shape K x N; ProfileError when not measured."""
    c = _curve(profile, k, n, dtype, kind)
    if c is None:
        have = ", ".join(f"{nm or '?'} {kk}x{nn}" for nm, _, _, kk, nn in gemm_shapes_available(profile, dtype)[:12])
        raise ProfileError(f"gemm: no {dtype} curve for K={k} N={n}; measured: {have}")
    m = np.array([p["m"] for p in c["points"]], dtype=float)
    us = np.array([p["us"] for p in c["points"]], dtype=float)
    return m, us


def gemm_us(profile: dict, m, k: int, n: int, dtype: str = "bf16", kind: str | None = None):
    """GEMM time (us) at M tokens: the exact shape's curve interpolated in log-log; for a shape not
    measured, the nearest measured shape (in log K and log N) rescaled by the roofline of the two:
    time scales with max(flop ratio, byte ratio) at the same M."""
    c = _curve(profile, k, n, dtype, kind)
    if c is not None:
        ms, us = gemm_curve(profile, k, n, dtype, kind)
        return interp_loglog(m, ms, us)
    cands = [
        cv for cv in _section(profile, "gemm")["curves"] if cv["dtype"] == dtype and cv["kind"] == (kind or "dense")
    ]
    if not cands:
        raise ProfileError(f"gemm: no {dtype} {kind or 'dense'} curves in the profile")
    ref = min(cands, key=lambda cv: math.hypot(math.log(cv["k"] / k), math.log(cv["n"] / n)))
    ms, us = gemm_curve(profile, ref["k"], ref["n"], dtype, ref["kind"])
    isz = 1 if dtype == "fp8" else 2
    m = np.asarray(m, dtype=float)
    flop_ratio = (k * n) / (ref["k"] * ref["n"])
    byte_ratio = (m * k * isz + k * n * isz + m * n * 2) / (
        m * ref["k"] * isz + ref["k"] * ref["n"] * isz + m * ref["n"] * 2
    )
    return interp_loglog(m, ms, us) * np.maximum(flop_ratio, byte_ratio)


def gemm_efficiency(profile: dict, k: int, n: int, dtype: str = "bf16"):
    """(m, flop/s, bytes/s) arrays of one measured curve."""
    c = _curve(profile, k, n, dtype, None)
    if c is None:
        gemm_curve(profile, k, n, dtype)  # raises with the list of shapes
    m = np.array([p["m"] for p in c["points"]], dtype=float)
    return m, np.array([p["flop_per_s"] for p in c["points"]]), np.array([p["bytes_per_s"] for p in c["points"]])


def graph_costs(profile: dict) -> tuple[float, float]:
    """(fixed_us, per_node_us) of a CUDA-graph replay."""
    g = _section(profile, "graph")
    if "fixed_us" not in g or "per_node_us" not in g:
        raise ProfileError("graph: no replay fit (fixed_us, per_node_us) in the profile")
    return float(g["fixed_us"]), float(g["per_node_us"])


def eager_launch_us(profile: dict) -> float:
    """Wall time per back-to-back eager launch of a tiny kernel (host launch bound)."""
    g = _section(profile, "graph")
    if "eager_launch_us" not in g:
        raise ProfileError("graph: no eager launch measurement in the profile")
    return float(g["eager_launch_us"])


def copy_bytes_per_s(profile: dict) -> float:
    """Device-to-device copy bandwidth, bytes read + written per second."""
    v = _section(profile, "copy").get("bytes_per_s")
    if not v:
        raise ProfileError("copy: no bandwidth in the profile")
    return float(v)


def attention_table(profile: dict, variant: str = "fold", phase: str | None = None) -> dict:
    """Columns (numpy arrays) of the attention points: batch, ctx, q_tokens, kv_len, us, kv_bytes_per_s, backend."""
    pts = [
        p
        for p in _section(profile, "attention")["points"]
        if p.get("variant") == variant and (phase is None or p.get("phase") == phase)
    ]
    if not pts:
        raise ProfileError(f"attention: no points of variant {variant!r}" + (f" and phase {phase!r}" if phase else ""))
    cols = {}
    for key in ("batch", "ctx", "q_tokens", "kv_len", "us", "p10_us", "p90_us", "kv_bytes_per_s"):
        cols[key] = np.array([p.get(key, np.nan) if p.get(key) is not None else np.nan for p in pts], dtype=float)
    cols["backend"] = [p.get("backend") for p in pts]
    return cols


def attention_us(profile: dict, batch: int, ctx: int, q_tokens: int, variant: str = "fold") -> float:
    """Attention time (us) from the table: nearest measured q_tokens (in log), then log-log
    interpolation over ctx for each measured batch and over batch between them (proportional
    beyond the largest measured batch or ctx)."""
    t = attention_table(profile, variant)
    qs = np.unique(t["q_tokens"])
    q = qs[np.argmin(np.abs(np.log(qs) - math.log(q_tokens)))]
    at_q = t["q_tokens"] == q
    bs, vals = [], []
    for b in np.unique(t["batch"][at_q]):
        sel = at_q & (t["batch"] == b)
        order = np.argsort(t["ctx"][sel])
        bs.append(b)
        vals.append(float(interp_loglog(ctx, t["ctx"][sel][order], t["us"][sel][order], slope_above=1.0)))
    return float(interp_loglog(batch, bs, vals, slope_above=1.0))


def topk_us(profile: dict, rows: int, vocab: int, k: int = 8) -> float:
    pts = [p for p in _section(profile, "topk")["points"] if p["vocab"] == vocab and p["k"] == k]
    if not pts:
        vs = sorted({p["vocab"] for p in profile["topk"]["points"]})
        raise ProfileError(f"topk: no points for vocab {vocab} k {k}; measured vocabs {vs}")
    pts.sort(key=lambda p: p["rows"])
    return float(interp_loglog(rows, [p["rows"] for p in pts], [p["us"] for p in pts]))


def collective_fit(profile: dict, tp: int, op: str = "all_reduce", mode: str = "graph") -> tuple[float, float]:
    """(alpha_us, bus_bytes_per_s) fitted for one collective at world size tp."""
    sec = _section(profile, "collectives")
    try:
        fit = sec["tp"][str(tp)][op][mode]["fit"]
    except (KeyError, TypeError):
        have = sorted(sec.get("tp", {}))
        raise ProfileError(f"collectives: no {op} {mode} fit at TP {tp}; measured TP sizes {have}") from None
    return float(fit["alpha_us"]), float(fit["bus_bytes_per_s"])
