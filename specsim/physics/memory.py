"""KV-cache capacity: how many tokens of KV cache an engine's memory rule leaves per GPU after the weights, and so
how many requests it can run at once at a context (the rest wait in the queue, as engines admit them).

SGLang sizes its token pool at start-up (``ModelRunner.profile_max_num_token``): the memory free after the weights
load, less the share ``1 - mem_fraction_static`` of the memory free before it, over one token's KV bytes across all
layers. ``mem_fraction_static`` is the launch's, else a rule of GPU memory and TP (:func:`sglang_mem_fraction_static`).
vLLM gives the KV cache ``gpu_memory_utilization`` of the GPU less the weights (draft included) and the peak the
profile run saw (activations, sampler, non-torch memory), shared by the target's and the draft's layers.
All sizes here are bytes per TP rank; arrays broadcast (the sweep's axes)."""

from __future__ import annotations

import math

import numpy as np

from .numeric import scalars as _scalars

MIB = 2.0**20
GIB = 2.0**30
#: kv_memory_rule codes in the parameter dict: the engine keeps no model of its pool / SGLang's / vLLM's
KV_RULE_NONE, KV_RULE_SGLANG, KV_RULE_VLLM = 0.0, 1.0, 2.0
KV_RULES = {None: KV_RULE_NONE, "sglang": KV_RULE_SGLANG, "vllm": KV_RULE_VLLM}
#: vLLM's default share of GPU memory for weights, activations and KV cache (EngineArgs.gpu_memory_utilization)
VLLM_GPU_MEMORY_UTILIZATION = 0.9

# SGLang v0.5.6 ServerArgs._handle_gpu_memory_settings (python/sglang/srt/server_args.py L701-862 at the fork
# tails-mpt/sglang 63291f7f51, upstream v0.5.6 plus patches; models/notes/kv_cache_capacity.md): by GPU memory (MiB,
# upper bounds) the chunked-prefill size and the largest captured graph batch (below TP 4, at TP 4 and above)
_SGLANG_TIERS_MIB = np.array([20 * 1024, 35 * 1024, 60 * 1024, 90 * 1024, 160 * 1024, np.inf])
_SGLANG_CHUNK = np.array([2048.0, 2048.0, 4096.0, 8192.0, 8192.0, 16384.0])
_SGLANG_GRAPH_BS_SMALL_TP = np.array([8.0, 24.0, 32.0, 256.0, 256.0, 512.0])
_SGLANG_GRAPH_BS_LARGE_TP = np.array([8.0, 80.0, 160.0, 512.0, 512.0, 512.0])


def sglang_mem_fraction_static(device_bytes, tp, speculative: bool):
    """SGLang's default ``mem_fraction_static`` (v0.5.6): (GPU memory - reserved) / GPU memory, reserved (MiB) =
    512 + 1.5 x max(chunked prefill, 2048) + 2 x the largest captured graph batch + 1024 x TP / 8, at least 10 GiB on
    GPUs of more than 60 GiB, plus 2 GiB for an EAGLE draft and its graphs; rounded to 3 decimals as SGLang does."""
    mib = np.asarray(device_bytes, dtype=float) / MIB
    tier = np.searchsorted(_SGLANG_TIERS_MIB, mib, side="right").clip(0, len(_SGLANG_TIERS_MIB) - 1)
    graph_bs = np.where(np.asarray(tp, dtype=float) < 4, _SGLANG_GRAPH_BS_SMALL_TP[tier], _SGLANG_GRAPH_BS_LARGE_TP[tier])
    reserved = 512.0 + 1.5 * np.maximum(_SGLANG_CHUNK[tier], 2048.0) + 2.0 * graph_bs + 1024.0 * np.asarray(tp, float) / 8
    reserved = np.where(mib > 60 * 1024, np.maximum(reserved, 10 * 1024.0), reserved) + (2048.0 if speculative else 0.0)
    out = np.round((mib - reserved) / mib, 3)
    return float(out) if np.ndim(out) == 0 else out


def kv_token_bytes(p, *, draft: bool = False):
    """KV-cache bytes one token takes on one TP rank across the target's layers (MLA: the latent when the engine
    absorbs, else every head's K and V); ``draft``: across the EAGLE head's layers instead."""
    tp, by = p["tp"], p["bytes_kv"]
    if draft:
        return 2 * np.maximum(p["draft_kv_heads"] / tp, 1.0) * p["draft_head_dim"] * by * p["draft_layers"]
    if _scalars(p["is_mla"]) and not p["is_mla"]:
        return 2 * np.maximum(p["num_kv_heads"] / tp, 1.0) * p["head_dim"] * by * p["num_layers"]
    latent = (p["kv_lora_rank"] + p["qk_rope_head_dim"]) * by
    per_head = p["num_heads"] / tp * (p["qk_nope_head_dim"] + p["qk_rope_head_dim"] + p["v_head_dim"]) * by
    gqa = 2 * np.maximum(p["num_kv_heads"] / tp, 1.0) * p["head_dim"] * by
    mla = np.where(p["mla_absorbed"] > 0, latent, per_head)
    per_layer = np.where(p["is_mla"] > 0, mla, gqa)
    out = per_layer * p["num_layers"]
    return float(out) if np.ndim(out) == 0 else out


def draft_weight_bytes(p):
    """Weight bytes of the EAGLE head on one rank: its decoder layers (attention over the fused input for EAGLE-3),
    the fc that fuses the target's hidden states, and its own lm_head where it has one (a head that shares the
    target's lm_head adds none; its embedding is the target's)."""
    tp, h, hd = p["tp"], p["draft_hidden"], p["draft_head_dim"]
    att = h * (p["draft_heads"] + 2 * p["draft_kv_heads"]) * hd * (1 + p["draft_fuse"]) / tp + p["draft_heads"] * hd * h / tp
    mlp = 3 * h * p["draft_intermediate"] / tp
    fc = (2 + p["draft_fuse"]) * h * h  # EAGLE: [embedding, hidden] -> hidden; EAGLE-3: three hidden states
    head = np.where(p["draft_vocab"] < p["vocab"], p["draft_vocab"] * h / tp, 0.0)
    out = (p["draft_layers"] * (att + mlp) + fc + head) * p["bytes_draft"]
    return float(out) if np.ndim(out) == 0 else out


def kv_pool_bytes(p, weights, *, speculative: bool):
    """KV-cache bytes the engine's pool holds on one rank (at most 0): SGLang's (the free memory before loading,
    less the CUDA context, times mem_fraction_static, less the weights) or vLLM's (gpu_memory_utilization of the
    memory less the weights, the draft's and the profile run's peak). ``weights``: the target's bytes per rank."""
    mem = p["device_memory_bytes"]
    frac = p["kv_memory_fraction"]
    rule = p["kv_memory_rule"]
    reserve = p["kv_reserve_bytes"] + p["kv_reserve_fraction"] * mem
    sglang_frac = np.where(frac > 0, frac, sglang_mem_fraction_static(mem, p["tp"], speculative))
    sglang = (mem - reserve) * sglang_frac - weights
    vllm_frac = np.where(frac > 0, frac, VLLM_GPU_MEMORY_UTILIZATION)
    vllm = vllm_frac * mem - weights - reserve - (draft_weight_bytes(p) if speculative else 0.0)
    out = np.maximum(np.where(rule == KV_RULE_VLLM, vllm, sglang), 0.0)
    return float(out) if np.ndim(out) == 0 else out


def kv_pool_tokens(p, weights, *, speculative: bool):
    """Tokens of KV cache the pool holds (the launch's own figure where given: ``kv_pool_tokens`` in the parameters,
    from SGLang's ``max_total_num_tokens`` or vLLM's ``GPU KV cache size`` log line). vLLM's draft layers share the
    pool, so a token costs the target's and the draft's KV bytes; SGLang's draft pool is sized apart, beside it."""
    given = p["kv_pool_tokens"]
    per_token = kv_token_bytes(p)
    if speculative:
        per_token = per_token + np.where(p["kv_memory_rule"] == KV_RULE_VLLM, kv_token_bytes(p, draft=True), 0.0)
    modeled = np.floor(kv_pool_bytes(p, weights, speculative=speculative) / per_token)
    out = np.where(given > 0, given, modeled)
    return float(out) if np.ndim(out) == 0 else out


def kv_requests_held(p, weights, *, speculative: bool, no_limit: float):
    """Requests whose KV cache fits the pool at once: tokens held / (context + the tokens a step adds: the verify's
    draft tokens with speculation, one without), at least 1 (one that does not fit still runs, in the model, and
    predict warns); ``no_limit`` where the engine keeps no model of its pool (kv_memory_rule 0)."""
    width = p["num_draft_tokens"] if speculative else 1.0
    if _scalars(p["device_memory_bytes"], p["tp"], p["ctx"], width, weights, p["kv_memory_rule"]):
        return _held_scalar(p, float(weights), speculative, float(width), no_limit)
    held = np.maximum(np.floor(kv_pool_tokens(p, weights, speculative=speculative) / (p["ctx"] + width)), 1.0)
    out = np.where((p["kv_memory_rule"] == KV_RULE_NONE) & (p["kv_pool_tokens"] <= 0), no_limit, held)
    return float(out) if np.ndim(out) == 0 else out


def _held_scalar(p, weights: float, speculative: bool, width: float, no_limit: float) -> float:
    """:func:`kv_requests_held` for one scenario in float arithmetic (the per-call path of predict): the same rules."""
    rule, given = float(p["kv_memory_rule"]), float(p["kv_pool_tokens"])
    if rule == KV_RULE_NONE and given <= 0:
        return no_limit
    if given > 0:
        tokens = given
    else:
        mem, frac = float(p["device_memory_bytes"]), float(p["kv_memory_fraction"])
        reserve = float(p["kv_reserve_bytes"]) + float(p["kv_reserve_fraction"]) * mem
        per_token = float(kv_token_bytes(p))
        if rule == KV_RULE_VLLM:
            pool = (frac if frac > 0 else VLLM_GPU_MEMORY_UTILIZATION) * mem - weights - reserve
            if speculative:
                pool -= float(draft_weight_bytes(p))
                per_token += float(kv_token_bytes(p, draft=True))
        else:
            f = frac if frac > 0 else float(sglang_mem_fraction_static(mem, float(p["tp"]), speculative))
            pool = (mem - reserve) * f - weights
        tokens = math.floor(max(pool, 0.0) / per_token)
    return float(max(math.floor(tokens / (float(p["ctx"]) + width)), 1.0))
