"""Arithmetic that keeps one scenario on Python floats and lets any input be a numpy array.

The cost model evaluates one scenario (every parameter a float: fast scalar arithmetic) or a
million (arrays: numpy broadcasting) through the same formulas; these helpers pick the branch.
"""

from __future__ import annotations

import numpy as np


def scalars(*xs) -> bool:
    """Every argument a plain Python number (one scenario's path)."""
    for x in xs:  # a plain loop: this runs for every operator of every scalar forward
        if type(x) is not float and not isinstance(x, (float, int)):
            return False
    return True


_PLAIN = (float, int, bool)


def ndim(x) -> int:
    """``np.ndim(x)``, without numpy's dispatch for a plain Python number (most calls of a one-scenario forward)."""
    return 0 if type(x) in _PLAIN else np.ndim(x)


def num(x):
    """A scalar as a Python float, anything else as a float array."""
    if isinstance(x, float):
        return float(x)
    return float(x) if ndim(x) == 0 else np.asarray(x, dtype=float)


def where(cond, a, b):
    """``np.where`` that keeps Python scalars scalar."""
    if isinstance(cond, (bool, np.bool_)):
        return a if cond else b
    return np.where(cond, a, b)


def maximum(a, b):
    """``np.maximum`` that keeps Python scalars scalar."""
    if isinstance(a, float) and isinstance(b, float):
        return max(a, b)
    return max(a, b) if ndim(a) == 0 and ndim(b) == 0 else np.maximum(a, b)
