"""Sweep CSV versus the sweep itself, for a 1,000,000-configuration sweep.

    python benchmarks/bench_csv.py

Target (issue 11): writing the CSV takes no more than 3x the sweep (vectorised formatting in
specsim/io/csvfmt.py instead of a Python loop per row).
"""

from __future__ import annotations

import time


def main() -> None:
    from specsim.analysis.sweep import sweep

    kw = dict(steps=list(range(1, 11)), batch=list(range(1, 101)), ctx=[512 * i for i in range(1, 11)],
              accept=[1.5 + 0.01 * i for i in range(100)], accept_at_steps=3)
    sweep(None, steps=[2])  # warm-up (imports, scenario cache)
    t = time.perf_counter()
    res = sweep(None, **kw)
    t_sweep = time.perf_counter() - t
    t = time.perf_counter()
    text = res.to_csv()
    t_csv = time.perf_counter() - t
    print(f"sweep of {res.n:,} configurations: {t_sweep:.2f} s")
    print(f"CSV of {res.n:,} rows ({len(text) / 1e6:.0f} MB): {t_csv:.2f} s = {t_csv / t_sweep:.1f}x the sweep "
          f"({res.n / t_csv / 1e6:.2f} M rows/s)")
    print("target: <= 3x the sweep", "OK" if t_csv <= 3 * t_sweep else "MISSED")


if __name__ == "__main__":
    main()
