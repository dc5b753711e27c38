"""Speed of specsim: single-scenario latency and vectorised evaluations per second.

    python benchmarks/bench_predict.py [--points 1000000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=1_000_000)
    args = ap.parse_args()

    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "specsim", "predict", "--steps", "2", "--accept", "2.1"], capture_output=True)
    cli_s = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr

    import specsim
    from specsim.physics.cycle import baseline_step_ms, cycle_ms, cycle_phases_ms
    from specsim.physics.params import scenario_params

    specsim.predict()  # warm
    n = 50
    t0 = time.perf_counter()
    for _ in range(n):
        specsim.predict(steps=2, accept=2.1)
    api_ms = (time.perf_counter() - t0) / n * 1e3

    rng = np.random.default_rng(0)
    p = scenario_params(specsim.build_scenario())
    N = args.points
    p["steps"] = rng.integers(1, 11, N).astype(float)
    p["num_draft_tokens"] = p["steps"] + 1
    p["batch"] = rng.integers(1, 65, N).astype(float)
    p["ctx"] = rng.integers(256, 32768, N).astype(float)
    p["allreduce_scale"] = rng.uniform(0.25, 2.0, N)
    tau = 1 + rng.uniform(0, 1, N) * p["steps"]
    t0 = time.perf_counter()
    cyc = cycle_ms(cycle_phases_ms(p, tau))
    base = baseline_step_ms(p)["total"]
    tok_s = p["batch"] * tau / cyc * 1e3
    speedup = tok_s * base / (p["batch"] * 1e3)
    dt = time.perf_counter() - t0
    assert np.isfinite(speedup).all()
    from specsim.analysis.sweep import sweep

    t0 = time.perf_counter()
    # exactly 1,000,000 configurations: 10 steps x 100 accept lengths x 10 batches x 10 contexts x 10 AR scales
    res = sweep(steps=range(1, 11), accept=list(np.linspace(1.2, 3.0, 100)), batch=[1, 2, 4, 8, 12, 16, 24, 32, 48, 64],
                ctx=[512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 98304, 131072],
                allreduce_scale=list(np.linspace(0.25, 2.5, 10)), progress=False)
    sweep_s = time.perf_counter() - t0
    print(f"CLI predict (subprocess, cold):      {cli_s * 1e3:8.1f} ms")
    print(f"API predict (one scenario, warm):    {api_ms:8.2f} ms")
    print(f"specsim.analysis.sweep grid, {res.n:,} configurations: {sweep_s * 1e3:8.1f} ms  -> {res.n / sweep_s:,.0f} evaluations/s")
    print(f"worst case, {N:,} random points (every parameter differs per point): {dt * 1e3:8.1f} ms "
          f"-> {N / dt:,.0f} evaluations/s")


if __name__ == "__main__":
    main()
