"""Sweep CSV versus the sweep itself, for a 1,000,000-configuration sweep.

    python benchmarks/bench_csv.py [repeats]

Target (issue 11): writing the CSV takes no more than 3x the sweep (specsim/io/csvfmt.py: fixed-width
byte fields built with integer arithmetic on whole columns, NUL padding dropped in one pass). Each
repeat times a sweep and its CSV back to back; the median ratio is the figure (the machine is shared).
"""

from __future__ import annotations

import statistics
import sys
import time


def main() -> None:
    from specsim.analysis.sweep import sweep

    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    kw = dict(steps=list(range(1, 11)), batch=list(range(1, 101)), ctx=[512 * i for i in range(1, 11)],
              accept=[1.5 + 0.01 * i for i in range(100)], accept_at_steps=3)
    sweep(None, steps=[2])  # warm-up (imports, scenario cache)
    ratios = []
    for _ in range(repeats):
        t = time.perf_counter()
        res = sweep(None, **kw)
        t_sweep = time.perf_counter() - t
        t = time.perf_counter()
        text = res.to_csv()
        t_csv = time.perf_counter() - t
        ratios.append(t_csv / t_sweep)
        print(f"sweep of {res.n:,} configurations: {t_sweep:.2f} s; CSV ({len(text) / 1e6:.0f} MB): {t_csv:.2f} s "
              f"= {t_csv / t_sweep:.1f}x the sweep ({res.n / t_csv / 1e6:.2f} M rows/s)")
        del text, res
    med = statistics.median(ratios)
    print(f"median of {repeats}: {med:.1f}x the sweep; target: <= 3x the sweep", "OK" if med <= 3 else "MISSED")


if __name__ == "__main__":
    main()
