"""Does a captured kernel cost more in a mixed sequence than repeated alone? A decode layer's kernels, timed both ways.

A real forward replays a CUDA graph of ~10-20 different kernels per layer, one after another;
``small_kernels.py`` times each kernel repeated back to back. Here the kernels of a Llama-3.1-8B
decode layer at batch 1 (add + RMSNorm, the qkv GEMM, rotary, KV store, attention stand-in
(SDPA over a 1024-token cache), the o GEMM, add + RMSNorm, gate_up GEMM, SiLU x mul, down GEMM)
are captured (a) each one 32 times alone (one per layer, each layer's own weights) and (b) as 32
layers in order (HBM-resident weights, as in a forward). ``mixed_minus_sum_us_per_kernel`` is (b)
minus the sum of (a), over the kernels one layer launches (counted with the torch profiler). Needs torch and triton on
a CUDA GPU (it never runs in CI):

    python3 calibration/kernels/kernel_sequence.py OUT.json
"""

# ruff: noqa: B023  (each closure is captured into a CUDA graph in the iteration that defines it)
import json
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
from small_kernels import _provenance, add_rmsnorm_k, kv_store_k, replay_us, rope_k, silu_mul_k  # noqa: E402


def graph_us(fns, n_rep=1, reps=11):
    """Median time (us) of one replay of a graph that runs ``fns`` in order ``n_rep`` times (:func:`replay_us`)."""
    t = sorted(replay_us(fns, n_rep, reps, warm=1))
    return t[len(t) // 2]


def _kernels_launched(fns) -> list[str]:
    """Names of the GPU kernels that running ``fns`` once launches (torch profiler, CUDA activity)."""
    from torch.profiler import ProfilerActivity, profile

    for f in fns:  # warm: compile / autotune outside the count
        f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for f in fns:
            f()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type.name == "CUDA" and "memcpy" not in e.name.lower()
            and "memset" not in e.name.lower()]


def main():
    dev, bf = "cuda", torch.bfloat16
    H, I, HQ, HK, D, L, CTX = 4096, 14336, 32, 8, 128, 32, 1024
    n = 1
    x = torch.randn(n, H, dtype=bf, device=dev)
    r = torch.randn(n, H, dtype=bf, device=dev) * 0.01
    w = torch.ones(H, dtype=bf, device=dev)
    o = torch.empty_like(x)
    gu = torch.empty(n, 2 * I, dtype=bf, device=dev)
    act = torch.empty(n, I, dtype=bf, device=dev)
    qkv = torch.empty(n, (HQ + 2 * HK) * D, dtype=bf, device=dev)
    q = qkv[:, : HQ * D].view(n, HQ, D)
    k = qkv[:, HQ * D: (HQ + HK) * D].view(n, HK, D)
    v = qkv[:, (HQ + HK) * D:].view(n, HK, D)
    kc = torch.zeros(L, CTX + 8, HK * D, dtype=bf, device=dev)
    vc = torch.zeros_like(kc)
    cos = torch.randn(8192, D // 2, device=dev)
    sin = torch.randn(8192, D // 2, device=dev)
    pos = torch.tensor([CTX], dtype=torch.int32, device=dev)
    slot = torch.tensor([CTX], dtype=torch.int32, device=dev)
    attn_out = torch.empty(n, HQ * D, dtype=bf, device=dev)
    wq = [torch.randn((HQ + 2 * HK) * D, H, dtype=bf, device=dev) * 0.02 for _ in range(L)]
    wo = [torch.randn(H, HQ * D, dtype=bf, device=dev) * 0.02 for _ in range(L)]
    wgu = [torch.randn(2 * I, H, dtype=bf, device=dev) * 0.02 for _ in range(L)]
    wd = [torch.randn(H, I, dtype=bf, device=dev) * 0.02 for _ in range(L)]

    def layer(li):
        kcl, vcl = kc[li], vc[li]
        kv_k = kcl.view(CTX + 8, HK, D)[None].transpose(1, 2)  # [1, HK, ctx, D]
        kv_v = vcl.view(CTX + 8, HK, D)[None].transpose(1, 2)
        return [
            ("add_rmsnorm", lambda: add_rmsnorm_k[(n,)](x, r, w, o, H=H, BLOCK=4096)),
            ("qkv_gemm", lambda: torch.mm(o, wq[li].t(), out=qkv)),
            ("rotary", lambda: rope_k[(n, HQ + HK)](q, k, pos, cos, sin, HQ=HQ, HK=HK, D=D)),
            ("kv_store", lambda: kv_store_k[(n,)](k.reshape(n, -1), v.reshape(n, -1), slot, kcl, vcl, W=HK * D, BLOCK=1024)),
            ("attention_sdpa", lambda: attn_out.view(1, n, HQ, D).transpose(1, 2).copy_(
                torch.nn.functional.scaled_dot_product_attention(q.view(1, n, HQ, D).transpose(1, 2), kv_k, kv_v,
                                                                 enable_gqa=True))),
            ("o_gemm", lambda: torch.mm(attn_out, wo[li].t(), out=x)),
            ("add_rmsnorm_2", lambda: add_rmsnorm_k[(n,)](x, r, w, o, H=H, BLOCK=4096)),
            ("gate_up_gemm", lambda: torch.mm(o, wgu[li].t(), out=gu)),
            ("silu_and_mul", lambda: silu_mul_k[(n, triton.cdiv(I, 1024))](gu, act, I=I, BLOCK=1024)),
            ("down_gemm", lambda: torch.mm(act, wd[li].t(), out=x)),
        ]

    names = [nm for nm, _ in layer(0)]
    res = {"provenance": _provenance(), "shape": dict(H=H, I=I, HQ=HQ, HK=HK, D=D, layers=L, ctx=CTX, tokens=n),
           "alone_us": {}, "notes": []}
    # (a) each kernel alone: one layer's worth of it per layer (own weights), L times in a row
    for j, nm in enumerate(names):
        fns = [layer(li)[j][1] for li in range(L)]
        res["alone_us"][nm] = graph_us(fns) / L
        print(f"{nm:16s} alone {res['alone_us'][nm]:8.2f} us", flush=True)
    # (b) the 32 layers in order
    fns = [f for li in range(L) for _, f in layer(li)]
    mixed = graph_us(fns) / L
    summed = sum(res["alone_us"].values())
    res["mixed_layer_us"] = mixed
    res["sum_alone_layer_us"] = summed
    res["kernel_names"] = _kernels_launched([f for _, f in layer(0)])
    res["kernels_per_layer"] = len(res["kernel_names"])
    res["mixed_minus_sum_us_per_kernel"] = (mixed - summed) / res["kernels_per_layer"]
    print(f"layer mixed {mixed:.2f} us, sum alone {summed:.2f} us, per kernel {res['mixed_minus_sum_us_per_kernel']:+.2f} us",
          flush=True)
    with open(sys.argv[1] if len(sys.argv) > 1 else "kernel_sequence.json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
