"""GPU time per call of engine-style small kernels inside a CUDA graph, vs tokens per forward.

The kernels engines run between the GEMMs of a decode layer, written as engines write them (one
fused Triton kernel each: add + RMSNorm, SiLU x mul, NeoX rotary on q and k, KV-cache store) and
three torch ops (residual add, router top-k, softmax), at Llama-3.1-8B widths (hidden 4096,
intermediate 14336, 32/8 heads of 128) for 1 ... 1024 tokens, each captured 200 times in one CUDA
graph: ``us`` is the per-call mean (median over 15 replays; ``p10``/``p90`` their percentiles), the
graph node gap included. The
tiny ``add_`` on 256 floats is the floor any captured kernel pays. Needs torch and triton on a
CUDA GPU (it never runs in CI):

    python3 calibration/kernels/small_kernels.py OUT.json
"""
# ruff: noqa: B023  (each closure is captured into a CUDA graph in the iteration that defines it)
import json
import os
import sys
import time

import torch
import triton
import triton.language as tl


@triton.jit
def add_rmsnorm_k(x_ptr, r_ptr, w_ptr, o_ptr, H: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < H
    x = tl.load(x_ptr + row * H + offs, mask=m, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row * H + offs, mask=m, other=0.0).to(tl.float32)
    s = x + r
    tl.store(r_ptr + row * H + offs, s.to(tl.bfloat16), mask=m)
    var = tl.sum(s * s, axis=0) / H
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(o_ptr + row * H + offs, (s * tl.rsqrt(var + 1e-6) * w).to(tl.bfloat16), mask=m)


@triton.jit
def silu_mul_k(x_ptr, o_ptr, I: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = offs < I
    g = tl.load(x_ptr + row * 2 * I + offs, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * 2 * I + I + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(o_ptr + row * I + offs, (g / (1 + tl.exp(-g)) * u).to(tl.bfloat16), mask=m)


@triton.jit
def rope_k(q_ptr, k_ptr, pos_ptr, cos_ptr, sin_ptr, HQ: tl.constexpr, HK: tl.constexpr, D: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    half = tl.arange(0, D // 2)
    p = tl.load(pos_ptr + t)
    c = tl.load(cos_ptr + p * (D // 2) + half)
    s = tl.load(sin_ptr + p * (D // 2) + half)
    if h < HQ:
        base = q_ptr + (t * HQ + h) * D
    else:
        base = k_ptr + (t * HK + (h - HQ)) * D
    a = tl.load(base + half).to(tl.float32)
    b = tl.load(base + D // 2 + half).to(tl.float32)
    tl.store(base + half, (a * c - b * s).to(tl.bfloat16))
    tl.store(base + D // 2 + half, (b * c + a * s).to(tl.bfloat16))


@triton.jit
def kv_store_k(k_ptr, v_ptr, slot_ptr, kc_ptr, vc_ptr, W: tl.constexpr, BLOCK: tl.constexpr):
    t = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < W
    slot = tl.load(slot_ptr + t).to(tl.int64)
    tl.store(kc_ptr + slot * W + offs, tl.load(k_ptr + t * W + offs, mask=m), mask=m)
    tl.store(vc_ptr + slot * W + offs, tl.load(v_ptr + t * W + offs, mask=m), mask=m)


def replay_us(fns, n_rep: int, reps: int, warm: int = 3) -> list[float]:
    """Time (us) of each of ``reps`` replays of one CUDA graph that runs ``fns`` in order ``n_rep`` times,
    after ``warm`` eager passes on a side stream; one CUDA-event pair and a sync per replay. The one
    graph timer of the kernel scripts (``sglang_fused_moe.py``, ``kernel_sequence.py`` call it too)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warm):
            for f in fns:
                f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n_rep):
            for f in fns:
                f()
    g.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    return out


def per_call_us(fn, n_calls=200, reps=15):
    """(median, p10, p90) of the per-call time (us) of ``fn`` captured ``n_calls`` times in one graph."""
    import numpy as np

    p10, med, p90 = np.percentile([t / n_calls for t in replay_us([fn], n_calls, reps)], [10, 50, 90])
    return float(med), float(p10), float(p90)


def _provenance() -> dict:
    """GPU, driver, CUDA, torch, Triton, UTC date and the command line of this run (for every kernel dataset)."""
    import subprocess

    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception:  # no nvidia-smi: leave it out
        driver = None
    props = torch.cuda.get_device_properties(0)
    return {"gpu": torch.cuda.get_device_name(), "sm_count": props.multi_processor_count, "driver": driver,
            "cuda": torch.version.cuda, "torch": torch.__version__, "triton": triton.__version__,
            "date_utc": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
            "command": " ".join(["python3", "calibration/kernels/" + os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "measured": True}


def main():
    dev = "cuda"
    bf = torch.bfloat16
    H, I, HQ, HK, D, E = 4096, 14336, 32, 8, 128, 128
    res = {"provenance": _provenance(), "shape": dict(H=H, I=I, HQ=HQ, HK=HK, D=D, E=E),
           "points": []}
    tiny = torch.zeros(256, device=dev)
    med, lo, hi = per_call_us(lambda: tiny.add_(1.0))
    res["points"].append({"kernel": "add_ 256 fp32", "tokens": 0, "bytes": 2048, "us": med, "p10": lo, "p90": hi})
    cos = torch.randn(8192, D // 2, device=dev)
    sin = torch.randn(8192, D // 2, device=dev)
    kc = torch.zeros(65536, HK * D, dtype=bf, device=dev)
    vc = torch.zeros_like(kc)
    for n in (1, 4, 16, 64, 256, 1024):
        x = torch.randn(n, H, dtype=bf, device=dev)
        r = torch.randn(n, H, dtype=bf, device=dev) * 0.01
        w = torch.ones(H, dtype=bf, device=dev)
        o = torch.empty_like(x)
        gu = torch.randn(n, 2 * I, dtype=bf, device=dev)
        act = torch.empty(n, I, dtype=bf, device=dev)
        q = torch.randn(n, HQ, D, dtype=bf, device=dev)
        k = torch.randn(n, HK, D, dtype=bf, device=dev)
        v = torch.randn(n, HK, D, dtype=bf, device=dev)
        pos = torch.randint(0, 8192, (n,), device=dev, dtype=torch.int32)
        slots = torch.randperm(65536, device=dev)[:n].to(torch.int32)
        logits = torch.randn(n, E, device=dev)
        cases = {
            "fused_add_rmsnorm (triton)": (lambda: add_rmsnorm_k[(n,)](x, r, w, o, H=H, BLOCK=4096), 5 * n * H * 2),
            "silu_and_mul (triton)": (lambda: silu_mul_k[(n, triton.cdiv(I, 1024))](gu, act, I=I, BLOCK=1024), 3 * n * I * 2),
            "rotary neox q+k (triton)": (lambda: rope_k[(n, HQ + HK)](q, k, pos, cos, sin, HQ=HQ, HK=HK, D=D), 2 * n * (HQ + HK) * D * 2),
            "kv_store (triton)": (lambda: kv_store_k[(n,)](k, v, slots, kc, vc, W=HK * D, BLOCK=1024), 4 * n * HK * D * 2),
            "residual add (torch)": (lambda: torch.add(x, r, out=o), 3 * n * H * 2),
            "router topk 8 of 128 (torch.topk)": (lambda: torch.topk(logits, 8, dim=-1), n * E * 4),
            "softmax 128 (torch)": (lambda: torch.softmax(logits, dim=-1), 2 * n * E * 4),
        }
        for name, (fn, nbytes) in cases.items():
            try:
                med, lo, hi = per_call_us(fn)
                res["points"].append({"kernel": name, "tokens": n, "bytes": nbytes, "us": med, "p10": lo, "p90": hi})
                print(f"{name:38s} n={n:5d} {med:8.3f} us  bytes {nbytes}", flush=True)
            except Exception as exc:  # keep going
                print("FAIL", name, n, exc, flush=True)
    out = sys.argv[1] if len(sys.argv) > 1 else "small_kernels.json"
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
