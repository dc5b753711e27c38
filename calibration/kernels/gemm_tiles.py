"""cuBLAS bf16 GEMMs at Llama-3.1-8B's per-rank shapes, finely in M, with the kernel (and its tile) cuBLAS picks.

    python3 calibration/kernels/gemm_tiles.py --out $OUT/h200-gemm-tiles.json

Where ``models/profiles/h200.json`` times the same shapes at powers of two, this script steps M
finely through the memory-to-compute transition and past the ridge (M = 8 ... 2048), so that the
steps of tile quantisation show: a GEMM computes whole CTA tiles, so M = 520 costs what the next
multiple of the tile row count costs. Each point is one ``torch.mm`` in a CUDA graph, over enough
weight copies (>= 240 MiB, 4x the L2) that the weights come from HBM; ``us`` is per call. The
kernel cuBLAS runs at each point is read with the torch profiler (its name carries the tile, e.g.
``..._tilesize128x128x64_...`` on sm90). Runs by path, with no specsim import: torch only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_kernels import _provenance, replay_us  # noqa: E402

#: (name, K, N): the per-rank GEMMs of Llama-3.1-8B at TP1 (fused qkv and gate_up, as engines run them)
SHAPES = [("qkv_proj", 4096, 6144), ("o_proj", 4096, 4096), ("gate_up_proj", 4096, 28672),
          ("down_proj", 14336, 4096), ("lm_head", 4096, 128256)]
M_GRID = ([1, 8, 16] + list(range(32, 257, 16)) + list(range(288, 641, 32)) + [520, 528, 544, 576]
          + list(range(704, 1153, 64)) + [1040, 1088, 1280, 1536, 1792, 2048])
ROTATE_BYTES = 240 * 2**20


def _kernel_names(fn) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})


def point(k: int, n: int, m: int, reps: int) -> dict:
    copies = max(1, -(-ROTATE_BYTES // (k * n * 2)))
    ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5 for _ in range(copies)]
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    outs = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    fns = [lambda w=w, o=o: torch.mm(x, w.t(), out=o) for w, o in zip(ws, outs)]
    one = replay_us(fns, 1, 3)
    n_rep = max(1, int(2000.0 / max(statistics.median(one), 1.0)))
    us = [t / (n_rep * copies) for t in replay_us(fns, n_rep, reps)]
    names = _kernel_names(fns[0])
    del ws, outs
    torch.cuda.empty_cache()
    med = statistics.median(us)
    return {"M": m, "K": k, "N": n, "us": med, "p10_us": sorted(us)[len(us) // 10], "p90_us": sorted(us)[-1 - len(us) // 10],
            "TFLOP_s": 2.0 * m * k * n / med / 1e6, "weight_TB_s": k * n * 2 / med / 1e6, "kernels": names}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--shapes", default=",".join(s[0] for s in SHAPES))
    a = ap.parse_args()
    want = set(a.shapes.split(","))
    pts = []
    for name, k, n in SHAPES:
        if name not in want:
            continue
        for m in sorted(set(M_GRID)):
            p = point(k, n, m, a.reps)
            p["shape"] = name
            pts.append(p)
            print(f"{name:13s} M={m:5d} {p['us']:9.2f} us {p['TFLOP_s']:7.1f} TF/s {p['weight_TB_s']:5.2f} TB/s "
                  f"{p['kernels'][0][:90] if p['kernels'] else '-'}", flush=True)
    out = {"provenance": _provenance(), "description": __doc__.split("\n\n")[1].strip(), "points": pts}
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
