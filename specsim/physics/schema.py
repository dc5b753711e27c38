"""The scenario schema: everything the cost model needs, validated once at the edge.

Units are in the field names (``_bytes_per_s``, ``_us``, ``_ms``). Every component carries a
``sources`` map (field -> where the number comes from) so output can say what is measured and
what is assumed.
"""

from __future__ import annotations

import re
import typing
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationInfo, field_validator, model_validator

from .methods import AllReduceMethods, EngineMethods, GPUMethods
from .moe import PRIOR_MIN_EXPERTS, ROUTING_SKEW_MAX, ROUTING_SKEW_PRIOR, max_routing_skew
from .rules import (  # noqa: F401  (DTYPE_BYTES, MAX_ALLREDUCE_CHAIN, draft_tokens_for: re-exported)
    CAPTURE_SIZES,
    DTYPE_BYTES,
    MAX_ALLREDUCE_ALPHA_US,
    MAX_ALLREDUCE_CHAIN,
    MAX_LIST,
    MAX_SAMPLES,
    MAX_TEXT,
    acceptance_problem,
    bounds,
    check_range,
    draft_tokens_for,
    finite_number,
    scenario_problem,
)

Dtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]


_NUMERIC_ONLY: dict[tuple[type, str], bool] = {}
_HOLDS_MODEL: dict[tuple[type, str], bool] = {}  # (model, field): its annotation holds a pydantic model


def _numeric_only(tp) -> bool:
    """True when an annotation admits numbers (int/float, in lists/dicts/optionals) but no str/bool."""
    seen = {"num": False, "other": False}

    def walk(t) -> None:
        if t is bool or t is str:
            seen["other"] = True
        elif t is int or t is float:
            seen["num"] = True
        elif typing.get_origin(t) is Literal:
            seen["other"] = True
        elif typing.get_origin(t) is dict:  # a mapping's keys are names: only its values decide
            walk(typing.get_args(t)[1])
        else:
            for a in typing.get_args(t):
                if isinstance(a, type) or typing.get_origin(a) is not None:
                    walk(a)
                elif a is not type(None) and not isinstance(a, type):
                    seen["other"] = True

    walk(tp)
    return seen["num"] and not seen["other"]


def _bad_scalar(v) -> bool:
    return isinstance(v, (bool, str, bytes))


MIN_EFFICIENCY = 1e-4  # achieved / datasheet rate: below this no real kernel was measured (and rates divide by it)
MIN_RATE = 1e6  # bytes (per second): the least bandwidth or capacity a device or link is given


#: characters no text field may hold: C0 / C1 controls but tab and newline (an ESC starts a terminal escape
#: sequence) and the Unicode bidirectional overrides and isolates (they reorder what a terminal shows)
_CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _holds_model(tp) -> bool:
    """True when an annotation has a pydantic model anywhere in it (``Engine``, ``dict[str, ModelKernels]``)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return True
    return any(_holds_model(a) for a in typing.get_args(tp))


def _refuse_control_characters(v: object, keys_only: bool = False) -> None:
    """Refuse text holding a control character, in ``v`` and every text key and value nested in it (free-form
    blocks such as provenance); ``keys_only``: a mapping of models, whose values check themselves."""
    stack, budget = [v], 1_000_000  # the JSON reader bounds depth and size; this bounds the walk too
    while stack and budget > 0:
        x = stack.pop()
        budget -= 1
        if isinstance(x, str):
            m = _CONTROL_RE.search(x)
            if m:
                raise ValueError(f"allowed: text without control characters (found U+{ord(m.group()):04X} at "
                                 f"position {m.start()})")
        elif isinstance(x, dict):
            stack.extend(x)
            if not (keys_only and x is v):
                stack.extend(x.values())
        elif isinstance(x, (list, tuple)) and not (keys_only and x is v):
            stack.extend(x)


class _Model(BaseModel):
    """Common base: unknown keys refused, no NaN/inf anywhere, numbers are numbers.

    Integer fields refuse fractions (pydantic) and booleans; numeric fields refuse booleans and
    strings (``true`` is not 1 layer, ``"88.8"`` is not a bandwidth); every numeric field states
    its physical range with ``ge``/``gt``/``le``.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False, str_max_length=MAX_TEXT)

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_are_numbers(cls, v, info: ValidationInfo):
        tv = type(v)
        if tv is float or tv is int:  # the common case: a plain number is always fine here
            return v
        key = (cls, info.field_name or "")
        only = _NUMERIC_ONLY.get(key)
        if only is None:
            f = cls.model_fields.get(info.field_name or "")
            only = _NUMERIC_ONLY[key] = bool(f is not None and _numeric_only(f.annotation))
        if not only or v is None:
            if tv is str:
                _refuse_control_characters(v)
            elif tv is dict or tv is list:
                holds = _HOLDS_MODEL.get(key)
                if holds is None:
                    f = cls.model_fields.get(info.field_name or "")
                    holds = _HOLDS_MODEL[key] = bool(f is not None and _holds_model(f.annotation))
                # a model checks its own fields: of a mapping of models, only the keys here
                _refuse_control_characters(v, keys_only=holds)
            return v
        if _bad_scalar(v):
            raise ValueError(f"allowed: a number, not {'true/false' if isinstance(v, bool) else 'a string'}")
        if isinstance(v, (list, tuple)):
            if len(v) > MAX_LIST:
                raise ValueError(f"allowed: at most {MAX_LIST} values")
            if any(_bad_scalar(x) for x in v):
                raise ValueError("allowed: a list of numbers (no true/false or strings)")
        elif isinstance(v, dict) and any(_bad_scalar(x) for x in v.values()):
            raise ValueError("allowed: numbers as values (no true/false or strings)")
        return v


class GPU(GPUMethods, _Model):
    """One accelerator (per-device numbers, datasheet values with sources)."""

    name: str
    hbm_bytes_per_s: float = Field(ge=MIN_RATE, le=1e14, description="datasheet HBM bandwidth, bytes/s")
    memory_bytes: float = Field(ge=MIN_RATE, le=1e13, description="HBM capacity, bytes")
    device_memory_bytes: float | None = Field(
        None, ge=MIN_RATE, le=1e13, description="memory the CUDA runtime reports (torch total_memory), bytes: what an "
                                                "engine's KV-pool rule starts from; None: memory_bytes")
    peak_flops: dict[str, float] = Field(description="dense peak FLOP/s per compute dtype")
    mem_efficiency: float = Field(0.78, ge=MIN_EFFICIENCY, le=1, description="achieved/datasheet HBM BW for large memory-bound GEMMs")
    flop_efficiency: float = Field(0.78, ge=MIN_EFFICIENCY, le=1, description="achieved/peak FLOP/s for large GEMMs")
    kernel_floor_us: float = Field(3.0, ge=0, le=1e4, description="minimum GPU time of one kernel (ramp-up, tail, sync)")
    gemm_peak_efficiency: float = Field(0.73, ge=MIN_EFFICIENCY, le=1, description="achieved/peak FLOP/s of large compute-bound GEMMs")
    gemm_stream_loss: float = Field(
        0.15, ge=0, le=1, description="share of the shorter of a GEMM's weight streaming and its compute that the "
        "pipeline does not hide behind the longer")
    attention_half_efficiency_heads: float = Field(
        4.0, ge=0, le=1e5, description="(request x KV head) work items at which attention bandwidth is half its peak")
    attention_fixed_us: float = Field(
        0.0, ge=0, le=1e4, description="extra fixed time of an attention kernel beyond the kernel floor (split-KV combine, setup)")
    vocab_topk_fixed_us: float = Field(
        0.0, ge=0, le=1e5, description="fixed time of a softmax + max/top-k over a vocabulary (row reductions)")
    vocab_pass_bytes_per_s: float | None = Field(
        None, ge=MIN_RATE, le=1e15, description="streaming rate of softmax + max over fp32 logits; None: elementwise bandwidth")
    vocab_topk_pass_factor: float = Field(
        1.0, ge=1, le=100, description="top-k (k > 1) time over the vocabulary relative to softmax + max")
    elementwise_mem_efficiency: float = Field(
        0.7, ge=MIN_EFFICIENCY, le=1, description="achieved/datasheet HBM BW of elementwise kernels (norms, rotary, activations)")
    sm_count: int = Field(132, ge=1, le=10_000, description="streaming multiprocessors (CTAs of a kernel's grid share them)")
    moe_cta_bytes_per_s: float = Field(
        5.63e10, ge=1e6, le=1e14, description="weight bytes/s one live CTA of the fused-MoE Triton kernel streams (bf16 "
        "tiles): with few CTAs (few experts x N tiles) the kernel is latency-bound at n_cta x this, not at HBM bandwidth")
    moe_cta_bytes_per_s_fp8: float = Field(
        2.768e10, ge=1e6, le=1e14, description="the same for fp8 tiles (per-block scales and dequantisation in the K loop)")
    moe_cta_exit_us: float = Field(
        0.0827, ge=0, le=1e3, description="SM-us per launched CTA of the fused-MoE grid, live or not: SGLang sizes the grid for "
        "the worst-case padding ((E + 1) x (BLOCK_M - 1) rows) and the CTAs past the real rows exit at once")
    moe_cta_tile_us: float = Field(
        0.3817, ge=0, le=1e3, description="SM-us of prologue and epilogue per live CTA of a 64 x 128 output tile (scales "
        "with BLOCK_M x BLOCK_N): the cost a short K loop cannot hide")
    moe_cta_tile_us_fp8: float = Field(
        1.022, ge=0, le=1e3, description="the same for block-scaled fp8 / int8 tiles (the K loop loads per-block scales "
        "and rescales the accumulator each step)")
    # kernel costs measured on this GPU (its profile) that an engine preset takes unless it names its own (None there)
    graph_node_us: float = Field(
        1.0, ge=0, le=1e6, description="GPU-side gap per kernel of a replayed CUDA graph, measured on this GPU: the value of "
        "every engine whose graph_node_us is None")
    attention_mem_efficiency: float = Field(
        0.6, ge=MIN_EFFICIENCY, le=1, description="achieved/datasheet HBM BW of a packed-GQA flash attention kernel over the "
        "KV cache, measured on this GPU: the value of every engine whose attention_mem_efficiency is None")
    attention_unsplit_efficiency: float = Field(
        1.0, ge=MIN_EFFICIENCY, le=1, description="achieved/datasheet HBM BW of torch's flash attention once it stops "
        "splitting the KV sequence (above the engine's attention_unsplit_items), measured on this GPU: the value of every "
        "engine whose attention_unsplit_efficiency is None")
    moe_mem_efficiency: float = Field(
        0.6, ge=MIN_EFFICIENCY, le=1, description="achieved/datasheet HBM BW of SGLang's fused MoE Triton kernel's weight "
        "stream at small widths, measured on this GPU: the value of every engine whose moe_mem_efficiency is None")
    moe_wide_tile_mem_efficiency: float = Field(
        0.566, ge=MIN_EFFICIENCY, le=1, description="the same for the bf16 default config's 64 x 64 x 32 tiles, measured on "
        "this GPU: the value of every engine whose moe_wide_tile_mem_efficiency is None")
    sources: dict[str, str] = Field(default_factory=dict)

    @field_validator("peak_flops")
    @classmethod
    def _has_bf16(cls, v: dict[str, float]) -> dict[str, float]:
        if "bf16" not in v:
            raise ValueError("peak_flops must include 'bf16'")
        if any(not 1e9 <= x <= 1e18 for x in v.values()):
            raise ValueError("peak_flops values must be in [1e9, 1e18] FLOP/s")
        return v


def _first(bad: dict, n: int = 3) -> str:
    """The first ``n`` offending entries of a mapping, for a one-line error."""
    items = list(bad.items())
    return str(dict(items[:n])) + (f" and {len(items) - n} more" if len(items) > n else "")


class AllReduce(AllReduceMethods, _Model):
    """An all-reduce implementation: t = alpha(tp) + bytes * 2(tp-1)/tp / bus(tp), up to its size limit;
    larger messages take ``fallback`` (a chain of at most three implementations). SGLang's and vLLM's
    custom all-reduce runs one-shot below 512 KiB at TP 4 (256 KiB at TP 6-8; any size at TP 2), two-shot
    up to 8 MiB, and hands larger messages to NCCL."""

    name: str
    alpha_us: dict[int, float] = Field(description="latency per all-reduce by TP size, microseconds")
    bus_bytes_per_s: float = Field(ge=MIN_RATE, le=1e14, description="bus bandwidth for the bandwidth term, bytes/s")
    bus_bytes_per_s_by_tp: dict[int, float] | None = Field(
        None, description="bus bandwidth at given TP sizes, bytes/s (other sizes: bus_bytes_per_s)")
    max_message_bytes: float | None = Field(
        None, gt=0, le=1e15, description="largest message this implementation takes, bytes; None: any size")
    max_message_bytes_by_tp: dict[int, float] | None = Field(
        None, description="largest message at given TP sizes, bytes (other sizes: max_message_bytes)")
    fallback: AllReduce | None = Field(None, description="the implementation messages above max_message_bytes take")
    sources: dict[str, str] = Field(default_factory=dict)

    @field_validator("alpha_us")
    @classmethod
    def _alpha_ok(cls, v: dict[int, float]) -> dict[int, float]:
        if not v or any(not 1 <= t <= 4096 for t in v) or any(not 0 <= a <= MAX_ALLREDUCE_ALPHA_US for a in v.values()):
            raise ValueError(f"alpha_us needs TP sizes in [1, 4096] with latencies in [0, {MAX_ALLREDUCE_ALPHA_US:g}] us")
        return v

    @field_validator("bus_bytes_per_s_by_tp")
    @classmethod
    def _bus_ok(cls, v: dict[int, float] | None) -> dict[int, float] | None:
        bad = {t: b for t, b in (v or {}).items() if not 1 <= t <= 4096 or not MIN_RATE <= b <= 1e14}
        if bad:
            raise ValueError(f"got {_first(bad)}; allowed: TP sizes in [1, 4096] with bandwidths in [{MIN_RATE:g}, 1e14] bytes/s")
        return v

    @field_validator("max_message_bytes_by_tp")
    @classmethod
    def _max_ok(cls, v: dict[int, float] | None) -> dict[int, float] | None:
        bad = {t: b for t, b in (v or {}).items() if not 1 <= t <= 4096 or not 0 < b <= 1e15}
        if bad:
            raise ValueError(f"got {_first(bad)}; allowed: TP sizes in [1, 4096] with limits in (0, 1e15] bytes")
        return v

    @model_validator(mode="after")
    def _chain_ok(self):
        depth, ar = 1, self.fallback
        while ar is not None:
            depth, ar = depth + 1, ar.fallback
        if depth > MAX_ALLREDUCE_CHAIN:
            raise ValueError(f"fallback: a chain of at most {MAX_ALLREDUCE_CHAIN} all-reduce implementations "
                             f"(this one has {depth})")
        return self


class Attention(_Model):
    kind: Literal["gqa", "mla"]
    num_heads: int = Field(ge=1, le=4096)
    num_kv_heads: int = Field(ge=1, le=4096)
    head_dim: int = Field(ge=1, le=4096, description="GQA head dim")
    # MLA (DeepSeek-V3 / Kimi-K2); ignored for GQA
    q_lora_rank: int | None = Field(None, ge=1, le=1_000_000)
    kv_lora_rank: int = Field(512, ge=1, le=1_000_000)
    qk_nope_head_dim: int = Field(128, ge=0, le=4096)
    qk_rope_head_dim: int = Field(64, ge=0, le=4096)
    v_head_dim: int = Field(128, ge=1, le=4096)


    @model_validator(mode="after")
    def _heads(self) -> Attention:
        if self.kind == "gqa" and self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads={self.num_heads} must be a multiple of num_kv_heads={self.num_kv_heads}")
        return self


class MoE(_Model):
    num_experts: int = Field(ge=1, le=65536)
    experts_per_token: int = Field(ge=1, le=65536)
    expert_intermediate: int = Field(ge=1, le=10_000_000)
    num_shared_experts: int = Field(0, ge=0, le=65536)
    shared_intermediate: int | None = Field(None, ge=1, le=10_000_000)
    fp8_scales: Literal["block", "tensor"] = Field(
        "block", description="how fp8 (or int8) expert weights are scaled: 128 x 128 blocks (DeepSeek-V3, Kimi-K2, "
        "Qwen3-FP8 checkpoints) or per tensor / channel; picks the engine's tuned table and its tiles' per-CTA numbers")
    routing_locality: float = Field(
        1.0, ge=0.0, le=1.0, description="rho (dimensionless): how independently one request's verify tokens pick "
        "their experts; its k tokens read the distinct experts of 1 + rho (k - 1) independent tokens (requests stay "
        "independent of each other). 1 (the prior): every token independent and uniform, the distinct-experts formula; "
        "0: a request's tokens all pick the same experts. Public counts on real text give 0.44-0.8 "
        "(models/notes/moe_routing_locality.md); routers with random weights, as in measured synthetic forwards, are 1")
    routing_skew: float | None = Field(
        None, ge=0.0, le=ROUTING_SKEW_MAX, description="c (dimensionless): the coefficient of variation of the "
        "router's per-expert token share within a layer; independent tokens (a batch's requests) then hit fewer "
        f"distinct experts than uniform routing (one token still reads k, many read all E). None: the prior, "
        f"{ROUTING_SKEW_PRIOR} from {PRIOR_MIN_EXPERTS} experts on (the median of public decode traces on real weights, "
        "calibration/datasets/moe-routing-skew.json), 0 for coarser routers (no public count); 0: uniform, as "
        "routers with random weights route in measured synthetic forwards and kernel benchmarks; `specsim routing` "
        "measures yours")

    @model_validator(mode="after")
    def _k_le_e(self) -> MoE:
        if self.experts_per_token > self.num_experts:
            raise ValueError("experts_per_token must be <= num_experts")
        hi = max_routing_skew(self.num_experts, self.experts_per_token)
        if self.routing_skew is not None and self.routing_skew > hi:
            raise ValueError(f"routing_skew={self.routing_skew:g} must be <= {hi:.3g} (sqrt((E - k) / k)) for "
                             f"{self.num_experts} experts, top-{self.experts_per_token}")
        return self


class WeightDtypes(_Model):
    attention: Dtype = "bf16"
    dense_mlp: Dtype = "bf16"
    shared_experts: Dtype = "bf16"
    routed_experts: Dtype = "bf16"
    embedding: Dtype = "bf16"
    lm_head: Dtype = "bf16"
    kv_cache: Dtype = "bf16"


class TargetModel(_Model):
    """Target (or draft) transformer architecture."""

    name: str
    num_layers: int = Field(ge=1, le=10_000)
    num_dense_layers: int = Field(0, ge=0, le=10_000, description="leading dense layers of a MoE model")
    hidden: int = Field(ge=1, le=1_000_000)
    intermediate: int = Field(ge=1, le=10_000_000, description="dense MLP intermediate size")
    vocab: int = Field(ge=1, le=100_000_000)
    attention: Attention
    moe: MoE | None = None
    dtypes: WeightDtypes = Field(default_factory=WeightDtypes)
    kernels_per_layer: int = Field(0, ge=0, le=1_000_000, description="kernel launches per layer; 0 = estimate from the architecture")
    architecture: str | None = Field(
        None, max_length=200, description="Hugging Face architecture (config.json architectures[0]): picks the "
        "engine's per-architecture kernels (engine.model_kernels)")
    sources: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _layers(self) -> TargetModel:
        if self.num_dense_layers > self.num_layers:
            raise ValueError("num_dense_layers must be <= num_layers")
        return self


class DraftModel(_Model):
    """An EAGLE-3 head: one decoder layer, fc fusing 3 target hidden states, its own lm_head."""

    name: str
    num_layers: int = Field(1, ge=1, le=10_000)
    hidden: int = Field(ge=1, le=1_000_000)
    intermediate: int = Field(ge=1, le=10_000_000)
    num_heads: int = Field(ge=1, le=4096)
    num_kv_heads: int = Field(ge=1, le=4096)
    head_dim: int = Field(ge=1, le=4096)
    draft_vocab: int = Field(ge=1, le=100_000_000, description="rows of the head's own lm_head (EAGLE-3: a reduced draft vocab)")
    lm_head: Literal["own", "target"] = Field(
        "own", description="'own': the head's draft_vocab lm_head; 'target': the target's full lm_head (MTP/NextN style)"
    )
    fuse_hidden_states: int = Field(3, ge=1, le=1024, description="target hidden states concatenated by the fc")
    dtype: Dtype = "bf16"
    kernels_per_layer: int = Field(0, ge=0, le=1_000_000)
    training_samples: float | None = Field(
        None, ge=1, le=MAX_SAMPLES, description="training samples (conversations) the head was trained on; None = not known"
    )
    training_data: str = Field("", description="what the head was trained on (datasets, regenerated or not)")
    sources: dict[str, str] = Field(default_factory=dict)


class ModelKernels(_Model):
    """What an engine's code for one model architecture launches per layer beyond the engine's defaults."""

    qk_norm: int = Field(0, ge=0, le=100, description="RMSNorm kernels over the q and k heads (Qwen3: q_norm, k_norm)")
    kv_store: int | None = Field(
        None, ge=0, le=100, description="kernels writing a layer's new K/V into the cache, in place of the engine's "
        "(0: fused into the rotary kernel)")
    attention_aux: int | None = Field(
        None, ge=0, le=100, description="kernels of the decode attention backend beside its main kernel, in place of "
        "the engine's (the backend the engine picks for this architecture)")
    attention_copies: int = Field(0, ge=0, le=100, description="copy / cat / expand kernels of the attention block")
    router_topk: int | None = Field(
        None, ge=0, le=100, description="kernels of the router's top-k selection, in place of the engine's")
    router_topk_us: float | None = Field(
        None, ge=0, le=1e4, description="measured GPU time of one call of the router's top-k in a CUDA graph (its "
        "kernels and their node gaps), us; None: its kernels at the engine's small-kernel floor")
    shared_expert_fusion: Literal["never", "always", "256_experts"] = Field(
        "never", description="whether the shared expert runs inside the routed-expert kernel (then no activation and "
        "no add of its own): never, always, or only with 256 routed experts")
    source: str = ""


class Engine(EngineMethods, _Model):
    """Serving-engine behaviour that decides fixed per-forward and per-cycle costs."""

    name: str = "sglang"
    graph_decode: bool = Field(True, description="baseline decode replays a CUDA graph")
    graph_verify: bool = Field(True, description="target verify replays a CUDA graph")
    graph_draft: bool = Field(True, description="draft steps replay one CUDA graph")
    graph_draft_extend: bool = Field(True, description="draft-extend replays a CUDA graph")
    graph_fixed_us: float = Field(15.4, ge=0, le=1e6, description="fixed cost of one graph replay (launch + sync)")
    graph_node_us: float | None = Field(None, ge=0, le=1e6, description="GPU-side gap per kernel: a captured node's replay "
                                       "cost, and the gap between queued eager kernels; None: the GPU's measured value")
    eager_launch_us: float = Field(9.0, ge=0, le=1e6, description="host launch cost per eagerly launched kernel")
    eager_dispatch_us: float = Field(
        0.0, ge=0, le=1e6,
        description="host time per eagerly issued kernel of a model forward beyond the bare launch (the engine's Python "
                    "module stack, view and reshape ops, argument handling)")
    multi_token_kernels_per_layer: int = Field(
        0, ge=0, le=1_000_000, description="extra kernels per layer on the multi-token (verify/extend) path vs 1-token decode"
    )
    multi_token_extra_us_per_layer: float = Field(
        0.0, ge=0, le=1e6, description="extra GPU time per layer of the multi-token (verify/extend) kernels vs the 1-token decode path"
    )
    sample_kernels: int = Field(12, ge=0, le=1_000_000, description="eager kernels of accept/sample and tree build per cycle")
    host_sync_us: float = Field(30.0, ge=0, le=1e6, description="GPU->CPU sync round trip (.tolist()/.item())")
    host_syncs_per_cycle: int = Field(3, ge=0, le=100, description="GPU->CPU syncs per spec cycle not hidden by overlap")
    draft_preprocess_kernels: int = Field(2, ge=0, le=1000, description="eager kernels before the draft (KV slot assignment)")
    decode_sample_kernels: int = Field(4, ge=0, le=1000, description="eager sampling kernels per plain decode step")
    host_per_cycle_ms: float = Field(0.6, ge=0, le=1e4, description="scheduler + Python bookkeeping per spec cycle")
    host_per_token_us: float = Field(10.0, ge=0, le=1e6, description="Python per committed token per request")
    host_per_request_us: float = Field(
        0.0, ge=0, le=1e6, description="host work per request per spec cycle (batch assembly, tree/mask inputs, accept loop)")
    host_per_request_decode_us: float = Field(
        0.0, ge=0, le=1e6, description="host work per request per plain decode iteration")
    host_per_decode_step_ms: float = Field(0.6, ge=0, le=1e4, description="scheduler + bookkeeping per decode iteration")
    stop_check_us: float = Field(
        0.0, ge=0, le=1e6, description="extra host us per finish check when a request carries stop strings "
        "(the engine decodes the output tail to look for them); spec: one check per committed token plus one "
        "per request per cycle, plain decode: one per request per step")
    tree_plan_us: float = Field(
        0.0, ge=0, le=1e6, description="host us of one attention-backend plan call of a tree cycle (topk > 1) on a "
        "model without MLA: SGLang on Hopper runs such trees on FlashInfer, which plans on the host before each of "
        "the steps - 1 draft steps, the verify and the draft extend (steps + 1 plans per cycle); chains and MLA run FA3")
    tree_verify_plan_extra_us: float = Field(
        0.0, ge=0, le=1e6, description="host us the tree verify's plan (FlashInfer's prefill plan with the packed "
        "custom mask: segment_packbits and its copies) costs over tree_plan_us, once per tree cycle on that path")
    tree_plan_us_per_request: float = Field(
        0.0, ge=0, le=1e4, description="host us per request per tree cycle on that path that the prefill plans "
        "(verify and draft extend) add: FlashInfer's plan() takes the longest query and KV length with Python's "
        "max() over the per-request tensors")
    tree_mask_attention_slowdown: float = Field(
        1.0, ge=1.0, le=100.0, description="a tree verify's attention on that path over the causal kernel's: its KV "
        "streaming time (and, without tree_attention_fa2_custom_mask, its compute time) times this")
    tree_attention_fa2_custom_mask: bool = Field(
        False, description="that path verifies trees with FlashInfer's FA2 prefill and a bit-packed custom mask "
        "(SGLang on Hopper for models without MLA): query rows pad to FA2's CTA tile (16, 64 or 128 packed rows), "
        "the kernel computes at tree_mask_attention_flop_efficiency of the dense bf16 peak and pays "
        "tree_mask_attention_us_per_tile_row x tile per call over the causal kernel's fixed time")
    tree_mask_attention_flop_efficiency: float = Field(
        1.0, gt=0.0, le=1.0, description="fraction of the dense bf16 peak the FA2 custom-mask kernel reaches over its "
        "padded query rows (with tree_attention_fa2_custom_mask)")
    tree_mask_attention_us_per_tile_row: float = Field(
        0.0, ge=0, le=100.0, description="extra us per call per row of FA2's CTA query tile (a CTA's serial KV loop "
        "grows with its tile: what a small batch waits for)")
    verify_batch_expansion: bool = Field(
        False, description="the verify scores each request's num_draft_tokens rows as that many single-token sequences "
        "(vLLM V0's batch-expansion scorer, used whenever CUDA graphs are on): decode attention kernels, each row "
        "reading the request's whole KV cache, instead of one multi-token query over it")
    chains_only: bool = Field(
        False, description="the engine verifies chains only (topk = 1): a tree (topk > 1) is modeled but warned about")
    host_expansion_us_per_row_token: float = Field(
        0.0, ge=0, le=1e3, description="host us per expanded verify row per context token (batch expansion copies "
        "each row's token ids into a new sequence): batch x num_draft_tokens x ctx of them per cycle")
    tree_host_syncs_per_cycle: int = Field(
        0, ge=0, le=100, description="extra GPU->CPU syncs per tree cycle on that path (FlashInfer plan inputs copied "
        "to the host), host_sync_us each, not hidden by overlap")
    overlap_scheduler: bool = Field(False, description="spec cycles: host work overlaps the GPU (SGLang spec v2)")
    overlap_scheduler_baseline: bool = Field(True, description="plain decode: host work overlaps the GPU")
    continuous_decode_steps: int = Field(1, ge=1, le=4096, description="decode steps run per scheduler iteration")
    moe_kernel: Literal["fused", "per_token"] = "fused"
    per_token_traffic_factor: float = Field(
        1.0, ge=1.0, le=100.0, description="weight traffic per token-expert of a gathered kernel (3 = copy read+write, then GEMM read)"
    )
    small_kernel_factor: float = Field(1.0, ge=0.01, le=100.0, description="elementwise kernels per fused small kernel (unfused eager ~3)")
    small_kernel_floor_us: float | None = Field(
        None, ge=0, le=1e4, description="GPU time of one of the engine's small memory-bound kernels (norm, rotary, "
        "activation, routing, copy) beyond its launch and its bytes, us; None: the GPU's kernel_floor_us")
    norm_kernels_per_layer: int = Field(
        2, ge=0, le=100, description="RMSNorm kernels per decoder layer (input and post-attention; a fused residual "
        "add + norm counts one)")
    residual_add_kernels: int = Field(0, ge=0, le=100, description="residual-add kernels per layer not fused into a norm")
    kv_store_kernels: int = Field(1, ge=0, le=100, description="kernels writing one layer's new K and V into the cache")
    attention_aux_kernels: int = Field(
        0, ge=0, le=100, description="kernels the decode attention backend launches per layer beside its main kernel "
        "(FA3 split-KV under CUDA graphs: prepare + combine; FlashInfer partition-KV: merge)")
    moe_align_kernels: int = Field(2, ge=0, le=100, description="kernels sorting the routed (token, expert) pairs "
                                   "into expert blocks per MoE layer")
    router_topk_kernels: int = Field(1, ge=0, le=100, description="kernels of the router's top-k per MoE layer "
                                     "(a fused softmax / sigmoid top-k kernel)")
    shared_glue_kernels: int = Field(
        2, ge=0, le=100, description="small kernels of a shared expert the engine does not fuse into the routed "
        "kernel (its activation and the add of its output)")
    mla_misc_kernels: int = Field(0, ge=0, le=100, description="further small kernels per MLA attention layer")
    moe_combine_kernels: int = Field(1, ge=0, le=100, description="kernels summing the top-k expert outputs per MoE layer")
    moe_norm_kernels: int = Field(
        0, ge=0, le=100, description="further kernels over the n x hidden activations per MoE layer (unfused torch "
        "routing and weighting of the expert outputs)")
    moe_int4_glue_kernels: int = Field(
        0, ge=0, le=100, description="extra small kernels per MoE layer of the W4A16 (int4) expert path")
    act_quant_kernels: int = Field(
        0, ge=0, le=100, description="activation-quantisation kernels per fp8 / int8 GEMM")
    model_kernels: dict[Annotated[str, StringConstraints(max_length=200)], ModelKernels] = Field(
        default_factory=dict, max_length=64, description="per Hugging Face architecture (target.architecture): what the engine's "
        "code for it launches beyond the defaults")
    fused_projections: bool = Field(True, description="qkv and gate_up run as one GEMM each")
    mla_absorbed: bool = Field(True, description="MLA attention over the latent cache (SGLang); False: per-head K/V")
    moe_mem_efficiency: float | None = Field(
        None, ge=MIN_EFFICIENCY, le=1, description="achieved/datasheet HBM BW of routed-expert GEMMs at small widths; None: "
                                                   "the GPU's measured value (SGLang's fused MoE Triton kernel)")
    moe_tiles: Literal["none", "sglang-triton", "vllm-triton"] = Field(
        "none", description="how the routed-expert GEMM is tiled: 'sglang-triton' - SGLang's fused MoE Triton kernel with "
        "its config rule (a tuned table, else get_default_config) and its CTA grid, launched for the worst-case padding; "
        "'vllm-triton' - the same kernel and rule, the grid clamped below BLOCK_M tokens as vLLM launches it; 'none' - "
        "weight bytes at moe_mem_efficiency only (bf16, fp8 and int8 experts take the grid; int4 and fp4 never)")
    moe_config: Literal["tuned", "default"] = Field(
        "tuned", description="with moe_tiles 'sglang-triton': whether the engine has a tuned config table for this "
        "model's experts, TP and GPU (the scenario builder looks it up) or runs get_default_config")
    moe_fp8_block_scales: bool = Field(
        True, description="with moe_tiles: fp8 / int8 experts carry block-wise scales (128 x 128; the K loop loads them, "
        "so a CTA streams at moe_cta_bytes_per_s_fp8), else per-tensor or per-channel ones (it streams as bf16 tiles do); "
        "the scenario builder sets it from the model's target.moe.fp8_scales")
    moe_wide_tile_mem_efficiency: float | None = Field(
        None, ge=MIN_EFFICIENCY, le=1, description="achieved/datasheet HBM BW of the bf16 default config's 64 x 64 x 32 tiles "
        "(SGLang get_default_config above tokens = experts), in place of moe_mem_efficiency; None: the GPU's measured value")
    moe_mem_efficiency_int4: float | None = Field(
        None, ge=MIN_EFFICIENCY, le=1, description="the same for routed experts stored as INT4 (W4A16 kernels): a preset prior the "
        "scenario builder puts in moe_mem_efficiency when the model's routed experts are int4")
    attention_kv_reads: Literal["per_kv_head", "per_q_head", "per_q_head_multi_token"] = Field(
        "per_kv_head", description="how often attention reads each KV head: once (GQA packed), once per query head "
                                   "(repeat_kv / unpacked), or per query head only for multi-token forwards")
    attention_unsplit_items: float = Field(
        1e9, gt=0, le=1e9, description="(request x KV head) work items above which the attention kernel stops splitting "
                                       "the KV sequence across SMs (torch/FA2 heuristic); 1e9: never (balanced schedulers)")
    attention_unsplit_efficiency: float | None = Field(
        None, ge=MIN_EFFICIENCY, le=1, description="achieved/datasheet HBM BW of attention above attention_unsplit_items; "
                                                   "None: the GPU's measured value (torch's flash kernel)")
    static_cache_headroom_tokens: int = Field(
        0, ge=0, le=10_000_000, description="a static KV cache preallocated this far past the context; attention reads all of it")
    attention_flop_efficiency: float = Field(
        0.75, ge=MIN_EFFICIENCY, le=1, description="achieved/peak FLOP/s of the attention kernels once compute-bound (FA3 ~0.75, FA2 ~0.35)")
    attention_mem_efficiency: float | None = Field(
        None, ge=MIN_EFFICIENCY, le=1, description="achieved/datasheet HBM BW of attention over the KV cache; None: the GPU's "
                                                   "measured value (a packed-GQA flash kernel)")
    max_running_requests: int | None = Field(
        None, **bounds("Engine.max_running_requests"), description="requests the scheduler runs at once, speculation on or off (SGLang "
                                               "--max-running-requests, vLLM max_num_seqs); the rest wait in the queue; "
                                               "None: no cap below the batch")
    spec_max_running_requests: int | None = Field(
        None, ge=1, le=10_000_000, description="the cap with speculation on when max_running_requests is not set (SGLang "
                                               "resets it to 48 for EAGLE); None: no cap below the batch")
    kv_memory_rule: Literal["sglang", "vllm"] | None = Field(
        None, description="how the engine sizes its KV-cache pool at start-up, which bounds the requests it runs at "
                          "once (physics.memory); None: no pool model (a static cache sized to the batch)")
    kv_memory_fraction: float | None = Field(
        None, **bounds("Engine.kv_memory_fraction"), description="the launch's share of GPU memory for weights and KV cache (SGLang "
                                      "--mem-fraction-static, vLLM --gpu-memory-utilization); None: the engine's default")
    kv_reserve_bytes: float = Field(
        0.0, ge=0, le=1e13, description="memory per GPU the pool rule leaves out besides its share: SGLang's CUDA context "
                                        "before the weights load; vLLM's profile-run peak (activations, sampler, "
                                        "non-torch memory)")
    kv_reserve_fraction: float = Field(
        0.0, ge=0, le=0.5, description="memory the pool rule leaves out in proportion to the GPU's memory, added to "
                                       "kv_reserve_bytes (vLLM's profile run scales its token budget with the GPU class)")
    kv_pool_tokens: int | None = Field(
        None, **bounds("Engine.kv_pool_tokens"), description="tokens of KV cache per GPU as the launch's log gives them "
                                                             "(SGLang max_total_num_tokens, vLLM 'GPU KV cache size'), "
                                                             "in place of the modeled pool; None: modeled")
    capture_batch_sizes: list[int] = Field(
        default_factory=lambda: list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8)),
        description="captured graph batch sizes; batches pad up to the next one",
    )
    capture_token_sizes: list[int] | None = Field(
        None, description="vLLM-style capture by total tokens: a replay pads batch x width up to the next size"
    )
    sources: dict[str, str] = Field(default_factory=dict)

    @field_validator("capture_batch_sizes", "capture_token_sizes")
    @classmethod
    def _sizes(cls, v: list[int] | None) -> list[int] | None:
        lo, hi = CAPTURE_SIZES
        if v is not None and any(not lo <= x <= hi for x in v):
            raise ValueError(f"capture sizes must be integers in [{lo}, {hi}]")
        return v


class Parallel(_Model):
    tp: int = Field(1, **bounds("Parallel.tp"), description="tensor-parallel size")
    allreduce: AllReduce
    allreduce_eager: AllReduce | None = Field(
        None, description="all-reduce path taken by eager (non-graph) forwards; None = same as allreduce"
    )
    allreduce_scale: float = Field(1.0, ge=1e-6, le=1e6, description="multiplier on all-reduce latency (what-if knob)")
    allreduces_per_layer: int = Field(2, ge=0, le=1024)


class Speculation(_Model):
    steps: int = Field(2, **bounds("Speculation.steps"))
    topk: int = Field(1, **bounds("Speculation.topk"))
    num_draft_tokens: int | None = Field(None, **bounds("Speculation.num_draft_tokens"), description="verify width; topk=1 forces steps+1")

    @model_validator(mode="after")
    def _sglang_rule(self) -> Speculation:
        d = draft_tokens_for(self.steps, self.topk, self.num_draft_tokens)
        if d is None:
            raise ValueError(
                f"num_draft_tokens={self.num_draft_tokens} exceeds the candidate pool topk+(steps-1)*topk^2+1"
            )
        object.__setattr__(self, "num_draft_tokens", d)
        return self


class Acceptance(_Model):
    """Exactly one of accept_length, rates or pmf (conditional rates are the canonical form)."""

    accept_length: float | None = Field(None, **bounds("Acceptance.accept_length"), description="tau at the scenario's steps, bonus included")
    rates: list[float] | None = Field(None, description="conditional acceptance per draft position 1..")
    pmf: list[float] | None = Field(None, description="P(accepted length = 1..steps+1)")
    shape_rates: list[float] | None = Field(
        None, description="with accept_length: a profile whose decay with depth is kept when scaling to tau"
    )
    source: str = ""

    @model_validator(mode="after")
    def _one(self) -> Acceptance:
        problem = acceptance_problem(self.accept_length, self.rates, self.pmf, self.shape_rates)
        if problem:
            raise ValueError(problem)
        return self


class Workload(_Model):
    batch: int = Field(1, **bounds("Workload.batch"), description="concurrent requests")
    ctx: int = Field(2048, **bounds("Workload.ctx"), description="context length (KV tokens) per request")
    stop_strings: bool = Field(
        False, description="requests carry stop strings (SGLang frontend programs add their chat template's, "
        "e.g. <|eot_id|>); the engine then pays stop_check_us per finish check")


def _short(x: object, n: int = 60) -> str:
    """``repr(x)`` cut to ``n`` characters, for one-line errors about free-form blocks."""
    r = repr(x)
    return r if len(r) <= n else r[: n - 3] + "..."


def _check_object(where: str, x: object, allowed: str) -> None:
    if not isinstance(x, dict):
        raise ValueError(f"{where}={_short(x)}: allowed: {allowed}")


def _check_list(where: str, x: object, allowed: str) -> None:
    if not isinstance(x, list):
        raise ValueError(f"{where}={_short(x)}: allowed: {allowed}")


def _check_points(where: str, pts: object) -> None:
    """A list of measured verify points: objects with a whole ``tokens`` >= 1 and a finite ``ms`` > 0."""
    _check_list(where, pts, "a list of {tokens, ms} points")
    for i, pt in enumerate(pts):
        _check_object(f"{where}[{i}]", pt, "an object with tokens and ms")
        t, ms = pt.get("tokens"), pt.get("ms")
        if type(t) is not int or t < 1:
            raise ValueError(f"{where}[{i}].tokens={_short(t)}: allowed: a whole number >= 1")
        if not finite_number(ms) or ms <= 0:
            raise ValueError(f"{where}[{i}].ms={_short(ms)}: allowed: a finite number > 0")


class Scenario(_Model):
    """One complete, self-describing question: hardware, model, engine, speculation, workload."""

    name: str = "custom"
    description: str = ""
    gpu: GPU
    parallel: Parallel
    target: TargetModel
    draft: DraftModel
    engine: Engine = Field(default_factory=Engine)
    speculation: Speculation = Field(default_factory=Speculation)
    acceptance: Acceptance
    workload: Workload = Field(default_factory=Workload)
    provenance: dict[str, object] = Field(default_factory=dict, description="where this scenario comes from")
    calibration: dict[str, object] | None = Field(None, description="fitted parameters, covariance, points")
    notes: list[str] = Field(default_factory=list, description="what was adjusted or assumed when this scenario was built")

    @field_validator("provenance")
    @classmethod
    def _provenance_is_a_record(cls, v: dict) -> dict:
        """The provenance keys that commands read have their shape: ``measured`` (shown beside the model) maps
        names to finite numbers, text or null; ``assumptions`` is a list of text; ``fitted_parameters`` and
        ``fit_checks`` map names to objects; ``verify_points`` lists {tokens, ms} points. Other keys are free."""
        m = v.get("measured")
        if m is not None:
            _check_object("provenance.measured", m, "an object of named measurements")
            for k, x in m.items():
                ok = x is None or isinstance(x, str) or finite_number(x)
                if not ok:
                    raise ValueError(f"provenance.measured.{k}={_short(x)}: allowed: a finite number, text or null")
        if v.get("assumptions") is not None:
            _check_list("provenance.assumptions", v["assumptions"], "a list of text")
            for i, a in enumerate(v["assumptions"]):
                if not isinstance(a, str):
                    raise ValueError(f"provenance.assumptions[{i}]={_short(a)}: allowed: text")
        for key in ("fitted_parameters", "fit_checks"):
            if v.get(key) is not None:
                _check_object(f"provenance.{key}", v[key], "an object of named objects")
                for k, x in v[key].items():
                    _check_object(f"provenance.{key}.{k}", x, "an object")
        if v.get("verify_points") is not None:
            _check_points("provenance.verify_points", v["verify_points"])
        return v

    @field_validator("calibration")
    @classmethod
    def _calibration_is_a_fit(cls, v: dict | None) -> dict | None:
        """What ``specsim calibrate`` writes, in its shape: ``parameters`` maps names to objects with a finite
        ``value``; ``cov_log`` is a square matrix of finite numbers, one row per parameter; ``points`` lists the
        measured {tokens, ms}; ``residuals`` lists objects whose ``error_pct`` is finite; ``warnings`` is text."""
        if v is None:
            return v
        params = v.get("parameters")
        if params is not None:
            _check_object("calibration.parameters", params, "an object of fitted parameters")
            for k, x in params.items():
                _check_object(f"calibration.parameters.{k}", x, "an object with a finite value")
                if not finite_number(x.get("value")):
                    raise ValueError(f"calibration.parameters.{k}.value={_short(x.get('value'))}: allowed: a finite number")
        cov = v.get("cov_log")
        if cov is not None:
            n = len(params or {})
            ok = (isinstance(cov, list) and len(cov) == n
                  and all(isinstance(r, list) and len(r) == n and all(finite_number(c) for c in r) for r in cov))
            if not ok:
                raise ValueError(f"calibration.cov_log={_short(cov)}: allowed: a {n} x {n} matrix of finite numbers "
                                 "(one row and column per calibration.parameters entry)")
        if v.get("points") is not None:
            _check_points("calibration.points", v["points"])
        if v.get("residuals") is not None:
            _check_list("calibration.residuals", v["residuals"], "a list of objects")
            for i, r in enumerate(v["residuals"]):
                _check_object(f"calibration.residuals[{i}]", r, "an object")
                for key in ("ms", "model_ms", "error_pct"):
                    if key in r and not finite_number(r[key]):
                        raise ValueError(f"calibration.residuals[{i}].{key}={_short(r[key])}: allowed: a finite number")
                if "error_pct" not in r:
                    raise ValueError(f"calibration.residuals[{i}]: error_pct is missing (allowed: a finite number)")
        if v.get("warnings") is not None:
            _check_list("calibration.warnings", v["warnings"], "a list of text")
            if not all(isinstance(w, str) for w in v["warnings"]):
                raise ValueError("calibration.warnings: allowed: a list of text")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        problem = scenario_problem(self.parallel.tp, self.target.attention.num_heads, self.draft.num_heads,
                                   self.acceptance.accept_length, self.speculation.steps)
        if problem:
            raise ValueError(problem)
        return self


def field_range(model: type, field: str) -> tuple[float | None, float | None]:
    """The (lower, upper) bounds a schema field declares (ge/gt, le/lt): the one place ranges live.

    Flag parsers and sweeps read their bounds from here, so a range is declared once, in the schema.
    """
    lo = hi = None
    for m in model.model_fields[field].metadata:
        for attr in ("ge", "gt"):
            if getattr(m, attr, None) is not None:
                lo = getattr(m, attr)
        for attr in ("le", "lt"):
            if getattr(m, attr, None) is not None:
                hi = getattr(m, attr)
    return lo, hi


def check_field(model: type, field: str, value, flag: str | None = None):
    """Refuse ``value`` outside the schema's range for ``model.field`` with the one-line error, naming ``flag``."""
    return check_range(*field_range(model, field), value, flag or field)


def schema_defaults() -> dict[str, dict]:
    """Every model's fields that have a default, with it (as ``model_dump()`` gives it): the table
    :mod:`specsim.physics.defaults` holds for the pydantic-free path."""
    out: dict[str, dict] = {}
    for model in (Scenario, GPU, AllReduce, Attention, MoE, WeightDtypes, TargetModel, DraftModel, ModelKernels, Engine,
                  Parallel, Speculation, Acceptance, Workload):
        fields = {}
        for name, f in model.model_fields.items():
            if f.is_required():
                continue
            v = f.default_factory() if f.default_factory is not None else f.default
            if isinstance(v, BaseModel):  # a nested model at its own defaults: {} (records complete it from its own row)
                v = {} if v == type(v)() else v.model_dump()
            fields[name] = v
        out[model.__name__] = fields
    return out
