"""SGLang v0.5.6's fused MoE Triton kernel (gate_up and down GEMMs), timed in a CUDA graph vs tokens M.

What the engine's routed-expert GEMMs cost on this GPU, at the per-rank shapes of Qwen3-30B-A3B
(TP1/2/4, bf16, SGLang's tuned H200 configs), GLM-4.7-Flash (TP1, bf16, no tuned config: SGLang's
default), DeepSeek-V3 (TP8, fp8 block-wise, tuned) and Kimi-K2 (TP8, fp8 block-wise, default). The
shared expert rides in the kernel as one more expert where SGLang v0.5.6 fuses it (DeepSeek-V3:
``deepseek_v2.py`` ``determine_num_fused_shared_experts`` requires 256 routed experts; GLM-4.7-Flash:
``glm4_moe.py`` of the fork) and not for Kimi-K2 (384 routed: not fused). The
kernel is ``sglang_fused_moe_kernel.py`` (verbatim); the token->expert alignment that SGLang's
``moe_align_block_size`` CUDA op makes is built once on the host (same layout), so only the two
GEMM kernels are timed. Random routing (uniform top-k; the shared expert fused as the last one
where SGLang fuses it); four copies of the weights rotate so every call streams them from HBM.
Needs torch and triton on a CUDA GPU (it never runs in CI):

    python3 calibration/kernels/sglang_fused_moe.py OUT.json      # ONLY=fp8: the fp8 shapes only
    HELDOUT=1 python3 calibration/kernels/sglang_fused_moe.py OUT.json   # four shapes the fit never sees
    HELDOUT=fp8 python3 calibration/kernels/sglang_fused_moe.py OUT.json # two more, block-wise fp8
"""
# ruff: noqa: B023  (each closure is captured into a CUDA graph in the iteration that defines it)
import json
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
from sglang_fused_moe_kernel import fused_moe_kernel  # noqa: E402
from small_kernels import _provenance, replay_us  # noqa: E402

HERE = os.path.dirname(__file__)


def default_config(M, E, fp8=False):  # get_default_config (v0.5.6): bf16 branch, fp8 block-wise branch
    if fp8:
        return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 4,
                "num_stages": 3}
    if M <= E:
        return {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}
    return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}


def align(topk_ids, block, E):
    """moe_align_block_size semantics in torch (host side, once): sorted ids padded per expert to block."""
    flat = topk_ids.flatten().cpu()
    n = flat.numel()
    sorted_ids, expert_ids = [], []
    for e in range(E):
        idx = (flat == e).nonzero().flatten().tolist()
        if not idx:
            continue
        pad = (-len(idx)) % block
        idx = idx + [n] * pad
        sorted_ids += idx
        expert_ids += [e] * (len(idx) // block)
    max_pad = n + (E + 1) * (block - 1)
    total = len(sorted_ids)
    sorted_ids += [n] * (max_pad - total)
    expert_ids += [-1] * (triton.cdiv(max_pad, block) - len(expert_ids))
    dev = topk_ids.device
    return (torch.tensor(sorted_ids, dtype=torch.int32, device=dev), torch.tensor(expert_ids, dtype=torch.int32, device=dev),
            torch.tensor([total], dtype=torch.int32, device=dev), total)


def launch(A, B, C, topk_w, sorted_ids, expert_ids, ntp, num_valid, top_k, mul_w, cfg, a_s=None, b_s=None):
    EM = sorted_ids.shape[0]
    grid = (triton.cdiv(EM, cfg["BLOCK_SIZE_M"]) * triton.cdiv(B.shape[1], cfg["BLOCK_SIZE_N"]),)
    fp8 = a_s is not None
    block = fp8 and a_s.dim() == 2  # block-wise scales (per 128 x 128); else per-tensor: one activation scale, one per expert
    fused_moe_kernel[grid](
        A, None, B, None, None, C, a_s, b_s, topk_w, sorted_ids, expert_ids, ntp,
        B.shape[1], B.shape[2], EM, num_valid,
        A.stride(0), A.stride(1), B.stride(0), B.stride(2), B.stride(1), 0, 0, C.stride(-2), C.stride(-1),
        a_s.stride(0) if block else 0, a_s.stride(1) if block else 0, b_s.stride(0) if fp8 else 0,
        b_s.stride(2) if block else 0, b_s.stride(1) if block else 0, 128 if block else 0, 128 if block else 0,
        MUL_ROUTED_WEIGHT=mul_w, top_k=top_k, compute_type=triton.language.bfloat16, use_fp8_w8a8=fp8,
        use_int8_w8a8=False, use_int8_w8a16=False, per_channel_quant=False, even_Ks=(B.shape[2] % cfg["BLOCK_SIZE_K"] == 0),
        c_sorted=False, filter_expert=True, **cfg)


def graph_us(fn, n_calls=50, reps=11):
    """Median per-call time (us) of ``fn`` captured ``n_calls`` times in one graph (:func:`replay_us`)."""
    t = sorted(x / n_calls for x in replay_us([fn], n_calls, reps))
    return t[len(t) // 2]


#: name, E (incl. fused shared), routed E, N (per rank), K, topk routed, shared fused, config file: the fitted shapes
SHAPES = [
    ("qwen3-30b-a3b tp1", 128, 128, 768, 2048, 8, False, "e128_n768_h200_bf16.json"),
    ("qwen3-30b-a3b tp2", 128, 128, 384, 2048, 8, False, "e128_n384_h200_bf16.json"),
    ("qwen3-30b-a3b tp4", 128, 128, 192, 2048, 8, False, "e128_n192_h200_bf16.json"),
    ("glm-4.7-flash tp1 (no tuned config)", 65, 64, 1536, 2048, 4, True, None),
    ("deepseek-v3 tp8 fp8 block", 257, 256, 256, 7168, 8, True, "e257_n256_h200_fp8_block128.json"),
    # SGLang v0.5.6 fuses the shared expert only for DeepSeek V3/R1 (n_routed_experts == 256,
    # deepseek_v2.py determine_num_fused_shared_experts); GLM-4.7-Flash's glm4_moe.py fuses it too
    ("kimi-k2 tp8 fp8 block (no tuned config)", 384, 384, 256, 7168, 8, False, None),
]
#: shapes the fit of calibration/kernels/compare.py never sees (HELDOUT=1)
HELDOUT_SHAPES = [
    ("qwen3-235b-a22b tp4", 128, 128, 384, 4096, 8, False, "e128_n384_h200_bf16.json"),
    ("qwen3-235b-a22b tp8", 128, 128, 192, 4096, 8, False, "e128_n192_h200_bf16.json"),
    ("qwen3-30b-a3b tp8 (no tuned config)", 128, 128, 96, 2048, 8, False, None),
    # GLM-4.7-FP8: per-tensor fp8, SGLang's E=160 table (the shared expert runs apart)
    ("glm-4.7-fp8 tp8 fp8 tensor", 160, 160, 192, 5120, 8, False, "e160_n192_h200_fp8.json"),
]
#: more held-out shapes, block-wise fp8 (HELDOUT=fp8): a tuned table at TP4, the default config at TP8
HELDOUT_FP8_SHAPES = [
    ("qwen3-235b-a22b tp4 fp8 block", 128, 128, 384, 4096, 8, False, "e128_n384_h200_fp8_block128.json"),
    ("qwen3-235b-a22b tp8 fp8 block (no tuned config)", 128, 128, 192, 4096, 8, False, None),
]
M_VALUES = [1, 2, 4, 8, 16, 32, 64, 128, 192, 256, 512]
KERNEL = ("SGLang v0.5.6 fused_moe_kernel (Triton), bf16 and fp8 block-wise; tuned H200 configs from SGLang's "
          "configs folder where v0.5.6 has one (sglang_moe_configs/), else its get_default_config")


def measure(shapes, ms, log=print) -> list[dict]:
    """Every (shape, GEMM, M) point: the kernel timed in a CUDA graph on the tiles it runs (``specsim measure gpu
    --sections moe`` calls this too)."""
    dev = "cuda"
    bf = torch.bfloat16
    points = []
    # rotate over copies of the expert weights so that each call streams them from HBM (no L2 reuse across calls)
    for name, E, Er, N, K, topk, shared, cfgf in shapes:
        cfgs = None
        if cfgf:
            cfgs = {int(k): v for k, v in json.load(open(os.path.join(HERE, "sglang_moe_configs", cfgf))).items()}
        fp8 = "fp8" in name
        tensor = "tensor" in name  # per-tensor fp8 scales
        wdt = torch.float8_e4m3fn if fp8 else bf
        copies = 4
        w13 = [(torch.randn(E, 2 * N, K, dtype=bf, device=dev) * 0.02).to(wdt) for _ in range(copies)]
        w2 = [(torch.randn(E, K, N, dtype=bf, device=dev) * 0.02).to(wdt) for _ in range(copies)]
        if tensor:
            b13_s, b2_s = torch.rand(E, device=dev), torch.rand(E, device=dev)
        else:
            b13_s = torch.rand(E, triton.cdiv(2 * N, 128), triton.cdiv(K, 128), device=dev) if fp8 else None
            b2_s = torch.rand(E, triton.cdiv(K, 128), triton.cdiv(N, 128), device=dev) if fp8 else None
        wbyte = 1 if fp8 else 2
        gen = torch.Generator(device="cpu").manual_seed(0)
        for M in ms:
            tk = topk + int(shared)
            ids = torch.stack([torch.randperm(Er, generator=gen)[:topk] for _ in range(M)])
            if shared:
                ids = torch.cat([ids, torch.full((M, 1), Er)], dim=1)
            ids = ids.to(dev)
            cfg = cfgs[min(cfgs, key=lambda x: abs(x - M))] if cfgs else default_config(M, E, fp8)
            cfg = dict(cfg)
            sorted_ids, expert_ids, ntp, total = align(ids, cfg["BLOCK_SIZE_M"], E)
            A = torch.randn(M, K, dtype=bf, device=dev).to(wdt)
            C1 = torch.empty(M, tk, 2 * N, dtype=bf, device=dev)
            A2 = torch.randn(M * tk, N, dtype=bf, device=dev).to(wdt)
            a1_s = (torch.rand(1, device=dev) if tensor else torch.rand(M, triton.cdiv(K, 128), device=dev)) if fp8 else None
            a2_s = (torch.rand(1, device=dev) if tensor else torch.rand(M * tk, triton.cdiv(N, 128), device=dev)) if fp8 else None
            C2 = torch.empty(M, tk, K, dtype=bf, device=dev)
            tw = torch.rand(M, tk, device=dev)
            state = {"i": 0}

            def gate_up():
                i = state["i"] = (state["i"] + 1) % copies
                launch(A, w13[i], C1, tw, sorted_ids, expert_ids, ntp, M * tk, tk, False, cfg, a1_s, b13_s)

            def down():
                i = state["i"] = (state["i"] + 1) % copies
                launch(A2, w2[i], C2, tw, sorted_ids, expert_ids, ntp, M * tk, 1, True, cfg, a2_s, b2_s)

            distinct = int(torch.unique(ids).numel())
            for part, fn, wbytes in (("gate_up", gate_up, distinct * 2 * N * K * wbyte), ("down", down, distinct * K * N * wbyte)):
                try:
                    us = graph_us(fn)
                    points.append({"shape": name, "part": part, "M": M, "shared_expert_fused": shared,
                                          "experts_read": distinct, "weight_bytes": wbytes,
                                          "padded_rows": total, "config": cfg, "us": us, "TB_s": wbytes / us / 1e6})
                    log(f"{name:36s} {part:7s} M={M:4d} experts={distinct:3d} rows_padded={total:5d} "
                        f"BM={cfg['BLOCK_SIZE_M']:3d} {us:8.2f} us {wbytes / us / 1e6:5.2f} TB/s")
                except Exception as exc:
                    log(f"FAIL {name} {part} {M} {type(exc).__name__} {str(exc)[:300]}")
        w13 = w2 = b13_s = b2_s = None  # free this shape's weights before the next
        torch.cuda.empty_cache()
    return points


def main():
    held = os.environ.get("HELDOUT")
    shapes, out_default = ((HELDOUT_FP8_SHAPES, "moe_probe_heldout_fp8.json") if held == "fp8" else
                           (HELDOUT_SHAPES, "moe_probe_heldout.json") if held else (SHAPES, "moe_probe.json"))
    only = os.environ.get("ONLY")
    if only:
        shapes = [s for s in shapes if only in s[0]]
    res = {"provenance": _provenance(), "kernel": KERNEL,
           "points": measure(shapes, M_VALUES, log=lambda line: print(line, flush=True))}
    with open(sys.argv[1] if len(sys.argv) > 1 else out_default, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
