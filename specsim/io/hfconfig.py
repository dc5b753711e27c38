"""Read a Hugging Face ``config.json`` into a target architecture and a matching EAGLE-3 head.

Accepts configs as transformers 4 and 5 write them:

* multimodal wrappers (Kimi-K2.5, Qwen-VL, Llama-4 style) keep the language model in
  ``text_config``; it is used when the top level is not itself a supported text model;
* renamed keys: the routed-expert count as ``num_experts`` / ``num_local_experts`` /
  ``n_routed_experts`` whatever the model_type; ``rope_parameters`` (transformers 5) or
  ``rope_theta`` / ``rope_scaling`` (transformers 4) are both fine (RoPE does not enter the
  cost model); ``dtype`` or ``torch_dtype``.

Every number is checked at this boundary, naming the config key: integers must be JSON
integers (no ``true``, no ``127.9``, no strings), finite and within a physical range; the
hidden size must split evenly over the heads unless ``head_dim`` is given; the KV heads must
divide the heads.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SpecsimError
from ..physics.schema import Attention, DraftModel, MoE, TargetModel, WeightDtypes

SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "deepseek_v3", "kimi_k2")
MAX_CONFIG_BYTES = 16 * 1024 * 1024

# key -> (lowest, highest) allowed value
_RANGES: dict[str, tuple[int, int]] = {
    "hidden_size": (1, 1_000_000),
    "num_hidden_layers": (1, 10_000),
    "num_attention_heads": (1, 4096),
    "num_key_value_heads": (1, 4096),
    "head_dim": (1, 4096),
    "vocab_size": (1, 100_000_000),
    "intermediate_size": (1, 10_000_000),
    "moe_intermediate_size": (1, 10_000_000),
    "shared_expert_intermediate_size": (0, 10_000_000),
    "num_experts": (1, 65536),
    "num_local_experts": (1, 65536),
    "n_routed_experts": (1, 65536),
    "num_experts_per_tok": (1, 65536),
    "n_shared_experts": (0, 65536),
    "first_k_dense_replace": (0, 10_000),
    "q_lora_rank": (1, 1_000_000),
    "kv_lora_rank": (1, 1_000_000),
    "qk_nope_head_dim": (0, 4096),
    "qk_rope_head_dim": (0, 4096),
    "v_head_dim": (1, 4096),
    "decoder_sparse_step": (1, 10_000),
}
_EXPERT_KEYS = ("n_routed_experts", "num_experts", "num_local_experts")
DENSE_MODEL_TYPES = ("llama", "qwen2", "qwen3")
MLA_MODEL_TYPES = ("deepseek_v3", "kimi_k2")
#: architectures[0] of the supported model types' checkpoints -> the model_type it is (read when model_type is absent,
#: and checked against it: a MoE architecture under a dense model_type is refused, not modeled dense)
ARCHITECTURE_TYPES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3",
                      "Qwen3MoeForCausalLM": "qwen3_moe", "MixtralForCausalLM": "mixtral",
                      "DeepseekV3ForCausalLM": "deepseek_v3"}
#: torch dtype of an unquantised checkpoint (``dtype``, ``torch_dtype``) -> the dtype the engine serves it in: float32
#: checkpoints run as float16 under SGLang's and vLLM's ``--dtype auto`` (``_get_and_verify_dtype``: "use float16 for
#: float32 models"); ``auto`` says nothing (bf16 assumed)
TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp16", "float": "fp16",
                "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "auto": "bf16"}


def _family(model_type: str) -> str:
    """dense, MoE or MLA MoE: what a model_type's config is read as."""
    return "dense" if model_type in DENSE_MODEL_TYPES else "MLA MoE" if model_type in MLA_MODEL_TYPES else "MoE"


def expected_model() -> str:
    """What ``--model`` takes, for error lines."""
    from .packagedata import model_names

    return (f"expected a Hugging Face config.json (or the folder holding one) or a model preset: "
            f"{', '.join(model_names())}")


def _read(path: Path) -> tuple[dict, Path]:
    from .safe_read import read_json_file

    given = str(path)
    if path.is_dir():
        path = path / "config.json"
        if not path.exists() and not path.is_symlink():
            raise SpecsimError("model", given, f"a folder without a config.json; {expected_model()}")
    if not path.exists() and not path.is_symlink():
        raise SpecsimError("model", given, f"no such file or model preset; {expected_model()}")
    try:
        cfg = read_json_file(path, "model", MAX_CONFIG_BYTES)
    except SpecsimError as exc:  # binary, empty, not JSON, too large, a device: say what the file should have been
        if exc.field != "model":  # a value inside the JSON (a key, a non-finite number): its own line names it
            raise
        raise SpecsimError("model", given, f"{exc.allowed}; {expected_model()}") from None
    if not isinstance(cfg, dict):
        raise SpecsimError("model", given, f"holds JSON {type(cfg).__name__.replace('NoneType', 'null')}, not an object; "
                           f"{expected_model()}")
    # multimodal wrappers (Kimi-K2.5, Qwen-VL) keep the language model in text_config
    tc = cfg.get("text_config")
    if isinstance(tc, dict) and (cfg.get("model_type") not in SUPPORTED_MODEL_TYPES or "hidden_size" not in cfg):
        merged = dict(tc)
        if not merged.get("quantization_config"):
            merged["quantization_config"] = cfg.get("quantization_config")
        if merged.get("model_type") not in SUPPORTED_MODEL_TYPES and cfg.get("model_type") in SUPPORTED_MODEL_TYPES:
            merged["model_type"] = cfg["model_type"]
        cfg = merged
    return cfg, path


def _is_fp8(q: dict) -> bool:
    """A quantization_config of fp8 weights."""
    return str(q.get("quant_method", "")).lower() == "fp8" or q.get("fmt") == "e4m3"


def _fp8_scales(cfg: dict) -> str | None:
    """An fp8 checkpoint's weight scaling from its quantization_config: ``block`` where it gives a
    ``weight_block_size`` (DeepSeek-V3 style), ``tensor`` otherwise; None for other checkpoints."""
    q = cfg.get("quantization_config") or {}
    if not isinstance(q, dict) or not _is_fp8(q):
        return None
    return "block" if isinstance(q.get("weight_block_size"), list) and q["weight_block_size"] else "tensor"


def _base_dtype(cfg: dict, field) -> str:
    """The dtype the engine serves an unquantised checkpoint's weights in, from its ``dtype`` (transformers 5) or
    ``torch_dtype``: see :data:`TORCH_DTYPES`; bf16 where neither is given."""
    seen = {}
    for key in ("dtype", "torch_dtype"):
        v = cfg.get(key)
        if v is None:
            continue
        name = v.removeprefix("torch.") if isinstance(v, str) else None
        if name not in TORCH_DTYPES:
            raise SpecsimError(field(key), v, f"allowed: one of {', '.join(TORCH_DTYPES)}")
        seen[key] = TORCH_DTYPES[name]
    if len(set(seen.values())) > 1:
        raise SpecsimError(field("dtype"), cfg["dtype"], f"contradicts torch_dtype {cfg['torch_dtype']!r}; give one")
    return next(iter(seen.values()), "bf16")


def _dtypes(cfg: dict, is_moe: bool, base: str = "bf16") -> WeightDtypes:
    """The weights' dtypes: the quantization_config's where it has one specsim reads, ``base`` (the checkpoint's
    serving dtype) for every part it leaves unquantised, the KV cache included (the engines' ``auto``)."""
    plain = {k: base for k in WeightDtypes.model_fields}
    q = cfg.get("quantization_config") or {}
    if not isinstance(q, dict):
        return WeightDtypes(**plain)
    method = str(q.get("quant_method", "")).lower()
    if _is_fp8(q):
        return WeightDtypes(**{**plain, "attention": "fp8", "dense_mlp": "fp8", "shared_experts": "fp8",
                               "routed_experts": "fp8"})
    if method in ("compressed-tensors", "awq", "gptq", "marlin"):
        bits = q.get("bits") or q.get("w_bit")
        groups = q.get("config_groups") or {}
        for group in (groups.values() if isinstance(groups, dict) else []):
            if isinstance(group, dict) and isinstance(group.get("weights"), dict):
                bits = bits or group["weights"].get("num_bits")
        if bits == 4 and not isinstance(bits, bool):
            ignore_list = q.get("ignore") or []
            ignore = " ".join(str(x) for x in ignore_list) if isinstance(ignore_list, list) else ""
            attn = base if "self_attn" in ignore or not ignore else "int4"
            shared = base if "shared_expert" in ignore else "int4"
            return WeightDtypes(**{**plain, "attention": attn, "dense_mlp": attn, "shared_experts": shared,
                                   "routed_experts": "int4"})
        if bits == 8 and not isinstance(bits, bool):
            return WeightDtypes(**{**plain, "attention": "int8", "dense_mlp": "int8", "shared_experts": "int8",
                                   "routed_experts": "int8"})
    return WeightDtypes(**plain)


class _Cfg:
    """Typed access to a config dict; every error names the key."""

    def __init__(self, cfg: dict, path: Path):
        self.cfg, self.path = cfg, path
        self.mt = cfg.get("model_type")

    def _field(self, key: str) -> str:
        return f"model {self.path.name}: {key}"

    def int(self, key: str, default: int | None = None, *, required: bool = False, zero_is_none: bool = False):
        v = self.cfg.get(key)
        if v is None or (zero_is_none and v == 0 and not isinstance(v, bool)):
            if required:
                raise SpecsimError(self._field(key), None,
                                   f"missing; config.json needs '{key}' for model_type {self.mt!r}", show_value=False)
            return default
        lo, hi = _RANGES.get(key, (0, 10**9))
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise SpecsimError(self._field(key), v, f"allowed: an integer in [{lo}, {hi}]")
        if isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                raise SpecsimError(self._field(key), v, "allowed: a finite integer")
            if not v.is_integer():
                raise SpecsimError(self._field(key), v, f"allowed: an integer in [{lo}, {hi}] (no fractional part)")
            v = int(v)
        if not lo <= v <= hi:
            raise SpecsimError(self._field(key), v, f"allowed: an integer in [{lo}, {hi}]")
        return v

    def need(self, key: str) -> int:
        return self.int(key, required=True)

    def experts(self) -> int:
        for key in _EXPERT_KEYS:
            if self.cfg.get(key) is not None:
                return self.need(key)
        raise SpecsimError(self._field("num_experts"), None,
                           f"missing; config.json needs one of {', '.join(_EXPERT_KEYS)} for model_type {self.mt!r}",
                           show_value=False)

    def routing(self) -> dict:
        """num_experts and experts_per_token of a MoE config, checked against each other."""
        e, k = self.experts(), self.need("num_experts_per_tok")
        if k > e:
            raise SpecsimError(self._field("num_experts_per_tok"), k, f"allowed: at most the {e} routed experts")
        return {"num_experts": e, "experts_per_token": k}


def load_hf_config(path_like: str | Path) -> tuple[TargetModel, DraftModel]:
    """Target architecture and a target-shaped EAGLE-3 head from a Hugging Face config.json."""
    from pydantic import ValidationError

    from ..errors import from_validation_error

    path = Path(path_like)
    try:
        return _load(path)
    except SpecsimError:
        raise
    except ValidationError as exc:
        raise from_validation_error(exc, f"model {path.name}") from None
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
        raise SpecsimError("model", str(path_like), f"config.json has an unusable value ({' '.join(str(exc).split())})") from None


def _load(path: Path) -> tuple[TargetModel, DraftModel]:
    raw, path = _read(path)
    c = _Cfg(raw, path)
    archs = raw.get("architectures")
    # a name only (it picks the engine's per-architecture kernels and checks model_type); a malformed list names none
    arch = archs[0][:200] if isinstance(archs, list) and archs and isinstance(archs[0], str) and archs[0] else None
    arch_type = ARCHITECTURE_TYPES.get(arch or "")
    mt = c.mt = c.mt if c.mt is not None else arch_type
    if mt not in SUPPORTED_MODEL_TYPES:
        of_arch = f" (architectures[0] {arch[:80]!r})" if arch else ""
        if mt is None:
            raise SpecsimError(c._field("model_type"), None, f"missing{of_arch}; a Hugging Face config.json names its "
                               f"model_type; supported: {', '.join(SUPPORTED_MODEL_TYPES)} (architectures "
                               f"{', '.join(ARCHITECTURE_TYPES)})", show_value=False)
        raise SpecsimError(c._field("model_type"), mt, f"not a model specsim models{of_arch}; supported: "
                           f"{', '.join(SUPPORTED_MODEL_TYPES)}")
    if arch_type is not None and _family(arch_type) != _family(mt):
        raise SpecsimError(c._field("architectures"), arch, f"a {_family(arch_type)} architecture, but model_type {mt!r} "
                           f"is {_family(mt)}; fix one of the two")
    if _family(mt) == "dense":
        for key in _EXPERT_KEYS:
            v = raw.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 1:
                raise SpecsimError(c._field(key), v, f"routed experts, but model_type {mt!r} is a dense model; a MoE "
                                   f"config names a MoE model_type ({', '.join(t for t in SUPPORTED_MODEL_TYPES if _family(t) != 'dense')})")
    base = _base_dtype(raw, c._field)
    h = c.need("hidden_size")
    layers = c.need("num_hidden_layers")
    heads = c.need("num_attention_heads")
    kv = c.int("num_key_value_heads", heads)
    head_dim = c.int("head_dim")
    vocab = c.need("vocab_size")
    inter = c.int("intermediate_size", 4 * h)
    if kv > heads or heads % kv:
        raise SpecsimError(c._field("num_key_value_heads"), kv,
                           f"allowed: a divisor of num_attention_heads={heads}")
    moe = None
    dense_layers = layers
    if mt in MLA_MODEL_TYPES:
        v_head = c.int("v_head_dim", 128)
        att = Attention(
            kind="mla", num_heads=heads, num_kv_heads=heads, head_dim=v_head,
            q_lora_rank=c.int("q_lora_rank", zero_is_none=True), kv_lora_rank=c.int("kv_lora_rank", 512),
            qk_nope_head_dim=c.int("qk_nope_head_dim", 128), qk_rope_head_dim=c.int("qk_rope_head_dim", 64),
            v_head_dim=v_head,
        )
        e_inter = c.need("moe_intermediate_size")
        moe = MoE(
            **c.routing(), expert_intermediate=e_inter,
            num_shared_experts=c.int("n_shared_experts", 0) or 0, shared_intermediate=e_inter,
        )
        dense_layers = c.int("first_k_dense_replace", 0)
    else:
        if head_dim is None:
            if h % heads:
                raise SpecsimError(c._field("hidden_size"), h,
                                   f"allowed: a multiple of num_attention_heads={heads} (or give head_dim)")
            head_dim = h // heads
        att = Attention(kind="gqa", num_heads=heads, num_kv_heads=kv, head_dim=head_dim)
        if mt == "qwen3_moe":
            moe = MoE(**c.routing(), expert_intermediate=c.need("moe_intermediate_size"))
            mlp_only = raw.get("mlp_only_layers") or []
            if not isinstance(mlp_only, list):
                raise SpecsimError(c._field("mlp_only_layers"), mlp_only, "allowed: a list of layer indices")
            dense_layers = len(mlp_only)
        elif mt == "mixtral":
            moe = MoE(**c.routing(), expert_intermediate=inter)
            dense_layers = 0
    if moe is not None:
        scales = _fp8_scales(raw)
        if scales is not None:
            moe = moe.model_copy(update={"fp8_scales": scales})
        if dense_layers > layers:
            raise SpecsimError(c._field("first_k_dense_replace" if mt in MLA_MODEL_TYPES else "mlp_only_layers"),
                               dense_layers, f"allowed: at most num_hidden_layers={layers}")
    name = model_name(raw, path)
    src = {"architecture": f"Hugging Face config.json at {path}"}
    if base != "bf16" or any(raw.get(k) is not None for k in ("dtype", "torch_dtype")):
        key = "dtype" if raw.get("dtype") is not None else "torch_dtype"
        src["dtypes"] = (f"config.json {key} {raw.get(key)!r}: unquantised weights and KV cache {base}"
                         + (" (engines serve float32 checkpoints as float16, --dtype auto)" if base == "fp16"
                            and str(raw.get(key)).removeprefix("torch.") in ("float32", "float") else ""))
    for key, what in (("num_key_value_heads", f"num_attention_heads ({heads}: no grouped KV heads)"),
                      ("intermediate_size", f"4 x hidden_size ({4 * h})")):
        if raw.get(key) is None and not (key == "num_key_value_heads" and mt in MLA_MODEL_TYPES):  # MLA
            src[f"assumed_{key}"] = f"assumed: config.json gives no {key}; taken as {what}"
    q = raw.get("quantization_config")
    dtypes = _dtypes(raw, moe is not None, base)
    if q and dtypes == _dtypes({}, moe is not None, base):  # an empty quantization_config says nothing
        method = q.get("quant_method") if isinstance(q, dict) else q
        src["assumed_dtypes"] = (f"assumed: config.json's quantization_config (quant_method {str(method)[:40]!r}) is not "
                                 "one specsim reads (fp8; 4- or 8-bit compressed-tensors / awq / gptq / marlin): "
                                 f"weights modeled as {base}")
    if arch:
        src["architecture_name"] = f"architectures[0] of the Hugging Face config.json at {path}"
    if c.cfg.get("model_type") is None:
        src["model_type"] = f"config.json gives no model_type: {mt!r}, the model type of architectures[0] {arch}"
    elif arch and arch_type is None:
        src["assumed_architecture"] = (f"assumed: architectures[0] {arch[:80]!r} is not one specsim knows; read as "
                                       f"model_type {mt!r} ({_family(mt)})")
    target = TargetModel(
        name=name, num_layers=layers, num_dense_layers=dense_layers if moe else layers, hidden=h,
        intermediate=inter, vocab=vocab, attention=att, moe=moe, dtypes=dtypes, sources=src,
        architecture=arch,
    )
    draft = DraftModel(
        name=f"EAGLE-3 head for {name}", hidden=h, intermediate=inter if mt != "qwen3_moe" else max(inter, 3 * h),
        num_heads=heads, num_kv_heads=kv if att.kind == "gqa" else heads, head_dim=head_dim if att.kind == "gqa" else 128,
        draft_vocab=min(32000, vocab),
        sources={"architecture": "assumed: 1-layer Llama-style head with the target's dims and a 32K draft vocab (SpecForge configs)"},
    )
    return target, draft


def model_name(raw: dict, path: Path) -> str:
    """The model's name: the config's ``_name_or_path`` (its last part where it is a local path: "/data/Llama-3-8B"
    is "Llama-3-8B"; a hub id "org/name" stays whole), else the folder holding the config.json, else the file's own
    name ("my-model.json" is "my-model"; a bare "config.json" takes its folder's name, the working directory's too)."""
    import re

    given = raw.get("_name_or_path")
    if isinstance(given, str) and given.strip():
        text = "".join(c for c in " ".join(given.split()) if c.isprintable())[:200]  # a label: control characters dropped
        local = text.startswith(("/", ".", "~")) or re.match(r"^[A-Za-z]:[\\/]", text) or text.count("/") > 1
        name = re.split(r"[\\/]", text.rstrip("/\\"))[-1] if local else text
        if name.strip():
            return name
    if path.stem != "config":
        return path.stem[:200]
    folder = path.parent.name or path.resolve().parent.name
    return (folder or "config")[:200]
