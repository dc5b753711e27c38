"""Read a Hugging Face ``config.json`` into a target architecture and a matching EAGLE-3 head."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import SpecsimError
from ..physics.schema import Attention, DraftModel, MoE, TargetModel, WeightDtypes

SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "deepseek_v3", "kimi_k2")


def _read(path: Path) -> dict:
    if path.is_dir():
        path = path / "config.json"
    if not path.exists():
        raise SpecsimError("model", str(path), "no such file; give a preset name or a path to a config.json")
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecsimError("model", str(path), f"not a readable JSON config ({' '.join(str(exc).split())})") from None
    if not isinstance(cfg, dict):
        raise SpecsimError("model", str(path), "config.json must hold a JSON object")
    # multimodal wrappers (Kimi-K2.5, Qwen-VL) keep the language model in text_config
    if "text_config" in cfg and isinstance(cfg["text_config"], dict) and cfg.get("model_type") not in SUPPORTED_MODEL_TYPES:
        merged = dict(cfg["text_config"])
        if not merged.get("quantization_config"):
            merged["quantization_config"] = cfg.get("quantization_config")
        cfg = merged
    return cfg


def _dtypes(cfg: dict, is_moe: bool) -> WeightDtypes:
    q = cfg.get("quantization_config") or {}
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8" or q.get("fmt") == "e4m3":
        return WeightDtypes(attention="fp8", dense_mlp="fp8", shared_experts="fp8", routed_experts="fp8")
    if method in ("compressed-tensors", "awq", "gptq", "marlin"):
        bits = q.get("bits") or q.get("w_bit")
        for group in (q.get("config_groups") or {}).values():
            bits = bits or (group.get("weights") or {}).get("num_bits")
        if bits == 4:
            ignore = " ".join(q.get("ignore") or [])
            attn = "bf16" if "self_attn" in ignore or not ignore else "int4"
            shared = "bf16" if "shared_expert" in ignore else "int4"
            return WeightDtypes(attention=attn, dense_mlp=attn, shared_experts=shared, routed_experts="int4")
        if bits == 8:
            return WeightDtypes(attention="int8", dense_mlp="int8", shared_experts="int8", routed_experts="int8")
    return WeightDtypes()


def _need(cfg: dict, key: str, path: Path):
    if key not in cfg or cfg[key] is None:
        raise SpecsimError("model", str(path), f"config.json lacks '{key}', needed for model_type {cfg.get('model_type')!r}")
    return cfg[key]


def load_hf_config(path_like: str | Path) -> tuple[TargetModel, DraftModel]:
    """Target architecture and a target-shaped EAGLE-3 head from a Hugging Face config.json."""
    from pydantic import ValidationError

    try:
        return _load(Path(path_like))
    except SpecsimError:
        raise
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise SpecsimError("model", str(path_like), f"config.json gives an invalid {loc}: {err['msg']}") from None
    except (TypeError, ValueError, KeyError) as exc:
        raise SpecsimError("model", str(path_like), f"config.json has an unusable value ({' '.join(str(exc).split())})") from None


def _load(path: Path) -> tuple[TargetModel, DraftModel]:
    cfg = _read(path)
    mt = cfg.get("model_type")
    if mt not in SUPPORTED_MODEL_TYPES:
        raise SpecsimError("model_type", mt, f"supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
    h = int(_need(cfg, "hidden_size", path))
    layers = int(_need(cfg, "num_hidden_layers", path))
    heads = int(_need(cfg, "num_attention_heads", path))
    kv = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or h // heads)
    vocab = int(_need(cfg, "vocab_size", path))
    inter = int(cfg.get("intermediate_size") or 4 * h)
    moe = None
    dense_layers = layers
    if mt in ("deepseek_v3", "kimi_k2"):
        att = Attention(
            kind="mla", num_heads=heads, num_kv_heads=heads, head_dim=int(cfg.get("v_head_dim", 128)),
            q_lora_rank=cfg.get("q_lora_rank"), kv_lora_rank=int(cfg.get("kv_lora_rank", 512)),
            qk_nope_head_dim=int(cfg.get("qk_nope_head_dim", 128)), qk_rope_head_dim=int(cfg.get("qk_rope_head_dim", 64)),
            v_head_dim=int(cfg.get("v_head_dim", 128)),
        )
        moe = MoE(
            num_experts=int(_need(cfg, "n_routed_experts", path)), experts_per_token=int(_need(cfg, "num_experts_per_tok", path)),
            expert_intermediate=int(_need(cfg, "moe_intermediate_size", path)),
            num_shared_experts=int(cfg.get("n_shared_experts") or 0), shared_intermediate=int(cfg["moe_intermediate_size"]),
        )
        dense_layers = int(cfg.get("first_k_dense_replace", 0))
    else:
        att = Attention(kind="gqa", num_heads=heads, num_kv_heads=kv, head_dim=head_dim)
        if mt == "qwen3_moe":
            moe = MoE(
                num_experts=int(_need(cfg, "num_experts", path)), experts_per_token=int(_need(cfg, "num_experts_per_tok", path)),
                expert_intermediate=int(_need(cfg, "moe_intermediate_size", path)),
            )
            dense_layers = len(cfg.get("mlp_only_layers") or [])
        elif mt == "mixtral":
            moe = MoE(
                num_experts=int(_need(cfg, "num_local_experts", path)), experts_per_token=int(_need(cfg, "num_experts_per_tok", path)),
                expert_intermediate=inter,
            )
            dense_layers = 0
    name = str(cfg.get("_name_or_path") or path.stem)
    src = {"architecture": f"Hugging Face config.json at {path}"}
    target = TargetModel(
        name=name, num_layers=layers, num_dense_layers=dense_layers if moe else layers, hidden=h,
        intermediate=inter, vocab=vocab, attention=att, moe=moe, dtypes=_dtypes(cfg, moe is not None), sources=src,
    )
    draft = DraftModel(
        name=f"EAGLE-3 head for {name}", hidden=h, intermediate=inter if mt != "qwen3_moe" else max(inter, 3 * h),
        num_heads=heads, num_kv_heads=kv if att.kind == "gqa" else heads, head_dim=head_dim if att.kind == "gqa" else 128,
        draft_vocab=min(32000, vocab),
        sources={"architecture": "assumed: 1-layer Llama-style head with the target's dims and a 32K draft vocab (SpecForge configs)"},
    )
    return target, draft
