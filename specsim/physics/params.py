"""Flatten a validated Scenario into named numeric parameters (floats or numpy arrays).

The cost model is written on this flat namespace so that one call can evaluate one scenario
or a million: a sweep replaces any entry by an array and numpy broadcasting does the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .memory import KV_RULES
from .moe import routing_skew_of
from .rules import DTYPE_BYTES, MAX_ALLREDUCE_CHAIN

if TYPE_CHECKING:
    from .schema import Scenario

Params = dict  # name -> float | np.ndarray

NO_RUNNING_CAP = 1e9  # requests: the value of a running-requests cap that never binds
NO_MESSAGE_LIMIT = 1e30  # bytes: the size limit of an all-reduce that takes any message


def block_scaled(dtypes, block_scales: bool) -> bool:
    """Routed experts of one-byte weights (fp8; int8 assumed alike) with block-wise scales: their fused-MoE tiles load
    and apply scales in the K loop, and take the GPU's ``_fp8`` per-CTA numbers."""
    return dtypes.routed_experts in ("fp8", "int8") and bool(block_scales)


#: kernel costs a GPU preset measured that an engine takes unless it sets its own (None in the engine)
GPU_MEASURED_ENGINE_FIELDS = ("graph_node_us", "attention_mem_efficiency", "attention_unsplit_efficiency",
                              "moe_mem_efficiency", "moe_wide_tile_mem_efficiency")


def gpu_params(g, dtypes, draft_dtype: str, block_scales: bool = True, engine=None) -> Params:
    """The accelerator's numbers the cost model reads (one place: scenarios and sweep GPU axes); with ``engine``,
    its own values of the GPU-measured kernel costs (``GPU_MEASURED_ENGINE_FIELDS``) where it sets them."""
    own = {} if engine is None else {k: getattr(engine, k) for k in GPU_MEASURED_ENGINE_FIELDS}
    return {
        **{k: own[k] if own.get(k) is not None else getattr(g, k) for k in GPU_MEASURED_ENGINE_FIELDS},
        "hbm_bytes_per_s": g.hbm_bytes_per_s,
        "device_memory_bytes": g.device_memory_bytes or g.memory_bytes,
        "mem_efficiency": g.mem_efficiency,
        "flop_efficiency": g.flop_efficiency,
        "kernel_floor_us": g.kernel_floor_us,
        "gemm_peak_efficiency": g.gemm_peak_efficiency,
        "gemm_stream_loss": g.gemm_stream_loss,
        "elementwise_mem_efficiency": g.elementwise_mem_efficiency,
        "attention_half_efficiency_heads": g.attention_half_efficiency_heads,
        "attention_fixed_us": g.attention_fixed_us,
        "vocab_topk_fixed_us": g.vocab_topk_fixed_us,
        "vocab_pass_bytes_per_s": (g.vocab_pass_bytes_per_s if g.vocab_pass_bytes_per_s is not None
                                   else g.hbm_bytes_per_s * g.elementwise_mem_efficiency),
        "vocab_topk_pass_factor": g.vocab_topk_pass_factor,
        "flops_attention": g.flops_for(dtypes.attention),
        "flops_dense": g.flops_for(dtypes.dense_mlp),
        "flops_shared": g.flops_for(dtypes.shared_experts),
        "flops_routed": g.flops_for(dtypes.routed_experts),
        "flops_head": g.flops_for(dtypes.lm_head),
        "flops_draft": g.flops_for(draft_dtype),
        "flops_bf16": g.peak_flops["bf16"],
        "sm_count": float(g.sm_count),
        "moe_cta_bytes_per_s": g.moe_cta_bytes_per_s_fp8 if block_scaled(dtypes, block_scales) else g.moe_cta_bytes_per_s,
        "moe_cta_exit_us": g.moe_cta_exit_us,
        "moe_cta_tile_us": g.moe_cta_tile_us_fp8 if block_scaled(dtypes, block_scales) else g.moe_cta_tile_us,
    }


def small_kernel_params(sc: Scenario) -> Params:
    """The small kernels each layer launches: the engine's defaults, with what its code for the target's
    architecture (``engine.model_kernels[target.architecture]``) launches beyond them."""
    from .record import default_record

    e, t = sc.engine, sc.target
    mk = e.model_kernels.get(t.architecture or "") or default_record("ModelKernels")
    shared = bool(t.moe and t.moe.num_shared_experts)
    # the engine runs one shared expert of the routed experts' width as one more routed expert (E + 1, top-k + 1)
    fusable = shared and t.moe.num_shared_experts == 1 and (t.moe.shared_intermediate or t.moe.expert_intermediate) \
        == t.moe.expert_intermediate
    fused_shared = fusable and (mk.shared_expert_fusion == "always"
                                or (mk.shared_expert_fusion == "256_experts" and t.moe.num_experts == 256))
    return {
        # the engine's own small-kernel floor, else (0: none of its own) the GPU's kernel_floor_us, read at cost time
        "small_kernel_floor_own": float(e.small_kernel_floor_us is not None),
        "small_kernel_floor_us": e.small_kernel_floor_us or 0.0,
        "norm_kernels": float(e.norm_kernels_per_layer),
        "residual_add_kernels": float(e.residual_add_kernels),
        "kv_store_kernels": float(e.kv_store_kernels if mk.kv_store is None else mk.kv_store),
        "kv_store_kernels_mla": float(1 if mk.kv_store is None else mk.kv_store),  # one latent-cache write (Triton)
        "attention_aux_kernels": float(e.attention_aux_kernels if mk.attention_aux is None else mk.attention_aux),
        "attention_copy_kernels": float(mk.attention_copies),
        "qk_norm_kernels": float(mk.qk_norm),
        "router_topk_kernels": float(e.router_topk_kernels if mk.router_topk is None else mk.router_topk),
        "router_topk_us": float(mk.router_topk_us or 0.0),  # 0: none measured
        "moe_align_kernels": float(e.moe_align_kernels),
        "moe_combine_kernels": float(e.moe_combine_kernels),
        "moe_norm_kernels": float(e.moe_norm_kernels),
        "moe_int4_glue_kernels": float(e.moe_int4_glue_kernels * (t.dtypes.routed_experts == "int4")),
        # an unfused shared expert: its activation and the add of its output (its GEMMs are operators of their own)
        "shared_glue_kernels": float(e.shared_glue_kernels) * float(shared and not fused_shared),
        "mla_misc_kernels": float(e.mla_misc_kernels),
        "shared_fused": float(fused_shared),
        "tree_mask_attention_slowdown": e.tree_mask_attention_slowdown,  # applied by the operators to tree verifies
        "tree_fa2_custom_mask": float(e.tree_attention_fa2_custom_mask),
        "tree_mask_flop_efficiency": e.tree_mask_attention_flop_efficiency,
        "tree_mask_us_per_tile_row": e.tree_mask_attention_us_per_tile_row,
        "act_quant_kernels": float(e.act_quant_kernels),
    }


def allreduce_path_params(graph_ar, eager_ar, tp) -> Params:
    """Every number of the graph and eager all-reduce paths at ``tp``: each path's own latency and bus bandwidth,
    and along its fallback chain (at most three implementations: one-shot -> two-shot -> NCCL) each link's size
    limit (bytes; NO_MESSAGE_LIMIT where nothing follows) and the next implementation's latency and bandwidth
    (repeated where the chain is shorter, so a message past no limit keeps the last implementation's numbers)."""
    out: Params = {
        "allreduce_alpha_graph_us": graph_ar.alpha_at(tp), "allreduce_alpha_eager_us": eager_ar.alpha_at(tp),
        "allreduce_bus_bytes_per_s": graph_ar.bus_at(tp), "allreduce_eager_bus_bytes_per_s": eager_ar.bus_at(tp),
    }
    for path, ar in (("graph", graph_ar), ("eager", eager_ar)):
        chain = [ar]
        while chain[-1].fallback is not None and chain[-1].max_bytes_at(tp) is not None and len(chain) < MAX_ALLREDUCE_CHAIN:
            chain.append(chain[-1].fallback)
        limits = [float(a.max_bytes_at(tp)) for a in chain[:-1]]  # message > limits[i]: chain[i + 1] takes it
        limits += [NO_MESSAGE_LIMIT] * (MAX_ALLREDUCE_CHAIN - 1 - len(limits))
        chain += [chain[-1]] * (MAX_ALLREDUCE_CHAIN - len(chain))
        out[f"allreduce_max_bytes_{path}"] = limits[0]
        out[f"allreduce_fallback_alpha_{path}_us"] = chain[1].alpha_at(tp)
        out[f"allreduce_fallback_bus_{path}_bytes_per_s"] = chain[1].bus_at(tp)
        out[f"allreduce_fallback_max_bytes_{path}"] = limits[1]
        out[f"allreduce_fallback2_alpha_{path}_us"] = chain[2].alpha_at(tp)
        out[f"allreduce_fallback2_bus_{path}_bytes_per_s"] = chain[2].bus_at(tp)
    return out


def scenario_params(sc: Scenario) -> Params:
    """All numbers the cost, cycle and acceptance models read, with units in the names."""
    g, par, t, d, e, s, w = sc.gpu, sc.parallel, sc.target, sc.draft, sc.engine, sc.speculation, sc.workload
    a, dt = t.attention, t.dtypes
    ar_eager = par.allreduce_eager or par.allreduce
    p: Params = {
        **gpu_params(g, dt, d.dtype, e.moe_fp8_block_scales, e),
        # parallelism and collectives
        "tp": float(par.tp),
        # each path's all-reduce, and the implementations messages past its size limits take (custom one-shot ->
        # two-shot -> NCCL above 8 MiB)
        **allreduce_path_params(par.allreduce, ar_eager, par.tp),
        "allreduce_scale": par.allreduce_scale,
        "allreduces_per_layer": float(par.allreduces_per_layer),
        # target architecture
        "num_layers": float(t.num_layers),
        "num_moe_layers": float(t.num_layers - t.num_dense_layers) if t.moe else 0.0,
        "hidden": float(t.hidden),
        "intermediate": float(t.intermediate),
        "vocab": float(t.vocab),
        "is_mla": float(a.kind == "mla"),
        "num_heads": float(a.num_heads),
        "num_kv_heads": float(a.num_kv_heads),
        "head_dim": float(a.head_dim),
        "q_lora_rank": float(a.q_lora_rank or 0),
        "kv_lora_rank": float(a.kv_lora_rank),
        "qk_nope_head_dim": float(a.qk_nope_head_dim),
        "qk_rope_head_dim": float(a.qk_rope_head_dim),
        "v_head_dim": float(a.v_head_dim),
        "num_experts": float(t.moe.num_experts) if t.moe else 1.0,
        "experts_per_token": float(t.moe.experts_per_token) if t.moe else 1.0,
        "expert_intermediate": float(t.moe.expert_intermediate) if t.moe else 0.0,
        "num_shared_experts": float(t.moe.num_shared_experts) if t.moe else 0.0,
        "shared_intermediate": float((t.moe.shared_intermediate or t.moe.expert_intermediate) if t.moe else 0.0),
        "routing_locality": float(t.moe.routing_locality) if t.moe else 1.0,
        "routing_skew": routing_skew_of(t.moe) if t.moe else 0.0,
        "bytes_attention": DTYPE_BYTES[dt.attention],
        "bytes_dense": DTYPE_BYTES[dt.dense_mlp],
        "bytes_shared": DTYPE_BYTES[dt.shared_experts],
        "bytes_routed": DTYPE_BYTES[dt.routed_experts],
        "bytes_embedding": DTYPE_BYTES[dt.embedding],
        "bytes_head": DTYPE_BYTES[dt.lm_head],
        "bytes_kv": DTYPE_BYTES[dt.kv_cache],
        # draft (EAGLE-3 head)
        "draft_layers": float(d.num_layers),
        "draft_hidden": float(d.hidden),
        "draft_intermediate": float(d.intermediate),
        "draft_heads": float(d.num_heads),
        "draft_kv_heads": float(d.num_kv_heads),
        "draft_head_dim": float(d.head_dim),
        "draft_vocab": float(t.vocab if d.lm_head == "target" else d.draft_vocab),
        "draft_fuse": float(d.fuse_hidden_states),
        "bytes_draft": DTYPE_BYTES[d.dtype],
        "draft_kernels_per_layer": float(d.kernels_per_layer or (2 + 1 + 4 + 2 + 2 + par.allreduces_per_layer)),
        # engine
        "graph_decode": float(e.graph_decode),
        "graph_verify": float(e.graph_verify),
        "graph_draft": float(e.graph_draft),
        "graph_draft_extend": float(e.graph_draft_extend),
        "graph_fixed_us": e.graph_fixed_us,
        "eager_launch_us": e.eager_launch_us,
        "eager_dispatch_us": e.eager_dispatch_us,
        "multi_token_kernels_per_layer": float(e.multi_token_kernels_per_layer),
        "multi_token_extra_us_per_layer": e.multi_token_extra_us_per_layer,
        "sample_kernels": float(e.sample_kernels),
        "decode_sample_kernels": float(e.decode_sample_kernels),
        "draft_preprocess_kernels": float(e.draft_preprocess_kernels),
        "host_syncs_per_cycle": float(e.host_syncs_per_cycle),
        "host_sync_us": e.host_sync_us,
        "host_per_cycle_ms": e.host_per_cycle_ms,
        "host_per_token_us": e.host_per_token_us,
        "host_per_request_us": e.host_per_request_us,
        "host_per_request_decode_us": e.host_per_request_decode_us,
        "host_per_decode_step_ms": e.host_per_decode_step_ms,
        "stop_check_us": e.stop_check_us * float(w.stop_strings),  # zero unless the requests carry stop strings
        "tree_plan_us": e.tree_plan_us,
        "tree_verify_plan_extra_us": e.tree_verify_plan_extra_us,
        "tree_plan_us_per_request": e.tree_plan_us_per_request,
        "verify_batch_expansion": float(e.verify_batch_expansion),
        "host_expansion_us_per_row_token": e.host_expansion_us_per_row_token,
        "tree_host_syncs_per_cycle": float(e.tree_host_syncs_per_cycle),
        "overlap_scheduler": float(e.overlap_scheduler),
        "overlap_scheduler_baseline": float(e.overlap_scheduler_baseline),
        "continuous_decode_steps": float(e.continuous_decode_steps),
        "moe_per_token_kernel": float(e.moe_kernel == "per_token"),
        # the Triton fused-MoE tiles and CTA grid: measured for bf16 and fp8 experts (W4A16 kernels keep the share alone)
        "moe_triton_tiles": float(e.moe_tiles != "none" and e.moe_kernel == "fused"
                                  and dt.routed_experts in ("bf16", "fp16", "fp8", "int8")),
        "moe_grid_clamp": float(e.moe_tiles == "vllm-triton"),
        "moe_tuned_config": float(e.moe_config == "tuned"),
        "moe_fp8_tiles": float(dt.routed_experts == "fp8"),
        "moe_block_scaled": float(block_scaled(dt, e.moe_fp8_block_scales)),  # its CTAs take the _fp8 numbers
        "per_token_traffic_factor": e.per_token_traffic_factor,
        "small_kernel_factor": e.small_kernel_factor,
        **small_kernel_params(sc),
        "fused_projections": float(e.fused_projections),
        "mla_absorbed": float(e.mla_absorbed),
        "attention_flop_efficiency": e.attention_flop_efficiency,
        "attention_unpacked_decode": float(e.attention_kv_reads == "per_q_head"),
        "attention_unpacked_multi_token": float(e.attention_kv_reads != "per_kv_head"),
        "static_cache_headroom_tokens": float(e.static_cache_headroom_tokens),
        "attention_unsplit_items": e.attention_unsplit_items,
        # requests running at once (the rest queue): the plain decode's cap, and speculation's (the launch's own cap,
        # else the engine's speculative default)
        "running_cap": float(e.running_cap(False) or NO_RUNNING_CAP),
        "spec_running_cap": float(e.running_cap(True) or NO_RUNNING_CAP),
        # the KV-cache pool the engine sizes at start-up, which bounds the requests it runs at once (physics.memory)
        "kv_memory_rule": KV_RULES[e.kv_memory_rule],
        "kv_memory_fraction": float(e.kv_memory_fraction or 0.0),
        "kv_reserve_bytes": float(e.kv_reserve_bytes),
        "kv_reserve_fraction": float(e.kv_reserve_fraction),
        "kv_pool_tokens": float(e.kv_pool_tokens or 0),
        "capture_batch_sizes": np.array(sorted(e.capture_batch_sizes) or [0], dtype=float),
        "capture_token_sizes": np.array(sorted(e.capture_token_sizes or []), dtype=float),
        # speculation and workload
        "steps": float(s.steps),
        "topk": float(s.topk),
        "num_draft_tokens": float(s.num_draft_tokens),
        "batch": float(w.batch),
        "ctx": float(w.ctx),
    }
    return p
