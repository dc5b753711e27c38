"""User-facing errors: one line naming the field, the value and what is allowed."""

from __future__ import annotations


class SpecsimError(ValueError):
    """An input problem the user can fix. The CLI prints ``error: <message>`` and exits 2."""

    def __init__(self, field: str, value: object, allowed: str, show_value: bool = True):
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field}: got {value!r}; {allowed}" if show_value else f"{field}: {allowed}")


def one_line(exc: BaseException) -> str:
    """Flatten any exception message to a single line."""
    return " ".join(str(exc).split())
