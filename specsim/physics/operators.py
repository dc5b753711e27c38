"""The operators of one forward, as data: every kernel the target or the draft head launches.

Each :class:`Op` names one kernel kind of the forward with its count per forward, the bytes it
moves (weights or KV cache, plus activations), its FLOPs, its GEMM shape and its kernel family;
:mod:`specsim.physics.cost` turns the list into time. Kernel counts, breakdown tables
(``specsim verify --breakdown``) and the cost all come from these lists, so nothing is
counted by hand twice. Shapes are per tensor-parallel rank; any number may be a numpy array.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from .collectives import allgather_us, allreduce_us
from .moe import expected_distinct_experts, experts_read, fused_moe_grid, fused_moe_tiles
from .numeric import maximum as _maximum
from .numeric import ndim as _ndim
from .numeric import num as _num
from .numeric import where as _where
from .params import Params

ACT_BYTES = 2.0  # bf16 activations
LOGIT_BYTES = 4.0  # fp32 logits
DECODE_QUERY_TILE = 16  # query rows per KV head a decode kernel pads to (tensor-core GQA decode)
EXTEND_QUERY_TILE = 64  # query rows per KV head an extend/verify kernel pads to (FlashAttention/FlashInfer tile)


@dataclass(slots=True)
class Op:
    """One kernel kind of a forward (per-kernel numbers; ``count`` kernels per forward)."""

    name: str
    family: str  # gemm | grouped_gemm | attention | elementwise | collective | fixed
    phase: str  # attention | mlp | moe | head | comm | misc
    count: object = 1.0
    bytes: object = 0.0  # weights or KV bytes per kernel
    act_bytes: object = 0.0  # activation bytes read + written per kernel
    flops: object = 0.0
    m: object = 1.0  # GEMM rows (tokens)
    n_cols: object = 1.0  # GEMM output columns per rank
    k_dim: object = 1.0  # GEMM reduction dimension
    bw_eff: object = 1.0  # achieved / datasheet HBM bandwidth of this kernel's traffic
    flop_rate: object = 1.0  # peak FLOP/s of the dtype it computes in
    rows_padded: object = 0.0  # grouped GEMM: (token, expert) rows padded to the kernel's row tile
    ctas: object = np.inf  # grouped GEMM: live CTAs of the grid (inf: not latency-bound by its CTAs)
    ctas_launched: object = 0.0  # grouped GEMM: CTAs launched (live or exiting at once)
    tile_units: object = 0.0  # grouped GEMM: live CTAs x BLOCK_M x BLOCK_N / (64 x 128) (epilogue work)
    fixed_us: object = 0.0  # collective or fixed-time operators: us per kernel


class _FlatBlock(threading.local):
    """The flat block this thread evaluates (the blocks of one call run on several threads at once).

    While :func:`specsim.physics.cycle.throughput` evaluates a flat block of n points (every array
    parameter of shape (n,)), ``n`` is n: an operator whose count is an all-zero (n,) array then
    contributes exactly 0 everywhere, so it is skipped like a scalar zero, and the cost model widens
    its components to (n,) at the end (the shape the skipped arithmetic would have given). ``cache``
    (a dict, or None outside a flat block) holds sub-expressions that several operators or forwards
    of the block compute from the same objects (see :func:`memo`).
    """

    def __init__(self):
        self.n = 0
        self.cache: dict | None = None


FLAT = _FlatBlock()


def memo(tag: str, fn, *objs):
    """``fn()``, computed once per flat block for the same argument objects (identity, not value:
    a block's arrays are never changed in place); outside a flat block simply ``fn()``."""
    cache = FLAT.cache
    if cache is None:
        return fn()
    key = (tag,) + tuple(map(id, objs))
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = (objs, fn())  # the objects are kept: their ids stay theirs while the cache lives
    return hit[1]


def static(tag: str, fn, p: Params):
    """``fn(p)``, once per flat block for the same parameter set (identity of its values): the parts of a forward
    that depend on none of its tokens, requests, context or launch mode (shapes per rank, operator counts), shared by
    every forward of the block. ``fn`` must not read ``p["batch"]``: the speculative and plain-decode runs of a block
    differ in it alone (:func:`~specsim.physics.cycle.running`), and it is left out of the key. Outside a flat block
    simply ``fn(p)``."""
    if FLAT.cache is None:
        return fn(p)
    return memo(tag, lambda: fn(p), *[v for key, v in p.items() if key != "batch"])


def zero_array(count) -> bool:
    """An all-zero count array of a flat block (see :data:`FLAT`)."""
    n = FLAT.n
    if not n or not isinstance(count, np.ndarray) or count.shape != (n,):
        return False
    return memo("zero", lambda: not count.any(), count)  # asked when the operator is built and when it is costed


def _scalar_zero(x) -> bool:
    """A plain-number zero (one scenario's switch that is off); arrays, even all-zero ones, are not."""
    return type(x) is float and x == 0.0


def _absent(count) -> bool:
    """A count that is a scalar zero (or an all-zero array of a flat block): the operator does not
    exist here (the cost model skips it)."""
    if isinstance(count, (float, int)):
        return count == 0
    if isinstance(count, np.ndarray) and count.ndim:
        return bool(FLAT.n) and zero_array(count)
    return _ndim(count) == 0 and float(count) == 0.0


def _gemm(name, phase, count, p: Params, m, k_dim, n_cols, wbytes, flop_rate, bw_eff=None) -> Op:
    if _absent(count):  # never evaluated: skip the arithmetic of its fields
        return Op(name, "gemm", phase, count)
    # a flat block's forwards go straight to the cost model, which never reads a GEMM's flops; its weight bytes are the
    # same in every forward of the block (the shapes come from the static part: see static)
    if FLAT.cache is None:
        flops, wb, ab = 2.0 * m * k_dim * n_cols, k_dim * n_cols * wbytes, m * (k_dim + n_cols) * ACT_BYTES
    else:
        flops, wb = 0.0, memo("gemm_weight_bytes", lambda: k_dim * n_cols * wbytes, k_dim, n_cols, wbytes)
        ab = m * memo("gemm_act_bytes_per_row", lambda: (k_dim + n_cols) * ACT_BYTES, k_dim, n_cols)
    return Op(name, "gemm", phase, count, bytes=wb, act_bytes=ab,
              flops=flops, m=m, n_cols=n_cols, k_dim=k_dim,
              bw_eff=p["mem_efficiency"] if bw_eff is None else bw_eff, flop_rate=flop_rate)


def small_floor(p: Params):
    """The floor of a small (elementwise) kernel: the engine's own, else the GPU's kernel floor."""
    return _where(p["small_kernel_floor_own"] > 0, p["small_kernel_floor_us"], p["kernel_floor_us"])


def host_planned_tree(p: Params):
    """1 where the speculation is a tree (topk > 1) on a model without MLA: SGLang on Hopper runs it on FlashInfer,
    which plans on the host and verifies with a custom (tree) mask; else 0 (chains and MLA trees stay on FA3)."""
    return (_num(p["topk"]) > 1) * (1.0 - _num(p["is_mla"]))


def _one_byte(bytes_per_weight):
    """1 where weights are one-byte (fp8 / int8, their scales included), else 0: their GEMMs quantise the input first."""
    if _ndim(bytes_per_weight) == 0:
        return 1.0 if 0.75 < float(bytes_per_weight) < 1.5 else 0.0
    return _where((bytes_per_weight > 0.75) * (bytes_per_weight < 1.5), 1.0, 0.0)


def _elem(name, phase, count, p: Params, act_bytes) -> Op:
    sf = p["small_kernel_factor"]
    c = count * sf if FLAT.cache is None else memo("elem_count", lambda: count * sf, count, sf)
    if (_absent(count) and (type(sf) is float or _ndim(sf) == 0)) or (FLAT.n and zero_array(c)):
        return Op(name, "elementwise", phase, c)
    return Op(name, "elementwise", phase, c, act_bytes=act_bytes)


def fa2_query_tile(packed_rows):
    """FlashInfer's FA2 CTA query tile for a request's packed query rows (query tokens x GQA group), head dim < 256,
    sm80+: 128 past 64 rows, 64 past 16, else 16 (``FA2DetermineCtaTileQ``, include/flashinfer/utils.cuh,
    flashinfer-python 0.6.3)."""
    return _where(packed_rows > 64, 128.0, _where(packed_rows > 16, 64.0, 16.0))


def _attention(name, count, p: Params, b, w, ctx_eff, kv_bytes_per_token, q_rows_per_kv, flops_per_row_key, multi,
               work_items=None, slowdown=1.0, fa2_tree=0.0):
    """Attention core over each request's KV: bytes = b x keys x KV bytes; query rows padded to a tile.

    The bandwidth it reaches ramps with its parallel work (requests x KV heads): ``eff x W / (W + W_half)``;
    ``work_items=None`` (MLA: heads share one latent cache) keeps the full efficiency. ``fa2_tree`` (1 where a tree
    verify runs FlashInfer's FA2 custom-mask kernel): rows pad to FA2's tile (:func:`fa2_query_tile`), compute at
    the kernel's measured share of the peak, a fixed cost that grows with the tile
    (``calibration/datasets/h200-flashinfer-tree.json``).
    """
    if _absent(count):
        return Op(name, "attention", "attention", count)
    tile = _where(multi, EXTEND_QUERY_TILE, DECODE_QUERY_TILE)
    rows = q_rows_per_kv * w
    fa2 = bool(fa2_tree) if _ndim(fa2_tree) == 0 else bool(np.any(fa2_tree))  # an all-zero array: the plain terms
    if fa2:
        fa2_tile = fa2_query_tile(rows)
        tile = _where(fa2_tree > 0, fa2_tile, tile)
    padded = np.ceil(rows / tile) * tile
    padded = float(padded) if _ndim(padded) == 0 else padded
    eff = p["attention_mem_efficiency"]
    if work_items is not None:
        eff = eff * work_items / (work_items + p["attention_half_efficiency_heads"])
        # past the split threshold each (request, KV head) streams its whole sequence on one SM
        unsplit = work_items > p["attention_unsplit_items"]
        capped = p["attention_unsplit_efficiency"]
        eff = _where(unsplit, min(eff, capped) if _ndim(eff) == 0 else np.minimum(eff, capped), eff)
    flop_rate, fixed_us = _attention_flop_rate(p) / slowdown, p["attention_fixed_us"]
    if fa2:
        flop_rate = _where(fa2_tree > 0, p["flops_bf16"] * p["tree_mask_flop_efficiency"], flop_rate)
        fixed_us = fixed_us + fa2_tree * p["tree_mask_us_per_tile_row"] * fa2_tile
    return Op(name, "attention", "attention", count, bytes=b * ctx_eff * kv_bytes_per_token,
              flops=b * padded / _maximum(q_rows_per_kv, 1e-9) * ctx_eff * flops_per_row_key,
              bw_eff=eff / slowdown, flop_rate=flop_rate, fixed_us=fixed_us)


def _attention_flop_rate(p: Params):
    if FLAT.cache is None:
        return p["flops_bf16"] * p["attention_flop_efficiency"]
    return memo("attention_flop_rate", lambda: p["flops_bf16"] * p["attention_flop_efficiency"], p["flops_bf16"],
                p["attention_flop_efficiency"])


def batch_expansion(p: Params):
    """1 where the engine scores a verify by batch expansion (``verify_batch_expansion``): vLLM V0 does whenever it
    runs CUDA graphs at all (``enforce_eager`` off: spec_decode_worker.py disables the MQA scorer then); with no
    graph captured it scores with one multi-token query per request (the MQA scorer); else 0."""
    expand = p["verify_batch_expansion"]
    if _ndim(expand) == 0 and not expand:
        return 0.0
    captured = float(np.max(p["capture_batch_sizes"])) > 0.0
    return expand * _num(p["graph_verify"]) * captured


def _attention_rows(p: Params, b, w, multi, verify: bool):
    """(requests, query rows per request, multi-token kernel?) of a forward's attention: as the forward runs, or,
    for a verify under batch expansion (:func:`batch_expansion`), b x w single-token sequences on decode kernels,
    each reading its request's whole KV cache (vLLM V0's batch-expansion scorer)."""
    expand = batch_expansion(p) if verify else 0.0
    if _ndim(expand) == 0 and not expand:
        return b, w, multi
    ex = _where(multi, expand, 0.0)
    b_att, w_att = b * (1 + ex * (w - 1)), w - ex * (w - 1)
    if _ndim(ex) == 0 and _ndim(multi) == 0:
        return b_att, w_att, bool(multi) and not ex
    return b_att, w_att, np.asarray(multi, dtype=bool) & (np.asarray(ex) == 0)


def one_launch_flag(graph):
    """The launch flag every point shares: the flag itself where it is one number; in a flat block (see
    :data:`FLAT`) 1.0 or 0.0 where every point replays a graph or every point launches eagerly; else None."""
    if _ndim(graph) == 0:
        return float(graph)
    if not FLAT.n:
        return None
    g = np.asarray(graph)
    return memo("one_launch_flag", lambda: 1.0 if bool((g == 1.0).all()) else 0.0 if not g.any() else None, g)


def _allreduce_params(p: Params, graph):
    """(alpha, bus bandwidth) of the all-reduce path a forward takes (graph-captured or eager), and along that path's
    fallback chain one (size limit, next alpha, next bandwidth) per link; alphas carry the what-if scale."""
    g = np.asarray(graph, dtype=float)
    one_flag = one_launch_flag(g)  # one flag for every point: that path's numbers, no blend

    def mix(graph_key, eager_key):
        if one_flag == 1.0:
            return p[graph_key]
        if one_flag == 0.0:
            return p[eager_key]
        return g * p[graph_key] + (1 - g) * p[eager_key]

    scale = p["allreduce_scale"]
    alpha = mix("allreduce_alpha_graph_us", "allreduce_alpha_eager_us") * scale
    bw = mix("allreduce_bus_bytes_per_s", "allreduce_eager_bus_bytes_per_s")
    large = ((mix("allreduce_max_bytes_graph", "allreduce_max_bytes_eager"),
              mix("allreduce_fallback_alpha_graph_us", "allreduce_fallback_alpha_eager_us") * scale,
              mix("allreduce_fallback_bus_graph_bytes_per_s", "allreduce_fallback_bus_eager_bytes_per_s")),
             (mix("allreduce_fallback_max_bytes_graph", "allreduce_fallback_max_bytes_eager"),
              mix("allreduce_fallback2_alpha_graph_us", "allreduce_fallback2_alpha_eager_us") * scale,
              mix("allreduce_fallback2_bus_graph_bytes_per_s", "allreduce_fallback2_bus_eager_bytes_per_s")))
    return alpha, bw, large


def _tp_collectives(p: Params, graph, layers, n, h, logit_rows, vocab) -> list[Op]:
    """A forward's TP collectives: all-reduces of n x h activations (per layer, plus the embedding's)
    and the all-gather of logit_rows x vocab logits; none at TP 1.

    The logits are gathered in the lm_head's output dtype (bf16; made fp32 after the gather) by NCCL, the last
    implementation of the path's chain: SGLang's ``LogitsProcessor._get_logits`` calls
    ``tensor_model_parallel_all_gather`` -> pynccl (the custom all-reduce has no all-gather; 0.5.9 wheel,
    ``layers/logits_processor.py`` L831-835, L962; ``models/notes/sglang_decode_kernels.md``)."""
    alpha, bw, large = _allreduce_params(p, graph)
    nccl_alpha, nccl_bw = large[-1][1], large[-1][2]
    tp = p["tp"]
    tp_on = float(tp > 1) if _ndim(tp) == 0 else memo("tp_on", lambda: (np.asarray(tp) > 1).astype(float), tp)  # none at TP 1
    gather_bytes = logit_rows * vocab * ACT_BYTES
    per_layer = p["allreduces_per_layer"]
    return [
        Op("allreduce", "collective", "comm", memo("allreduce_count", lambda: (layers * per_layer + 1) * tp_on, layers,
                                                   per_layer, tp_on),
           bytes=n * h * ACT_BYTES, fixed_us=allreduce_us(n * h * ACT_BYTES, tp, alpha, bw, large)),
        Op("logits_allgather", "collective", "comm", 1.0 * tp_on, bytes=gather_bytes,
           fixed_us=allgather_us(gather_bytes, tp, nccl_alpha, nccl_bw)),
    ]


def _gqa_ops(p: Params, s: dict, n, b, w, multi, ctx_eff) -> list[Op]:
    """The GQA attention operators of :func:`target_ops` (``s``: its static part, :func:`_target_static`)."""
    d, h, heads_r, kv_r, ba, fa = s["d"], s["h"], s["heads_r"], s["kv_r"], s["ba"], s["fa"]
    fused_count, apart_q, apart_kv, per_layer, qk_norm_count, kv_store_count = s["gqa_counts"]
    qkv_cols, q_cols, kv_cols = s["gqa_cols"]
    # unpacked GQA (repeat_kv, or a kernel that does not pack a KV head's queries) reads each KV head per query head
    unpack = _where(multi, p["attention_unpacked_multi_token"], p["attention_unpacked_decode"])
    kv_read_heads = kv_r + unpack * (heads_r - kv_r)
    tree = host_planned_tree(p) * multi  # a tree verify on the host-planned (FlashInfer) path
    return [
        _gemm("qkv_proj", "attention", fused_count, p, n, h, qkv_cols, ba, fa),
        _gemm("q_proj", "attention", apart_q, p, n, h, q_cols, ba, fa),
        _gemm("kv_proj", "attention", apart_kv, p, n, h, kv_cols, ba, fa),
        _gemm("o_proj", "attention", per_layer, p, n, q_cols, h, ba, fa),
        _attention("attention_gqa", per_layer, p, b, w, ctx_eff, 2 * kv_read_heads * d * p["bytes_kv"], heads_r / kv_r,
                   4 * kv_r * (heads_r / kv_r) * d, multi, work_items=b * kv_read_heads,
                   slowdown=1.0 + (p["tree_mask_attention_slowdown"] - 1.0) * tree, fa2_tree=tree * p["tree_fa2_custom_mask"]),
        _elem("qk_norm", "attention", qk_norm_count, p, n * (heads_r + kv_r) * d * ACT_BYTES),
        _elem("rope", "attention", per_layer, p, 2 * n * (heads_r + kv_r) * d * ACT_BYTES),
        # the engine's kernels write K and V (two index_put, or one, or none where the rotary kernel writes them)
        _elem("kv_store", "attention", kv_store_count, p,
              2 * n * kv_r * d * p["bytes_kv"] / _maximum(p["kv_store_kernels"], 1.0) * 2),
    ]


TILE_AREA_REF = 64.0 * 128.0  # the output tile (BLOCK_M x BLOCK_N) moe_cta_tile_us is quoted for


def _routed_expert_ops(p: Params, Lm, n, k, E, h, ei, reads, active, br, fr) -> list[Op]:
    """The routed experts' gate_up and down grouped GEMMs over n tokens (``active`` distinct experts read).

    With the engine's Triton tiles (``moe_triton_tiles``) each carries its kernel's grid: rows padded to
    the config's BLOCK_M, live and launched CTAs (:func:`~specsim.physics.moe.fused_moe_grid`), and the
    wide bf16 default tiles' bandwidth share; otherwise rows pad to the MMA tile and no CTA limit applies.
    """
    triton = p["moe_triton_tiles"]
    if _absent(Lm):
        return [Op("experts_gate_up", "grouped_gemm", "moe", Lm), Op("experts_down", "grouped_gemm", "moe", Lm)]
    if _ndim(triton) == 0 and not triton:  # no Triton grid anywhere: rows pad to the MMA tile, no tiles to pick
        bm, bn, eff = 16.0, 16.0, p["moe_mem_efficiency"]
    else:
        bm, bn, wide = fused_moe_tiles(n, E, p["moe_fp8_tiles"] > 0, p["moe_tuned_config"])
        bm = _where(triton > 0, bm, 16.0)
        eff = _where(wide * triton > 0, p["moe_wide_tile_mem_efficiency"], p["moe_mem_efficiency"])
    out = []
    for name, n_out, k_dim, wbytes, act in (("experts_gate_up", 2 * ei, h, reads * 2 * h * ei * br, n * k * (h + 2 * ei)),
                                            ("experts_down", h, ei, reads * h * ei * br, n * k * (h + ei))):
        # every row of the forward enters the kernel (a replay's padding rows too); the real ones pick the experts
        live, launched, rows = fused_moe_grid(E, k, n, active, bm, n_out, bn, p["moe_grid_clamp"])
        out.append(Op(name, "grouped_gemm", "moe", Lm, bytes=wbytes, act_bytes=act * ACT_BYTES, flops=2 * n * k * n_out * k_dim,
                      m=n * k, n_cols=n_out, k_dim=k_dim, bw_eff=eff, flop_rate=fr, rows_padded=rows,
                      ctas=_where(triton > 0, live, np.inf), ctas_launched=launched * triton,
                      tile_units=live * bm * bn / TILE_AREA_REF * triton))
    return out


def _target_static(p: Params) -> dict:
    """What :func:`target_ops` reads that does not depend on the forward's tokens, requests, context or launch mode:
    shapes per rank, weight bytes and FLOP rates, and the operators' counts (never ``p["batch"]``: see :func:`static`)."""
    tp, h = p["tp"], p["hidden"]
    L, Lm = p["num_layers"], p["num_moe_layers"]
    Ld = L - Lm
    mla = p["is_mla"]
    gqa = 1 - mla
    heads_r = p["num_heads"] / tp
    kv_r = _maximum(p["num_kv_heads"] / tp, 1.0)
    fused = p["fused_projections"]  # 1: one qkv and one gate_up GEMM; 0: q, k, v / gate, up apart
    d = p["head_dim"]
    ql, kvl = p["q_lora_rank"], p["kv_lora_rank"]
    rope, nope, vd = p["qk_rope_head_dim"], p["qk_nope_head_dim"], p["v_head_dim"]
    qk = nope + rope
    s = {"h": h, "L": L, "Lm": Lm, "Ld": Ld, "mla": mla, "gqa": gqa, "heads_r": heads_r, "kv_r": kv_r, "d": d,
         "ba": p["bytes_attention"], "fa": p["flops_attention"], "ql": ql, "kvl": kvl, "rope": rope,
         "vd": vd, "qk": qk}
    if not _scalar_zero(gqa):
        s["gqa_counts"] = (gqa * L * fused, gqa * L * (1 - fused), gqa * L * (1 - fused) * 2, gqa * L,
                           gqa * L * p["qk_norm_kernels"], gqa * L * p["kv_store_kernels"])
        s["gqa_cols"] = ((heads_r + 2 * kv_r) * d, heads_r * d, kv_r * d)
    if not _scalar_zero(mla):
        has_ql = float(ql > 0) if _ndim(ql) == 0 else (np.asarray(ql) > 0).astype(float)
        absorbed = p["mla_absorbed"]  # 1: attention over the latent cache; 0: over per-head K/V
        s.update(has_ql=has_ql, latent=kvl + rope, per_head=heads_r * (qk + vd))
        s["mla_counts"] = (mla * L * has_ql, mla * L, mla * L * absorbed, mla * L * (1 - absorbed),
                           mla * L * (1 + has_ql), mla * L * p["kv_store_kernels_mla"], mla * L * p["mla_misc_kernels"])
        s["mla_shapes"] = (has_ql * ql + (1 - has_ql) * h, heads_r * qk, heads_r * nope, heads_r * vd)
    s["heads_width"] = _where(mla > 0, heads_r * (qk + vd), (heads_r + 2 * kv_r) * d)
    s["layer_counts"] = (L * p["norm_kernels"], L * p["residual_add_kernels"], L * p["attention_aux_kernels"],
                         L * p["attention_copy_kernels"])
    inter = p["intermediate"] / tp
    s.update(inter=inter, bd=p["bytes_dense"], fd=p["flops_dense"], dense_counts=(Ld * fused, Ld * (1 - fused) * 2))
    E, k = p["num_experts"], p["experts_per_token"]
    sh = p["num_shared_experts"] * p["shared_intermediate"] / tp
    ei = p["expert_intermediate"] / tp
    # an engine that fuses the shared experts into the routed kernel runs them as n_shared more experts that every
    # token picks (E + n_shared experts, top-(k + n_shared)): their weights stream there, no GEMMs of their own
    sf = p["shared_fused"] * (sh > 0)
    n_sh = p["num_shared_experts"] * sf
    s.update(E=E, k=k, sh=sh, ei=ei, bs_=p["bytes_shared"], fs=p["flops_shared"], br=p["bytes_routed"],
             fr=p["flops_routed"], sf=sf, n_sh=n_sh, shared_reads=sf * sh / _maximum(ei, 1e-9),
             shared_count=Lm * (sh > 0) * (1 - sf))
    # --- activation quantisation before each fp8 / int8 GEMM (the engine's per-token or per-group quant kernel)
    # MLA: the fused q_a + kv_a GEMM (or q_proj and kv_a without a q LoRA), q_b, o; GQA: qkv, o (or q, k, v, o)
    q_att = _one_byte(s["ba"]) * _where(mla > 0, 3.0, 2.0 + 2.0 * (1 - fused))
    # a per-tensor dynamic scale for the routed experts' input is found and applied in three kernels (zeros, absmax, quant)
    q_routed = 2.0 * _one_byte(s["br"]) * _where(p["moe_block_scaled"] > 0, 1.0, 3.0)
    q_mlp = 2.0 * _one_byte(s["bd"]) * Ld + q_routed * Lm + 2.0 * _one_byte(s["bs_"]) * Lm * (sh > 0) * (1 - sf)
    s["act_quant_count"] = (q_att * L + q_mlp) * p["act_quant_kernels"]
    s["vr"] = p["vocab"] / tp
    s["moe_counts"] = (Lm * p["router_topk_kernels"], Lm * p["moe_align_kernels"], Lm * p["moe_combine_kernels"],
                       Lm * p["moe_norm_kernels"], Lm * p["moe_int4_glue_kernels"], Lm * (sh > 0) * p["shared_glue_kernels"])
    s["router_excess"] = (Lm * _where(p["router_topk_us"] > 0, 1.0, 0.0), _maximum(
        p["router_topk_us"] - p["router_topk_kernels"] * (p["graph_node_us"] + small_floor(p)), 0.0))
    s["gate_up_cols"], s["shared_gate_up_cols"], s["shared_glue_width"] = 2 * inter, 2 * sh, _maximum(sh, h)
    return s


def target_ops(p: Params, tokens_per_request, batch=None, ctx=None, graph=None, multi_token=None,
               routed_tokens=None, verify: bool = False, last_logits: bool = False, independent_tokens=None) -> list[Op]:
    """Operators of the target forward over batch x tokens_per_request new tokens (``verify``: a speculative verify,
    which an engine may batch-expand; ``last_logits``: logits for each request's last token only, as a prefill)."""
    w = _num(tokens_per_request)
    b = _num(p["batch"] if batch is None else batch)
    c = _num(p["ctx"] if ctx is None else ctx)
    graph = p["graph_verify"] if graph is None else graph
    multi = (w > 1) if multi_token is None else multi_token
    multi = bool(multi) if _ndim(multi) == 0 else np.asarray(multi, dtype=bool)
    n = b * w
    s = static("target", _target_static, p)
    h, L, Lm, Ld = s["h"], s["L"], s["Lm"], s["Ld"]
    ba, fa = s["ba"], s["fa"]
    mla, gqa = s["mla"], s["gqa"]
    heads_r = s["heads_r"]
    ctx_eff = c + w + p["static_cache_headroom_tokens"]  # keys attended (a static cache: all of it)
    ops: list[Op] = []

    # the attention kernels' requests, rows per request and kind: a verify under batch expansion runs every row as a
    # single-token sequence of its own (b x w decode queries, each over the whole KV cache of its request)
    b_att, w_att, multi_att = _attention_rows(p, b, w, multi, verify)

    # --- attention, GQA (weights sharded by heads; KV heads replicate when tp > num_kv_heads)
    if not _scalar_zero(gqa):  # an MLA model (one scenario) has no GQA operators: none are built
        ops += _gqa_ops(p, s, n, b_att, w_att, multi_att, ctx_eff)

    # --- attention, MLA (low-rank down-projections replicated, head-wise up-projections sharded)
    ql, kvl = s["ql"], s["kvl"]
    rope, vd, qk = s["rope"], s["vd"], s["qk"]
    if not _scalar_zero(mla):  # a GQA model (one scenario) has no MLA operators: none are built
        has_ql, latent, per_head = s["has_ql"], s["latent"], s["per_head"]
        q_a_count, per_layer, latent_count, per_head_count, norm_count, store_count, misc_count = s["mla_counts"]
        q_b_in, q_b_cols, uk_cols, uv_cols = s["mla_shapes"]
        ops += [
            _gemm("q_a_proj", "attention", q_a_count, p, n, h, ql, ba, fa),
            _gemm("q_b_proj", "attention", per_layer, p, n, q_b_in, q_b_cols, ba, fa),
            _gemm("kv_a_proj", "attention", per_layer, p, n, h, latent, ba, fa),
            _gemm("w_uk", "attention", per_layer, p, n, kvl, uk_cols, ba, fa),
            _gemm("w_uv", "attention", per_layer, p, n, kvl, uv_cols, ba, fa),
            _gemm("o_proj", "attention", per_layer, p, n, uv_cols, h, ba, fa),
            _attention("attention_mla_latent", latent_count, p, b_att, w_att, ctx_eff, latent * p["bytes_kv"], heads_r,
                       2 * (latent + kvl), multi_att),
            _attention("attention_mla_per_head", per_head_count, p, b_att, w_att, ctx_eff, per_head * p["bytes_kv"],
                       heads_r, 2 * (qk + vd), multi_att),
            # the q and kv latents' RMSNorms, rotary on q_pe / k_pe, the latent cache write
            _elem("latent_norms", "attention", norm_count, p, 2 * n * (kvl + ql) * ACT_BYTES / (1 + has_ql)),
            _elem("rope_mla", "attention", per_layer, p, 2 * n * (heads_r + 1) * rope * ACT_BYTES),
            _elem("kv_store_mla", "attention", store_count, p, 2 * n * latent * p["bytes_kv"]),
            _elem("mla_misc", "attention", misc_count, p, 2 * n * latent * ACT_BYTES),
        ]

    # --- every layer: RMSNorms (input and post-attention), residual adds, the attention backend's side kernels and
    # the copies of the architecture's attention code (engine.model_kernels)
    norms, residuals, aux, copies = s["layer_counts"]
    ops += [
        _elem("layer_norms", "attention", norms, p, 4 * n * h * ACT_BYTES),
        _elem("residual_adds", "attention", residuals, p, 3 * n * h * ACT_BYTES),
        _elem("attention_aux", "attention", aux, p, 4 * b * heads_r * 4.0),
        _elem("attention_copies", "attention", copies, p, 2 * n * s["heads_width"] * ACT_BYTES),
    ]

    # --- dense MLP layers (gate_up fused, down)
    inter, bd, fd = s["inter"], s["bd"], s["fd"]
    fused_count, apart_count = s["dense_counts"]
    ops += [
        _gemm("gate_up_proj", "mlp", fused_count, p, n, h, s["gate_up_cols"], bd, fd),
        _gemm("gate_proj|up_proj", "mlp", apart_count, p, n, h, inter, bd, fd),
        _gemm("down_proj", "mlp", Ld, p, n, inter, h, bd, fd),
        _elem("silu_mul", "mlp", Ld, p, 3 * n * inter * ACT_BYTES),
    ]

    # --- MoE layers: router, shared experts, routed experts (fused: distinct experts; gathered: n*k)
    E, k, sh, ei = s["E"], s["k"], s["sh"], s["ei"]
    bs_, fs = s["bs_"], s["fs"]
    routed = n if routed_tokens is None else _num(routed_tokens)
    # a fused kernel reads each distinct expert once: those of this many independent tokens (routing locality);
    # a gathered kernel reads every routed token's experts whatever they share
    independent = routed if independent_tokens is None else _num(independent_tokens)
    per_token = p["moe_per_token_kernel"] > 0
    reads = experts_read(E, k, routed, p["moe_per_token_kernel"], independent, p["routing_skew"])
    # a gathered kernel that materialises per-token weight copies (HF batched_mm) moves them several times
    reads = reads * _where(per_token, p["per_token_traffic_factor"], 1.0)
    active = _where(per_token, n * k, expected_distinct_experts(E, k, independent, p["routing_skew"]))
    br, fr = s["br"], s["fr"]
    n_sh = s["n_sh"]
    reads = reads + s["shared_reads"]  # the shared experts' weights, in routed-expert widths
    experts_ops = _routed_expert_ops(p, Lm, n, k + n_sh, E + n_sh, h, ei, reads, active + n_sh, br, fr)
    shared_count = s["shared_count"]
    topk_count, align_count, combine_count, norm_count, int4_count, glue_count = s["moe_counts"]
    excess_count, excess_us = s["router_excess"]
    ops += [
        _gemm("router", "moe", Lm, p, n, h, E, 2.0, p["flops_bf16"]),
        _gemm("shared_gate_up", "moe", shared_count, p, n, h, s["shared_gate_up_cols"], bs_, fs),
        _gemm("shared_down", "moe", shared_count, p, n, sh, h, bs_, fs),
        *experts_ops,
        _elem("router_topk", "moe", topk_count, p, n * E * 4.0),
        # a measured router top-k: the GPU time its kernels take beyond their floors (torch's sort-based top-k kernels)
        Op("router_topk_measured_excess", "fixed", "moe", excess_count, fixed_us=excess_us),
        _elem("moe_align", "moe", align_count, p, n * k * 4.0 * 2),
        _elem("moe_silu_mul", "moe", Lm, p, 3 * n * k * ei * ACT_BYTES),
        _elem("moe_combine", "moe", combine_count, p, n * (k + 1) * h * ACT_BYTES),
        _elem("moe_activations_misc", "moe", norm_count, p, 4 * n * h * ACT_BYTES),
        _elem("moe_int4_glue", "moe", int4_count, p, 2 * n * h * ACT_BYTES),
        _elem("shared_expert_glue", "moe", glue_count, p, 3 * n * s["shared_glue_width"] * ACT_BYTES),
    ]

    # --- activation quantisation before each fp8 / int8 GEMM (counts: _target_static)
    ops.append(_elem("act_quant", "misc", s["act_quant_count"], p, 3 * n * h * ACT_BYTES))

    # --- the multi-token (verify / extend) path: extra kernels and extra GPU time per layer
    ops += [
        _elem("multi_token_extra_kernels", "misc", _where(multi, p["multi_token_kernels_per_layer"], 0.0) * L / p["small_kernel_factor"],
              p, 0.0),
        Op("multi_token_extra_time", "fixed", "misc", L, fixed_us=_where(multi, p["multi_token_extra_us_per_layer"], 0.0)),
    ]

    # --- collectives: per-layer all-reduces, embedding all-reduce, logits all-gather
    rows = b if last_logits else _where(multi, n, b)  # decode (and prefill) computes logits for the last token only
    ops += _tp_collectives(p, graph, L, n, h, rows, p["vocab"])

    # --- embedding lookup, final norm, lm_head (vocab-parallel)
    ops += [
        _elem("embedding", "head", 1.0, p, 2 * n * h * ACT_BYTES),
        _elem("final_norm", "head", 1.0, p, 2 * rows * h * ACT_BYTES),
        _gemm("lm_head", "head", 1.0, p, rows, h, s["vr"], p["bytes_head"], p["flops_head"]),
    ]
    return ops


def _draft_attention(p: Params, L, b, w, ctx_eff, kv_r, heads_r, d, branches: bool) -> Op:
    """The draft layer's attention: w query rows per request over its KV, or, for a draft step's branches on the
    FlashInfer tree path (``engine.tree_attention_fa2_custom_mask``, topk > 1, no MLA), b x w one-query rows."""
    kv_bytes, flops_key = 2 * kv_r * d * p["bytes_kv"], 4 * kv_r * (heads_r / kv_r) * d
    own = host_planned_tree(p) * p["tree_fa2_custom_mask"] if branches else 0.0
    if _ndim(own) == 0 and not own:
        return _attention("attention", L, p, b, w, ctx_eff, kv_bytes, heads_r / kv_r, flops_key,
                          (w > 1) if _ndim(w) else bool(w > 1), work_items=b * kv_r)
    # a blend of the two per point: own = 1 gives B x topk rows of one query each, own = 0 the shared read
    b_att, w_att = b * (1 + own * (w - 1)), w - own * (w - 1)
    multi = (w_att > 1) if _ndim(w_att) else bool(w_att > 1)
    return _attention("attention", L, p, b_att, w_att, ctx_eff, kv_bytes, heads_r / kv_r, flops_key, multi,
                      work_items=b_att * kv_r)


def _draft_static(p: Params) -> dict:
    """What :func:`draft_ops` reads that does not depend on the forward's tokens, requests, context or launch mode
    (never ``p["batch"]``: see :func:`static`)."""
    tp, h = p["tp"], p["draft_hidden"]
    heads_r = p["draft_heads"] / tp
    kv_r = _maximum(p["draft_kv_heads"] / tp, 1.0)
    d = p["draft_head_dim"]
    inter = p["draft_intermediate"] / tp
    L = p["draft_layers"]
    nsmall = _maximum(p["draft_kernels_per_layer"] - 6 - p["allreduces_per_layer"], 0.0)
    return {"h": h, "by": p["bytes_draft"], "fl": p["flops_draft"], "L": L, "heads_r": heads_r, "kv_r": kv_r, "d": d,
            "inter": inter, "vr": p["draft_vocab"] / tp, "fuse_on": (p["draft_fuse"] > 0), "small_count": L * nsmall,
            "shapes": (2 * h, (heads_r + 2 * kv_r) * d, heads_r * d, 2 * inter, p["draft_fuse"] * p["hidden"])}


def draft_ops(p: Params, tokens_per_request, batch=None, ctx=None, graph=None, fuse=False,
              last_logits: bool = False, branches: bool = False) -> list[Op]:
    """Operators of one EAGLE-3 head forward (one Llama-style layer on [embedding; hidden]).

    ``fuse`` adds the fc that fuses 3 target hidden states (draft-extend). The head's lm_head
    runs over every row (B x topk per draft step), then a softmax + top-k over its vocabulary.
    ``branches`` (a draft step's rows are the tree's topk branches): on the FlashInfer tree path each branch decodes
    as a row of its own over the whole prefix (B x topk one-query rows, each reading its KV:
    ``calibration/datasets/h200-flashinfer-plan-profile.json``), else a request's rows read its KV once.
    """
    w = _num(tokens_per_request)
    b = _num(p["batch"] if batch is None else batch)
    c = _num(p["ctx"] if ctx is None else ctx)
    graph = p["graph_draft"] if graph is None else graph
    n = b * w
    s = static("draft", _draft_static, p)
    h, by, fl, L, heads_r, kv_r, d, inter, vr = (s[k] for k in ("h", "by", "fl", "L", "heads_r", "kv_r", "d", "inter", "vr"))
    qkv_in, qkv_cols, o_in, gate_up_cols, fuse_in = s["shapes"]
    ctx_eff = c + w
    f = _num(fuse)
    ops = [
        _gemm("fc_fuse_hidden", "mlp", f * s["fuse_on"], p, n, fuse_in, h, by, fl),
        _gemm("qkv_proj", "attention", L, p, n, qkv_in, qkv_cols, by, fl),
        _gemm("o_proj", "attention", L, p, n, o_in, h, by, fl),
        _draft_attention(p, L, b, w, ctx_eff, kv_r, heads_r, d, branches),
        _gemm("gate_up_proj", "mlp", L, p, n, h, gate_up_cols, by, fl),
        _gemm("down_proj", "mlp", L, p, n, inter, h, by, fl),
    ]
    ops.append(_elem("norms_rope_act_store", "attention", s["small_count"], p, 4 * n * h * ACT_BYTES))
    ops.append(_elem("embedding_norm", "head", 2.0, p, 4 * n * h * ACT_BYTES))
    rows = b if last_logits else n  # a prefill's draft extend: the next draft token after each prompt only
    allreduce, allgather = _tp_collectives(p, graph, L, n, h, rows, p["draft_vocab"])
    ops += [allreduce, _gemm("lm_head", "head", 1.0, p, rows, h, vr, by, fl), allgather]
    return ops
