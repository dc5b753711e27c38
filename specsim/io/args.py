"""Numbers from command-line flags: finite, bounded and sized before anything is expanded.

* every ``float`` option of the CLI refuses ``nan``, ``inf`` and overflowing values such as
  ``1e999``; every ``int`` option refuses values beyond +-1e15 (specific physical ranges are
  checked where the value is used, naming the field) -- :func:`install_click_number_checks`
  patches the two click types typer uses, so the check holds for every command at once;
* lists and ranges (``1,3,6``, ``1-10``, ``1.5:3.5:0.25``) are sized before they are built:
  ``--steps 1-1000000000`` is refused with the count and the limit, without allocating;
* sample counts (``37K``, ``1.4M``) are finite and positive.

Errors are :class:`~specsim.errors.SpecsimError` with the flag's name as the field.
"""

from __future__ import annotations

import math
import re

from ..errors import SpecsimError, fmt_allowed, fmt_bound, fmt_range, short_repr
from ..physics.rules import FLAG_LIMITS, LIMITS, MAX_SAMPLES

MAX_LIST_VALUES = 100_000  # values in one flag's list or range, after expansion
MAX_INT_FLAG = 10**15


_INT_TOKEN_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)


def split_items(text: str, field: str, sep: str = ",", example: str = "1,3,6") -> list[str]:
    """The ``sep``-separated items of a flag (spaces ignored); an empty item is refused, since dropping it
    would shift every later position (``--accept-rates 0.8,,0.4``)."""
    t = str(text).replace(" ", "")
    if not t:
        return []
    parts = t.split(sep)
    if any(not p for p in parts):
        between = "commas" if sep == "," else f"'{sep}'"
        raise SpecsimError(field, text, f"has an empty item between {between}; allowed: e.g. {example}")
    return parts


def _int_token(tok: str, field: str, text: str) -> int:
    t = tok.strip()
    if len(t) > 20 or not _INT_TOKEN_RE.fullmatch(t):  # one optional sign, then digits
        raise SpecsimError(field, text, "expected integers or ranges, e.g. 1,3,6 or 1-10")
    v = int(t)
    if abs(v) > MAX_INT_FLAG:
        raise SpecsimError(field, v, f"allowed: integers of magnitude <= {fmt_bound(MAX_INT_FLAG)}")
    return v


def parse_int_list(text: str, field: str, *, lo: int | None = None, hi: int | None = None,
                   max_values: int = MAX_LIST_VALUES) -> list[int]:
    """Comma list of integers and inclusive ranges ``A-B``; the count is checked first."""
    parts = split_items(text, field)
    if not parts:
        raise SpecsimError(field, text, "expected at least one integer")
    spans: list[tuple[int, int]] = []
    count = 0
    for part in parts:
        if "-" in part[1:]:
            cut = part.index("-", 1)
            a, b = _int_token(part[:cut], field, text), _int_token(part[cut + 1:], field, text)
            if b < a:
                raise SpecsimError(field, part, "the end of a range must be >= its start")
        else:
            a = b = _int_token(part, field, text)
        count += b - a + 1
        if count > max_values:
            raise SpecsimError(field, text, f"{count:,} values or more; allowed at most {max_values:,} per flag")
        spans.append((a, b))
    allowed = fmt_allowed(lo, hi)
    for a, b in spans:
        if lo is not None and a < lo:
            raise SpecsimError(field, a, allowed)
        if hi is not None and b > hi:
            raise SpecsimError(field, b, allowed)
    out: list[int] = []
    for a, b in spans:
        out.extend(range(a, b + 1))
    return out


def finite(value: float, field: str) -> float:
    if not math.isfinite(value):
        raise SpecsimError(field, value, "allowed: a finite number")
    return value


def _float_token(tok: str, field: str, text: str) -> float:
    try:
        v = float(tok)
    except ValueError:
        raise SpecsimError(field, text, "expected comma-separated numbers, e.g. 0.8,0.6,0.4") from None
    if not math.isfinite(v):
        raise SpecsimError(field, tok, "allowed: finite numbers (no nan, inf or overflowing values)")
    return v


def parse_floats(text: str, field: str) -> list[float]:
    """Comma list of finite numbers."""
    vals = [_float_token(x, field, text) for x in split_items(text, field)]
    if not vals:
        raise SpecsimError(field, text, "expected at least one number")
    if len(vals) > MAX_LIST_VALUES:
        raise SpecsimError(field, f"{len(vals):,} values", f"allowed at most {MAX_LIST_VALUES:,}")
    return vals


def parse_float_ranges(text: str, field: str, *, max_values: int = MAX_LIST_VALUES) -> list[float]:
    """Comma list of finite numbers and ranges ``START:STOP:STEP`` (inclusive), sized first."""
    parts = split_items(text, field)
    if not parts:
        raise SpecsimError(field, text, "the list is empty")
    plan: list[tuple[float, float, int]] = []
    count = 0
    for part in parts:
        if ":" in part:
            bits = part.split(":")
            if len(bits) != 3:
                raise SpecsimError(field, part, "a range is START:STOP:STEP, e.g. 1.5:3.5:0.25")
            a, b, step = (_float_token(x, field, text) for x in bits)
            if not step > 0 or b < a:
                raise SpecsimError(field, part, "need START:STOP:STEP with STOP >= START and STEP > 0")
            span = (b - a) / step
            if not math.isfinite(span) or span > 1e15:
                raise SpecsimError(field, part, f"too many values; allowed at most {max_values:,} per flag")
            n = int(math.floor(span + 1e-9)) + 1  # the values the range gives, as they are made below
            if n > max_values:
                raise SpecsimError(field, part, f"{n:,} values; allowed at most {max_values:,} per flag")
            if n > 1 and a + (n - 1) * step == a:
                raise SpecsimError(field, part, "STEP is too small to change START; give a larger step")
        else:
            a, step, n = _float_token(part, field, text), 0.0, 1
        count += n
        if count > max_values:
            raise SpecsimError(field, text, f"{count:,} values or more; allowed at most {max_values:,} per flag")
        plan.append((a, step, n))
    out: list[float] = []
    for a, step, n in plan:
        out.extend(a + i * step for i in range(n))
    return out


def parse_samples(text: str | float, field: str) -> float:
    """A sample count with an optional K/M/B suffix: 37K, 1.4M, 2e6 (finite, >= 1, <= 1e13)."""
    t = str(text).strip().upper().replace(",", "").replace("_", "")
    mult = {"K": 1e3, "M": 1e6, "B": 1e9}.get(t[-1:], 1.0)
    try:
        v = float(t[:-1] if t[-1:] in ("K", "M", "B") else t) * mult
    except ValueError:
        raise SpecsimError(field, text, "expected a number of samples such as 37000, 37K or 1.4M") from None
    if not math.isfinite(v) or not 1 <= v <= MAX_SAMPLES:
        raise SpecsimError(field, text, f"allowed: a sample count in [1, {fmt_bound(MAX_SAMPLES)}]")
    return v


# ---- click (vendored by typer): every float / int option of every command ----------------------

_INSTALLED = False


def _check_number(v, fail) -> None:
    if isinstance(v, bool):
        return
    if isinstance(v, float) and not math.isfinite(v):
        fail(f"got {short_repr(v)}; allowed: a finite number")
    if isinstance(v, int) and abs(v) > MAX_INT_FLAG:
        fail(f"got {short_repr(v)}; allowed: an integer of magnitude <= {fmt_bound(MAX_INT_FLAG)}")


def _not_an_integer(value, cause, param=None) -> str | None:
    """The standard ``got VALUE; allowed ...`` text for an int option given a non-integer
    (``--batch 1e30``, ``--top 1.5``, ``--batch abc``) or a float option given text (``--accept ''``)
    instead of pydantic's own words; None when ``cause`` is another error."""
    errors = getattr(cause, "errors", None)
    if not callable(errors):
        return None
    try:
        items = errors()
    except Exception:  # noqa: BLE001 - not a pydantic error after all
        return None
    kinds = {str(e.get("type", "")).split("_")[0] for e in items or ()}
    if kinds == {"float"}:  # a float option given text: the value quoted and what is allowed
        return not_a_number_message(items[0].get("input", value))
    if kinds != {"int"}:
        return None
    return not_an_integer_message(items[0].get("input", value), getattr(param, "name", None))


def _clipped(text: str) -> str:
    """Whitespace folded and cut to 40 characters, for a value shown in an error line."""
    text = " ".join(text.split())
    return text[:37] + "..." if len(text) > 40 else text


def not_an_integer_message(bad, option: str | None) -> str:
    """``got '1.5'; allowed: an integer in [1, 1000000]``: the value as given (quoted where it is text) and the
    option's own range where the schema has one (:data:`~specsim.physics.rules.FLAG_LIMITS`), else the magnitude
    every int option is held to."""
    text = _clipped(bad if isinstance(bad, str) else short_repr(bad))
    shown = repr(text) if isinstance(bad, str) and (not text or text != str(bad) or not _numberlike(text)) else text
    flag = (option or "").lstrip("-").replace("_", "-")  # click's parameter name (draft_tokens) -> the flag
    if flag in FLAG_LIMITS:
        lo, hi = LIMITS[FLAG_LIMITS[flag]]
        return f"got {shown}; allowed: an integer in {fmt_range(lo, hi)}"
    try:
        huge = abs(float(text)) > MAX_INT_FLAG
    except ValueError:
        huge = False
    return f"got {shown}; allowed: an integer" + (f" of magnitude <= {fmt_bound(MAX_INT_FLAG)}" if huge else "")


def not_a_number_message(bad) -> str:
    """``got 'x'; allowed: a finite number``: a float option given text."""
    return f"got {_clipped(str(bad))!r}; allowed: a finite number"


def _numberlike(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def install_click_number_checks() -> None:
    """Make every float option refuse non-finite values and every int option values beyond 1e15.

    typer >= 0.2x coerces parameters with pydantic ``TypeAdapter``s (``typer._coercion``); older
    versions use click's FLOAT / INT types. Either hook is wrapped; if neither exists the CLI
    still works and the checks downstream (schema, builders) still apply.
    """
    global _INSTALLED
    if _INSTALLED:
        return
    _INSTALLED = True
    try:
        from typer import _coercion
        from typer._click.exceptions import BadParameter

        orig = _coercion.AdapterRuntimeParam._coerce_value

        def coerce(self, value, param, ctx):
            def fail(msg: str) -> None:
                raise BadParameter(msg, ctx=ctx, param=param)

            try:
                v = orig(self, value, param, ctx)
            except BadParameter as exc:
                msg = _not_an_integer(value, exc.__cause__, param)
                if msg is None:
                    raise
                raise BadParameter(msg, ctx=ctx, param=param) from None

            for item in (v if isinstance(v, (list, tuple)) else (v,)):
                _check_number(item, fail)
            return v

        _coercion.AdapterRuntimeParam._coerce_value = coerce  # type: ignore[method-assign]
        return
    except (ImportError, AttributeError):  # pragma: no cover - other typer versions
        pass
    # typer < 0.29: click's FLOAT / INT types (click itself, or the copy typer >= 0.26 vendors as typer._click)
    import importlib

    for module in ("typer._click.types", "click.types"):
        try:
            ct = importlib.import_module(module)
        except ImportError:
            continue
        _wrap_click_types(ct)
        return


def _wrap_click_types(ct) -> None:
    """Wrap click's FloatParamType / IntParamType conversions with the same checks and words."""
    for cls in (ct.FloatParamType, ct.IntParamType):
        orig_convert = cls.convert

        def convert(self, value, param, ctx, _orig=orig_convert, _int=cls is ct.IntParamType):
            try:
                v = _orig(self, value, param, ctx)
            except Exception as exc:  # click's BadParameter: an int option given a non-integer, a float one text
                if not hasattr(exc, "format_message"):
                    raise
                if not _int:
                    self.fail(not_a_number_message(value), param, ctx)
                self.fail(not_an_integer_message(value, getattr(param, "name", None)), param, ctx)
            _check_number(v, lambda msg: self.fail(msg, param, ctx))
            return v

        cls.convert = convert  # type: ignore[method-assign]


def click_message_to_field(msg: str) -> str:
    """``Invalid value for '--scale': got 'inf'; ...`` -> ``scale: got 'inf'; ...`` (one line)."""
    import re

    m = re.match(r"Invalid value for '?(?:-[a-z], )?--([A-Za-z0-9-]+)(?:' / '--[A-Za-z0-9-]+)?'?: (.*)$", msg)
    if m:
        return f"{m.group(1)}: {m.group(2)}"
    m = re.match(r"Invalid value for '([A-Z_]+)': (.*)$", msg)
    if m:
        return f"{m.group(1).lower()}: {m.group(2)}"
    return msg
