"""Field checks for plain JSON data (datasets): numbers are numbers, finite and in range.

Each check names the field (``dataset x.json: points.2.tokens``) and says what is allowed;
booleans are not numbers, ``"88.8"`` is not a number, ``3.7`` is not an integer.
"""

from __future__ import annotations

import math

from ..errors import SpecsimError, fmt_bound, fmt_range


def is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_int(v: object, field: str, lo: int, hi: int) -> int:
    if not is_number(v) or (isinstance(v, float) and not (math.isfinite(v) and v.is_integer())):
        raise SpecsimError(field, v, f"allowed: an integer in [{lo}, {hi}]")
    iv = int(v)  # type: ignore[arg-type]
    if not lo <= iv <= hi:
        raise SpecsimError(field, v, f"allowed: an integer in [{lo}, {hi}]")
    return iv


def check_number(v: object, field: str, lo: float, hi: float, *, lo_open: bool = False) -> float:
    ok = is_number(v) and math.isfinite(float(v))  # type: ignore[arg-type]
    fv = float(v) if ok else math.nan  # type: ignore[arg-type]
    if not ok or fv > hi or fv < lo or (lo_open and fv == lo):
        rng = f"({fmt_bound(lo)}, {fmt_bound(hi)}]" if lo_open else fmt_range(lo, hi)
        raise SpecsimError(field, v, f"allowed: a finite number in {rng}")
    return fv


def check_dataset(d: object, name: str) -> dict:
    """A measured-points dataset: an object with model, gpu, tp and a non-empty points list of
    ``{tokens, ms[, batch][, ctx]}``; optional ``baseline_tok_s``, ``ctx``, ``batch`` and ``eager_points`` (the same
    forwards launched eagerly, each point as in ``points``)."""
    f = f"dataset {name}"
    if not isinstance(d, dict):
        raise SpecsimError(f, None, "must hold a JSON object with model, gpu, tp and points", show_value=False)
    for key in ("model", "gpu", "tp", "points"):
        if key not in d:
            raise SpecsimError(f"{f}: {key}", None, "required field is missing (need model, gpu, tp, points)",
                               show_value=False)
    for key in ("model", "gpu"):
        if not isinstance(d[key], str) or not d[key].strip():
            raise SpecsimError(f"{f}: {key}", d[key], "allowed: a preset name or config path (a string)")
    check_int(d["tp"], f"{f}: tp", 1, 4096)
    for key, lo, hi in (("ctx", 0, 100_000_000), ("batch", 1, 1_000_000)):
        if d.get(key) is not None:
            check_int(d[key], f"{f}: {key}", lo, hi)
    if d.get("baseline_tok_s") is not None:
        check_number(d["baseline_tok_s"], f"{f}: baseline_tok_s", 0.0, 1e9, lo_open=True)
    if d.get("routing_skew") is not None:  # target.moe.routing_skew's range
        from ..physics.moe import ROUTING_SKEW_MAX

        check_number(d["routing_skew"], f"{f}: routing_skew", 0.0, ROUTING_SKEW_MAX)
    for key in ("name", "dtype", "moe_kernel", "engine_preset", "eager_allreduce"):
        if d.get(key) is not None and (not isinstance(d[key], str) or not d[key].strip()):
            raise SpecsimError(f"{f}: {key}", d[key], "allowed: a name (text)")
    if d.get("engine") is not None and not isinstance(d["engine"], dict):
        raise SpecsimError(f"{f}: engine", d["engine"], "allowed: an object of engine fields to override")
    if d.get("graph") is not None and not isinstance(d["graph"], bool):
        raise SpecsimError(f"{f}: graph", d["graph"], "allowed: true or false")
    if not isinstance(d["points"], list) or not d["points"]:
        raise SpecsimError(f"{f}: points", None, "must be a non-empty list of {tokens, ms}", show_value=False)
    if d.get("eager_points") is not None and not isinstance(d["eager_points"], list):
        raise SpecsimError(f"{f}: eager_points", d["eager_points"], "allowed: a list of {tokens, ms} (may be empty)")
    for key in ("points", "eager_points"):
        _check_points(d.get(key) or [], f"{f}: {key}")
    return d


def _check_points(pts: list, f: str) -> None:
    """A dataset's measured forwards: at most 100,000 objects ``{tokens, ms[, batch][, ctx]}``, each in range."""
    if len(pts) > 100_000:
        raise SpecsimError(f, f"{len(pts):,} points", "allowed at most 100,000")
    for i, x in enumerate(pts):
        if not isinstance(x, dict) or "tokens" not in x or "ms" not in x:
            raise SpecsimError(f"{f}.{i}", None, "must be an object {tokens, ms[, batch]}", show_value=False)
        check_int(x["tokens"], f"{f}.{i}.tokens", 1, 65536)
        check_number(x["ms"], f"{f}.{i}.ms", 1e-4, 1e7)  # >= 0.1 us: below any kernel launch
        if x.get("batch") is not None:
            check_int(x["batch"], f"{f}.{i}.batch", 1, 1_000_000)
        if x.get("ctx") is not None:  # the same range as the dataset's own ctx
            check_int(x["ctx"], f"{f}.{i}.ctx", 0, 100_000_000)
