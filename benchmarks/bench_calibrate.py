"""Speed of ``specsim calibrate``: one fit, and the parametric bootstrap's refits.

    python benchmarks/bench_calibrate.py [--bootstrap 200] [--runs 3]

Each case fits :func:`specsim.analysis.calibrate.fit` to measured verify points (the founding case's
3 and 6 tokens, and eight points on Llama-3.1-8B with a baseline) and prints the median wall time of
``--runs`` fits without a bootstrap, and of one fit with ``--bootstrap`` refits, as ms per refit. The
Jacobian of every least-squares step is one flat evaluation of all its finite-difference columns
(``_model_values(..., per_set=..., sets=k)``); ``--bootstrap 2000``, the most ``calibrate`` allows,
costs about 2000 x the per-refit figure.
"""

from __future__ import annotations

import argparse
import statistics
import time

from specsim.analysis.calibrate import Point, base_scenario, fit

CASES = {
    "kimi-k2.5 h200 TP8, 2 points (the founding case)": (("kimi-k2.5", "h200", 8), [Point(3, 25.6), Point(6, 28.7)], None),
    "llama-3.1-8b h100 TP1, 8 points + baseline": (
        ("llama-3.1-8b", "h100", 1),
        [Point(k, 7.0 + 0.12 * k) for k in (1, 2, 3, 4, 6, 8, 12, 16)],
        140.0,
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", type=int, default=200, help="refits timed for the per-refit figure")
    ap.add_argument("--runs", type=int, default=3, help="fits timed without a bootstrap (median)")
    args = ap.parse_args()
    for name, (dep, pts, base) in CASES.items():
        sc = base_scenario(*dep)
        plain = []
        for _ in range(args.runs):
            t = time.perf_counter()
            fit(sc, pts, baseline_tok_s=base)
            plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        fit(sc, pts, baseline_tok_s=base, bootstrap=args.bootstrap, progress=False)
        boot = time.perf_counter() - t - statistics.median(plain)
        print(f"{name}: fit {1e3 * statistics.median(plain):.0f} ms; bootstrap {1e3 * boot / args.bootstrap:.1f} ms "
              f"per refit ({args.bootstrap} refits {boot:.1f} s; --bootstrap 2000 ~ {2000 * boot / args.bootstrap / 60:.1f} min)")


if __name__ == "__main__":
    main()
