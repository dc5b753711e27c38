"""specsim measure: micro-benchmarks on this machine's GPU that write a hardware profile.

Importing this package (or ``specsim.measure.profile``, ``.fit``, ``.shapes``) never imports
torch: torch is imported only inside the functions that run measurements, so the base install
stays light. Mount the command line with ``from specsim.measure.cli import app as measure_app``.

It also runs without the rest of specsim (no pydantic needed): ``python -m specsim.measure ...``
where specsim imports, or ``python specsim/measure/__main__.py ...`` anywhere (by path).
"""

from __future__ import annotations

__all__ = ["MeasureError"]


class MeasureError(Exception):
    """A measurement cannot run here (no torch, no GPU, bad option): one line, exit 2."""
