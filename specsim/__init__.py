"""specsim: analytical performance model of EAGLE-style speculative decoding in LLM serving.

Layers (data flows one way, top to bottom):

* ``specsim.physics``  - scenario schema, flat parameters, operator costs, cycle, acceptance
* ``specsim.io``       - presets, HF configs, log ingest, hardware profiles, atomic files
* ``specsim.analysis`` - scenario builder, predict, sweep, calibrate, what-ifs, closed forms
* ``specsim.output``   - text/Markdown/JSON/HTML rendering, figures, reports
* ``specsim.measure``  - GPU micro-benchmarks (optional ``[measure]`` extra with torch)
* ``specsim.cli``      - the command line, thin on top

The names below are imported lazily so ``import specsim`` (and the CLI) start fast.
"""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "SpecsimError": ("specsim.errors", "SpecsimError"),
    "Prediction": ("specsim.analysis.predict", "Prediction"),
    "VerifyCurve": ("specsim.analysis.predict", "VerifyCurve"),
    "predict": ("specsim.analysis.predict", "predict"),
    "verify_ms": ("specsim.analysis.predict", "verify_ms"),
    "build_scenario": ("specsim.analysis.build", "build_scenario"),
    "builtin_scenarios": ("specsim.io.presets", "builtin_scenarios"),
    "load_scenario": ("specsim.io.presets", "load_scenario"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'specsim' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
