"""specsim: analytical performance model of EAGLE-style speculative decoding in LLM serving."""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import SpecsimError  # noqa: E402
from .predict import Prediction, VerifyCurve, build_scenario, predict, verify_ms  # noqa: E402
from .presets import builtin_scenarios, load_scenario  # noqa: E402

__all__ = [
    "Prediction",
    "SpecsimError",
    "VerifyCurve",
    "build_scenario",
    "builtin_scenarios",
    "load_scenario",
    "predict",
    "verify_ms",
]
