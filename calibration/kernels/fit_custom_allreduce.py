"""The two-shot custom all-reduce line of ``models/allreduce.json`` (``sglang-custom-twoshot-nvlink4``).

SGLang's (and vLLM's) custom all-reduce runs one-shot below 512 KiB at TP 4 (256 KiB at TP 6-8), two-shot
(reduce-scatter + all-gather over NVLink P2P loads) up to 8 MiB, NCCL above. The two-shot kernel has its own
latency and bandwidth: fitted here per TP, ``t = alpha + size * 2(n-1)/n / bus``, by linear least squares
to the published timings in ``calibration/datasets/published-custom-allreduce-h100.json``. The one-shot
series is held out: it checks the one-shot line already in the preset (fitted to other data).

    python calibration/kernels/fit_custom_allreduce.py           # the fits and their residuals
    python calibration/kernels/fit_custom_allreduce.py --write   # and writes them into models/allreduce.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
PRESET, ONE_SHOT = "sglang-custom-twoshot-nvlink4", "sglang-custom-nvlink4"


def series() -> list[dict]:
    path = ROOT / "calibration" / "datasets" / "published-custom-allreduce-h100.json"
    return json.loads(path.read_text(encoding="utf-8"))["series"]


def bus_bytes(size_mib, tp: int):
    return np.asarray(size_mib, dtype=float) * MIB * 2.0 * (tp - 1) / tp


def fit(points: list, tp: int) -> tuple[float, float, np.ndarray]:
    """(alpha us, bus bytes/s, residuals %) of the least-squares line through (MiB, us) points."""
    s, t = np.array(points, dtype=float).T
    x = bus_bytes(s, tp)
    (alpha, us_per_byte), *_ = np.linalg.lstsq(np.vstack([np.ones_like(x), x]).T, t, rcond=None)
    return float(alpha), 1e6 / float(us_per_byte), 100.0 * ((alpha + x * us_per_byte) / t - 1.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the fitted lines into models/allreduce.json")
    args = ap.parse_args()
    by_tp: dict[int, list] = {}
    for s in series():
        if s["kernel"] == "two-shot":
            by_tp.setdefault(int(s["tp"]), []).extend(s["points"])
    fits = {}
    for tp, pts in sorted(by_tp.items()):
        alpha, bus, res = fit(pts, tp)
        fits[tp] = (alpha, bus)
        print(f"two-shot TP{tp}: alpha {alpha:.2f} us, bus {bus / 1e9:.1f} GB/s over {len(pts)} points; "
              f"residuals {res.min():+.1f} .. {res.max():+.1f} %")
    presets = json.loads((ROOT / "models" / "allreduce.json").read_text(encoding="utf-8"))
    one = presets[ONE_SHOT]
    for s in series():
        if s["kernel"] == "one-shot":
            tp = int(s["tp"])
            alpha = one["alpha_us"][str(tp)]
            bus = one.get("bus_bytes_per_s_by_tp", {}).get(str(tp), one["bus_bytes_per_s"])
            size, t = np.array(s["points"], dtype=float).T
            err = 100.0 * ((alpha + bus_bytes(size, tp) / bus * 1e6) / t - 1.0)
            cells = ", ".join(f"{m:g} MiB {e:+.1f} %" for m, e in zip(size, err))
            print(f"held out, one-shot TP{tp} ({s['id']}), the preset's one-shot line vs measured: {cells} "
                  f"(SGLang takes one-shot below {(one['max_message_bytes_by_tp'][str(tp)] + 1) / MIB:g} MiB only)")
    if args.write:
        ref = min(fits)  # the default bandwidth (no TP listed): the TP with the most data (TP4)
        two = presets[PRESET]
        two["alpha_us"] = {str(tp): round(a, 2) for tp, (a, _) in fits.items()}
        two["bus_bytes_per_s"] = float(f"{fits[ref][1]:.4g}")
        two["bus_bytes_per_s_by_tp"] = {str(tp): float(f"{b:.4g}") for tp, (_, b) in fits.items()}
        (ROOT / "models" / "allreduce.json").write_text(json.dumps(presets, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {PRESET} into models/allreduce.json")


if __name__ == "__main__":
    main()
