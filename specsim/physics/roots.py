"""Scalar root bracketing: Brent's method with the step rules and stopping test of ``scipy.optimize.brentq``.

The acceptance inversions run on every ``specsim predict``; importing ``scipy.optimize`` costs
~0.5 s of a cold start, more than the rest of the command. This is the same algorithm (Brent
1973, ch. 4: inverse quadratic / secant steps kept inside the bracket, bisection otherwise) with
the same defaults, so results match scipy's to the last bit (``tests/test_physics.py`` checks).
"""

from __future__ import annotations

import math

from ..errors import SpecsimError

XTOL = 2e-12
RTOL = 4 * 2.220446049250313e-16  # 4 x machine epsilon, scipy's floor
MAXITER = 100


def brentq(f, a: float, b: float, xtol: float = XTOL, rtol: float = RTOL, maxiter: int = MAXITER) -> float:
    """A root of ``f`` in [a, b], where f(a) and f(b) differ in sign."""
    x_prev, x = float(a), float(b)
    f_prev, fx = float(f(x_prev)), float(f(x))
    if math.isnan(f_prev) or math.isnan(fx):
        raise ValueError("the function is NaN at a bracket end")
    if f_prev * fx > 0:
        raise ValueError("f(a) and f(b) must have different signs")
    if f_prev == 0:
        return x_prev
    if fx == 0:
        return x
    x_far = f_far = 0.0  # the bracket's other end (x_far, f_far)
    step = step_before = 0.0
    for _ in range(maxiter):
        if f_prev * fx < 0:  # the root lies between x_prev and x: that is the new far end
            x_far, f_far = x_prev, f_prev
            step = step_before = x - x_prev
        if abs(f_far) < abs(fx):  # keep the best estimate in x
            x_prev, x, x_far = x, x_far, x
            f_prev, fx, f_far = fx, f_far, fx
        tol = (xtol + rtol * abs(x)) / 2
        half = (x_far - x) / 2
        if fx == 0 or abs(half) < tol:
            return x
        if abs(step_before) > tol and abs(fx) < abs(f_prev):
            if x_prev == x_far:  # secant
                trial = -fx * (x - x_prev) / (fx - f_prev)
            else:  # inverse quadratic through the three points
                s_prev = (f_prev - fx) / (x_prev - x)
                s_far = (f_far - fx) / (x_far - x)
                trial = -fx * (f_far * s_far - f_prev * s_prev) / (s_far * s_prev * (f_far - f_prev))
            if 2 * abs(trial) < min(abs(step_before), 3 * abs(half) - tol):
                step_before, step = step, trial
            else:
                step_before = step = half
        else:
            step_before = step = half
        x_prev, f_prev = x, fx
        x += step if abs(step) > tol else (tol if half > 0 else -tol)
        fx = float(f(x))
        if math.isnan(fx):
            raise ValueError("the function is NaN inside the bracket")
    raise SpecsimError("root", x, f"no convergence in {maxiter} iterations")
