"""Run ``specsim measure`` as ``python -m specsim.measure`` or by path.

By path (``python specsim/measure/__main__.py gpu ...``) this folder is loaded as a standalone
package named ``specsim_measure``, so ``specsim/__init__.py`` (and pydantic, scipy, ...) is never
imported: the measure code needs only the standard library, numpy, typer and torch.
"""

from __future__ import annotations

import os
import sys

if __package__ in (None, ""):
    import importlib.util

    _here = os.path.dirname(os.path.abspath(__file__))
    # The script's folder is sys.path[0]; its module names (profile, fit, ...) must not shadow
    # the standard library's (cProfile imports ``profile``).
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    if "specsim_measure" not in sys.modules:
        _spec = importlib.util.spec_from_file_location(
            "specsim_measure", os.path.join(_here, "__init__.py"), submodule_search_locations=[_here]
        )
        _mod = importlib.util.module_from_spec(_spec)
        sys.modules["specsim_measure"] = _mod
        _spec.loader.exec_module(_mod)
    from specsim_measure import common as _common
    from specsim_measure.cli import main

    _common.PROG = sys.argv[0]
else:
    from .cli import main

if __name__ == "__main__":
    main()
