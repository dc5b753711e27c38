"""Forward-pass cost per tensor-parallel rank, from the operators of each layer.

Every GPU operator costs ``max(bytes / (HBM_BW x eff), flops / (peak x eff)) + kernel floor``;
launch cost is added per kernel (graph replay: fixed + per node; eager: host launch per kernel,
hidden behind kernels that run longer than it takes to launch them). All-reduces follow the
alpha-beta model of :mod:`specsim.collectives`. Inputs broadcast: any parameter may be an array.

Components reported (ms): ``launch``, ``kernel_fixed``, ``allreduce``, ``weights``,
``attention``, ``compute``.
"""

from __future__ import annotations

import numpy as np

from .collectives import allgather_us, allreduce_us
from .moe import experts_read
from .params import Params

COMPONENTS = ("launch", "kernel_fixed", "allreduce", "weights", "attention", "compute")
ACT_BYTES = 2.0  # bf16 activations on the wire
LOGIT_BYTES = 4.0  # fp32 logits gathered across vocab shards


def _is_zero(x) -> bool:
    """A count that is a scalar zero: the operator does not exist in this architecture/engine."""
    return np.ndim(x) == 0 and float(x) == 0.0


class _Acc:
    """Accumulates operator times (µs) into components, for graph or eager launch."""

    def __init__(self, p: Params, graph):
        self.p = p
        self.graph = np.asarray(graph, dtype=float)
        # scalar graph flags take a cheaper path (no per-kernel max for graph replays)
        self.all_graph = self.graph.ndim == 0 and float(self.graph) == 1.0
        self.t = {c: 0.0 for c in COMPONENTS}
        self.kernels = 0.0

    def _launch(self, gpu_us, count):
        # graph: a fixed gap per node; eager: the host launch shows only where it outlasts the kernel
        if self.all_graph:
            return count * self.p["graph_node_us"]
        eager_excess = np.maximum(self.p["eager_launch_us"] - gpu_us, 0.0)
        return count * (self.graph * self.p["graph_node_us"] + (1 - self.graph) * eager_excess)

    def op(self, count, bytes_, flops, bw_eff, flop_rate, mem_component="weights"):
        """count x one operator reading bytes_ and doing flops (per kernel)."""
        if _is_zero(count):
            return
        p = self.p
        mem_us = np.asarray(bytes_, dtype=float) * (1e6 / (p["hbm_bytes_per_s"] * bw_eff))
        cmp_us = np.asarray(flops, dtype=float) * (1e6 / (flop_rate * p["flop_efficiency"]))
        busy = np.maximum(mem_us, cmp_us)
        compute = np.where(mem_us >= cmp_us, 0.0, busy)
        self.t[mem_component] = self.t[mem_component] + count * (busy - compute)
        self.t["compute"] = self.t["compute"] + count * compute
        floor = p["kernel_floor_us"]
        self.t["kernel_fixed"] = self.t["kernel_fixed"] + count * floor
        self.t["launch"] = self.t["launch"] + self._launch(busy + floor, count)
        self.kernels = self.kernels + count

    def small(self, count):
        """count tiny kernels (norms, rope, activations, copies): floor time each.

        Unfused eager frameworks run each elementwise op as its own kernel: ``small_kernel_factor``.
        """
        if _is_zero(count):
            return
        count = count * self.p.get("small_kernel_factor", 1.0)
        floor = self.p["kernel_floor_us"]
        self.t["kernel_fixed"] = self.t["kernel_fixed"] + count * floor
        self.t["launch"] = self.t["launch"] + self._launch(floor, count)
        self.kernels = self.kernels + count

    def collective(self, count, us):
        if _is_zero(count):
            return
        self.t["allreduce"] = self.t["allreduce"] + count * us
        self.t["launch"] = self.t["launch"] + self._launch(us, count)
        self.kernels = self.kernels + count

    def finish(self) -> dict:
        self.t["launch"] = self.t["launch"] + self.graph * self.p["graph_fixed_us"]
        out = {c: np.asarray(v, dtype=float) / 1e3 for c, v in self.t.items()}  # µs -> ms
        out["total"] = sum(out[c] for c in COMPONENTS)
        out["kernels"] = np.asarray(self.kernels, dtype=float)
        return out


def _allreduce_params(p: Params, graph):
    g = np.asarray(graph, dtype=float)
    alpha = (g * p["allreduce_alpha_graph_us"] + (1 - g) * p["allreduce_alpha_eager_us"]) * p["allreduce_scale"]
    bw = g * p["allreduce_bus_bytes_per_s"] + (1 - g) * p["allreduce_eager_bus_bytes_per_s"]
    return alpha, bw


def target_forward_ms(p: Params, tokens_per_request, batch=None, ctx=None, graph=None, multi_token=None,
                      routed_tokens=None) -> dict:
    """Target forward over batch x tokens_per_request new tokens on one TP rank, by component (ms).

    ``multi_token`` selects the verify/extend kernels (extra kernels per layer, logits for every
    row); by default it is on for tokens_per_request > 1, the 1-token decode path otherwise.
    ``routed_tokens`` (default: all of them) are the tokens that pick distinct experts: padding
    rows of a graph replay run the dense GEMMs but route to the same few experts.
    """
    w = np.asarray(tokens_per_request, dtype=float)
    b = np.asarray(p["batch"] if batch is None else batch, dtype=float)
    c = np.asarray(p["ctx"] if ctx is None else ctx, dtype=float)
    graph = p["graph_verify"] if graph is None else graph
    multi = (w > 1) if multi_token is None else np.asarray(multi_token, dtype=bool)
    n = b * w
    tp = p["tp"]
    h = p["hidden"]
    acc = _Acc(p, graph)
    bw_w = p["mem_efficiency"]
    L, Lm = p["num_layers"], p["num_moe_layers"]
    Ld = L - Lm
    ba = p["bytes_attention"]
    mla = p["is_mla"]
    heads_r = p["num_heads"] / tp
    kv_r = np.maximum(p["num_kv_heads"] / tp, 1.0)
    ctx_eff = c + w  # keys attended by the new tokens

    # --- attention, GQA (weights sharded by heads; KV heads replicate when tp > num_kv_heads)
    gqa = 1 - mla
    d = p["head_dim"]
    qkv_el = h * (heads_r + 2 * kv_r) * d
    o_el = heads_r * d * h
    fused = p.get("fused_projections", 1.0)  # 1: one qkv and one gate_up GEMM; 0: q, k, v / gate, up apart
    q_el, k_el = h * heads_r * d, h * kv_r * d
    acc.op(gqa * L * fused, qkv_el * ba, 2 * n * qkv_el, bw_w, p["flops_attention"])
    acc.op(gqa * L * (1 - fused), q_el * ba, 2 * n * q_el, bw_w, p["flops_attention"])
    acc.op(gqa * L * (1 - fused) * 2, k_el * ba, 2 * n * k_el, bw_w, p["flops_attention"])
    acc.op(gqa * L, o_el * ba, 2 * n * o_el, bw_w, p["flops_attention"])
    acc.op(gqa * L, b * ctx_eff * 2 * kv_r * d * p["bytes_kv"], 4 * n * ctx_eff * heads_r * d,
           p["attention_mem_efficiency"], p["flops_bf16"], "attention")
    acc.small(gqa * L * 4)

    # --- attention, MLA (low-rank down-projections replicated, head-wise up-projections sharded)
    ql, kvl = p["q_lora_rank"], p["kv_lora_rank"]
    qk = p["qk_nope_head_dim"] + p["qk_rope_head_dim"]
    has_ql = (ql > 0).astype(float) if isinstance(ql, np.ndarray) else float(ql > 0)
    qa_el = has_ql * h * ql
    qb_el = has_ql * ql * heads_r * qk + (1 - has_ql) * h * heads_r * qk
    kva_el = h * (kvl + p["qk_rope_head_dim"])
    kvb_half = kvl * heads_r * p["qk_nope_head_dim"]  # absorbed W_UK (and W_UV below) as bmm
    kvb_v = kvl * heads_r * p["v_head_dim"]
    mo_el = heads_r * p["v_head_dim"] * h
    for el in (qa_el, qb_el, kva_el, kvb_half, kvb_v, mo_el):
        acc.op(mla * L, el * ba, 2 * n * el, bw_w, p["flops_attention"])
    latent = kvl + p["qk_rope_head_dim"]
    absorbed = p.get("mla_absorbed", 1.0)  # 1: attention over the latent cache; 0: over per-head K/V
    per_head = heads_r * (qk + p["v_head_dim"])
    acc.op(mla * L * absorbed, b * ctx_eff * latent * p["bytes_kv"], 2 * n * ctx_eff * heads_r * (latent + kvl),
           p["attention_mem_efficiency"], p["flops_bf16"], "attention")
    acc.op(mla * L * (1 - absorbed), b * ctx_eff * per_head * p["bytes_kv"], 2 * n * ctx_eff * per_head,
           p["attention_mem_efficiency"], p["flops_bf16"], "attention")
    acc.small(mla * L * 8)

    # --- dense MLP layers (gate_up fused, down)
    inter = p["intermediate"] / tp
    acc.op(Ld * fused, 2 * h * inter * p["bytes_dense"], 4 * n * h * inter, bw_w, p["flops_dense"])
    acc.op(Ld * (1 - fused) * 2, h * inter * p["bytes_dense"], 2 * n * h * inter, bw_w, p["flops_dense"])
    acc.op(Ld, h * inter * p["bytes_dense"], 2 * n * h * inter, bw_w, p["flops_dense"])
    acc.small(Ld * 2)

    # --- MoE layers: router, shared experts, routed experts (fused: distinct experts; gathered: n*k)
    E, k = p["num_experts"], p["experts_per_token"]
    acc.op(Lm, h * E * 2.0, 2 * n * h * E, bw_w, p["flops_bf16"])
    sh = p["num_shared_experts"] * p["shared_intermediate"] / tp
    acc.op(Lm, 2 * h * sh * p["bytes_shared"], 4 * n * h * sh, bw_w, p["flops_shared"])
    acc.op(Lm, h * sh * p["bytes_shared"], 2 * n * h * sh, bw_w, p["flops_shared"])
    ei = p["expert_intermediate"] / tp
    reads = experts_read(E, k, n if routed_tokens is None else routed_tokens, p["moe_per_token_kernel"])
    # a gathered kernel that materialises per-token weight copies (HF batched_mm) moves them 3 times
    reads = reads * np.where(np.asarray(p["moe_per_token_kernel"]) > 0, p.get("per_token_traffic_factor", 1.0), 1.0)
    acc.op(Lm, reads * 2 * h * ei * p["bytes_routed"], 4 * n * k * h * ei, p["moe_mem_efficiency"], p["flops_routed"])
    acc.op(Lm, reads * h * ei * p["bytes_routed"], 2 * n * k * h * ei, p["moe_mem_efficiency"], p["flops_routed"])
    acc.small(Lm * 9)

    # --- the multi-token (verify / extend) path launches extra kernels per layer
    acc.small(np.where(multi, p["multi_token_kernels_per_layer"], 0.0) * L)
    extra = p.get("multi_token_extra_us_per_layer", 0.0)
    if not _is_zero(extra):
        acc.t["kernel_fixed"] = acc.t["kernel_fixed"] + np.where(multi, extra, 0.0) * L

    # --- collectives: per-layer all-reduces, embedding all-reduce, logits all-gather
    alpha, bw = _allreduce_params(p, graph)
    acc.collective(L * p["allreduces_per_layer"] + 1, allreduce_us(n * h * ACT_BYTES, tp, alpha, bw))
    rows = np.where(multi, n, b)  # decode computes logits for the last token only
    acc.collective(1.0, allgather_us(rows * p["vocab"] * LOGIT_BYTES, tp, alpha, bw))

    # --- embedding lookup, final norm, lm_head (vocab-parallel)
    vr = p["vocab"] / tp
    acc.small(2)
    acc.op(1.0, h * vr * p["bytes_head"], 2 * rows * h * vr, bw_w, p["flops_head"])
    return acc.finish()


def draft_forward_ms(p: Params, tokens_per_request, batch=None, ctx=None, graph=None, fuse=False) -> dict:
    """One EAGLE-3 head forward on one TP rank (ms by component).

    The head is one Llama-style decoder layer whose attention input is [embedding; hidden]
    (2 x hidden wide); ``fuse`` adds the fc that fuses 3 target hidden states (draft-extend).
    """
    w = np.asarray(tokens_per_request, dtype=float)
    b = np.asarray(p["batch"] if batch is None else batch, dtype=float)
    c = np.asarray(p["ctx"] if ctx is None else ctx, dtype=float)
    graph = p["graph_draft"] if graph is None else graph
    n = b * w
    tp = p["tp"]
    h = p["draft_hidden"]
    by = p["bytes_draft"]
    acc = _Acc(p, graph)
    bw_w = p["mem_efficiency"]
    L = p["draft_layers"]
    heads_r = p["draft_heads"] / tp
    kv_r = np.maximum(p["draft_kv_heads"] / tp, 1.0)
    d = p["draft_head_dim"]
    ctx_eff = c + w
    f = np.asarray(fuse, dtype=float)
    fc_el = p["draft_fuse"] * p["hidden"] * h  # replicated nn.Linear
    acc.op(f, fc_el * by, 2 * n * fc_el, bw_w, p["flops_draft"])
    qkv_el = 2 * h * (heads_r + 2 * kv_r) * d
    o_el = heads_r * d * h
    acc.op(L, qkv_el * by, 2 * n * qkv_el, bw_w, p["flops_draft"])
    acc.op(L, o_el * by, 2 * n * o_el, bw_w, p["flops_draft"])
    acc.op(L, b * ctx_eff * 2 * kv_r * d * p["bytes_kv"], 4 * n * ctx_eff * heads_r * d,
           p["attention_mem_efficiency"], p["flops_bf16"], "attention")
    inter = p["draft_intermediate"] / tp
    acc.op(L, 2 * h * inter * by, 4 * n * h * inter, bw_w, p["flops_draft"])
    acc.op(L, h * inter * by, 2 * n * h * inter, bw_w, p["flops_draft"])
    nsmall = np.maximum(p["draft_kernels_per_layer"] - 6 - p["allreduces_per_layer"], 0.0)
    acc.small(L * nsmall + 2)
    alpha, bw = _allreduce_params(p, graph)
    acc.collective(L * p["allreduces_per_layer"] + 1, allreduce_us(n * h * ACT_BYTES, tp, alpha, bw))
    vr = p["draft_vocab"] / tp
    acc.op(1.0, h * vr * by, 2 * n * h * vr, bw_w, p["flops_draft"])
    acc.collective(1.0, allgather_us(n * p["draft_vocab"] * LOGIT_BYTES, tp, alpha, bw))
    return acc.finish()


def weight_bytes_per_rank(p: Params) -> float:
    """Target weight bytes resident per rank (all experts), for memory-fit checks and display."""
    tp, h, L, Lm = p["tp"], p["hidden"], p["num_layers"], p["num_moe_layers"]
    total = 2 * p["vocab"] * h / tp * p["bytes_head"]
    if p["is_mla"]:
        hr = p["num_heads"] / tp
        qk = p["qk_nope_head_dim"] + p["qk_rope_head_dim"]
        ql, kvl = p["q_lora_rank"], p["kv_lora_rank"]
        att = h * ql + ql * hr * qk + h * (kvl + p["qk_rope_head_dim"]) + kvl * hr * (p["qk_nope_head_dim"] + p["v_head_dim"]) + hr * p["v_head_dim"] * h
    else:
        hr = p["num_heads"] / tp
        att = (h * (hr + 2 * max(p["num_kv_heads"] / tp, 1.0)) + hr * h) * p["head_dim"]
    total += L * att * p["bytes_attention"]
    total += (L - Lm) * 3 * h * p["intermediate"] / tp * p["bytes_dense"]
    total += Lm * 3 * h * p["expert_intermediate"] / tp * p["num_experts"] * p["bytes_routed"]
    total += Lm * 3 * h * p["num_shared_experts"] * p["shared_intermediate"] / tp * p["bytes_shared"]
    return float(total)
