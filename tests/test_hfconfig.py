"""Hugging Face config.json loading for every supported model_type."""

import json

import pytest

from specsim.errors import SpecsimError
from specsim.io.hfconfig import SUPPORTED_MODEL_TYPES, load_hf_config
from specsim.io.presets import get_model

LLAMA = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 14336}
DSV3 = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128,
        "vocab_size": 129280, "intermediate_size": 18432, "n_routed_experts": 256, "num_experts_per_tok": 8,
        "moe_intermediate_size": 2048, "n_shared_experts": 1, "first_k_dense_replace": 3, "q_lora_rank": 1536,
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}}
KIMI25 = {"model_type": "kimi_k25", "architectures": ["KimiK25ForConditionalGeneration"],
          "text_config": {**DSV3, "model_type": "kimi_k2", "num_attention_heads": 64, "n_routed_experts": 384,
                          "first_k_dense_replace": 1, "vocab_size": 163840, "quantization_config": None},
          "quantization_config": {"quant_method": "compressed-tensors",
                                  "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": 32}}},
                                  "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"]}}
MIXTRAL = {"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "vocab_size": 32000, "intermediate_size": 14336, "num_local_experts": 8,
           "num_experts_per_tok": 2}


def _write(tmp_path, cfg):
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    return f


def test_llama_matches_preset(tmp_path):
    t, d = load_hf_config(_write(tmp_path, LLAMA))
    pt, _ = get_model("llama-3.1-8b")
    assert (t.num_layers, t.hidden, t.intermediate, t.attention.num_kv_heads) == (pt.num_layers, pt.hidden, pt.intermediate, 8)
    assert t.moe is None and d.num_layers == 1


def test_deepseek_v3_fp8(tmp_path):
    t, _ = load_hf_config(_write(tmp_path, DSV3))
    assert t.attention.kind == "mla" and t.moe.num_experts == 256 and t.num_dense_layers == 3
    assert t.dtypes.routed_experts == "fp8" and t.dtypes.attention == "fp8"


def test_kimi_k25_text_config_int4_experts(tmp_path):
    t, _ = load_hf_config(_write(tmp_path, KIMI25))
    assert t.moe.num_experts == 384 and t.num_dense_layers == 1
    assert t.dtypes.routed_experts == "int4" and t.dtypes.attention == "bf16" and t.dtypes.shared_experts == "bf16"


def test_mixtral_and_qwen(tmp_path):
    t, _ = load_hf_config(_write(tmp_path, MIXTRAL))
    assert t.moe.num_experts == 8 and t.moe.experts_per_token == 2 and t.num_dense_layers == 0
    for mt in ("qwen2", "qwen3"):
        t, _ = load_hf_config(_write(tmp_path, {**LLAMA, "model_type": mt, "head_dim": 128}))
        assert t.attention.head_dim == 128


def test_supported_list_is_complete():
    assert set(SUPPORTED_MODEL_TYPES) == {"llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "deepseek_v3", "kimi_k2"}


@pytest.mark.parametrize("cfg", [{"model_type": "bert"}, {"model_type": "llama"}, []])
def test_bad_configs(tmp_path, cfg):
    with pytest.raises(SpecsimError):
        load_hf_config(_write(tmp_path, cfg))


def test_directory_path(tmp_path):
    _write(tmp_path, LLAMA)
    t, _ = load_hf_config(tmp_path)
    assert t.hidden == 4096
