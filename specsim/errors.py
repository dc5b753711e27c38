"""User-facing errors: one line naming the field, the value and what is allowed.

Every input problem becomes ``error: FIELD: got VALUE; allowed ...`` on stderr and exit code 2
(see :func:`specsim.cli.main`). :func:`from_validation_error` turns a pydantic
``ValidationError`` into that form, naming the field path.
"""

from __future__ import annotations

import math

MAX_VALUE_CHARS = 80


class SpecsimError(ValueError):
    """An input problem the user can fix. The CLI prints ``error: <message>`` and exits 2."""

    def __init__(self, field: str, value: object, allowed: str, show_value: bool = True):
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field}: got {short_repr(value)}; {allowed}" if show_value else f"{field}: {allowed}")


class SpecsimTypeError(SpecsimError, TypeError):
    """An argument of the wrong type given to the Python API (``specsim.predict(steps="2")``): a
    :class:`SpecsimError` (the CLI's one line, exit 2) that ``except TypeError`` catches too."""


def short_repr(value: object, limit: int = MAX_VALUE_CHARS) -> str:
    """``repr`` cut to ``limit`` characters (a 100 kB value must not flood the error line)."""
    if isinstance(value, float) and not math.isfinite(value):
        text = str(value)
    else:
        try:
            text = repr(value)
        except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the error
            text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def one_line(exc: BaseException) -> str:
    """Flatten any exception message to a single line."""
    return " ".join(str(exc).split())


_ALLOWED = {
    "greater_than": "allowed > {gt}",
    "greater_than_equal": "allowed >= {ge}",
    "less_than": "allowed < {lt}",
    "less_than_equal": "allowed <= {le}",
    "finite_number": "allowed: a finite number",
    "int_from_float": "allowed: an integer (no fractional part)",
    "int_parsing": "allowed: an integer",
    "int_type": "allowed: an integer",
    "float_parsing": "allowed: a number",
    "float_type": "allowed: a number",
    "bool_type": "allowed: true or false",
    "bool_parsing": "allowed: true or false",
    "string_type": "allowed: a string",
    "list_type": "allowed: a list",
    "dict_type": "allowed: an object",
    "model_type": "allowed: an object",
    "model_attributes_type": "allowed: an object",
    "extra_forbidden": "unknown field; remove it (check the spelling)",
    "literal_error": "allowed: {expected}",
    "too_short": "allowed: at least {min_length} item(s)",
    "too_long": "allowed: at most {max_length} item(s)",
}


def from_validation_error(exc, origin: str = "") -> SpecsimError:
    """The first error of a pydantic ``ValidationError`` as a one-line :class:`SpecsimError`.

    The field is ``origin: dotted.path`` (or just the path); the value is shown unless it is an
    object or a list; the allowed part comes from the constraint that failed.
    """
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(x) for x in err.get("loc", ()))
    field = f"{origin}: {loc}" if origin and loc else (origin or loc or "input")
    kind = err.get("type", "")
    msg = str(err.get("msg", "")).removeprefix("Value error, ")
    if kind == "missing":
        return SpecsimError(field, None, "required field is missing", show_value=False)
    ctx = err.get("ctx") or {}
    template = _ALLOWED.get(kind)
    if template is not None:
        try:
            allowed = template.format(**{k: fmt_bound(v) for k, v in ctx.items()})
        except (KeyError, IndexError):
            allowed = msg
    else:
        allowed = msg if msg.startswith(("allowed", "must", "give")) else f"allowed: {msg}" if kind != "value_error" else msg
    value = err.get("input")
    if isinstance(value, (dict, list, tuple)) or kind == "value_error" and _mentions_value(msg, value):
        return SpecsimError(field, None, allowed, show_value=False)
    return SpecsimError(field, value, allowed)


def _mentions_value(msg: str, value: object) -> bool:
    return isinstance(value, (int, float, str)) and repr(value) in msg


def fmt_bound(v: object) -> str:
    """A range bound as a user reads it: whole numbers below 1e10 in digits (``1000000``, not ``1e+06``), larger
    ones and fractions as ``%g`` without the exponent's plus sign (``1e15``, ``2.5e-05``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if (isinstance(v, int) or (math.isfinite(v) and v.is_integer())) and abs(v) < 1e10:
        return str(int(v))
    return f"{float(v):g}".replace("e+", "e")


def fmt_range(lo: object, hi: object) -> str:
    """``[lo, hi]`` with :func:`fmt_bound` bounds."""
    return f"[{fmt_bound(lo)}, {fmt_bound(hi)}]"


def fmt_allowed(lo: object, hi: object, what: str = "integers") -> str:
    """``allowed: integers in [1, 64]``, or ``>= lo`` / ``<= hi`` where one side is None (open)."""
    if lo is not None and hi is not None:
        return f"allowed: {what} in {fmt_range(lo, hi)}"
    return f"allowed: {what} >= {fmt_bound(lo)}" if lo is not None else f"allowed: {what} <= {fmt_bound(hi)}"
