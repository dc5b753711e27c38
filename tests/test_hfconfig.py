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


# ---- real configs (tests/fixtures/hf) as transformers 4 and 5 write them -----------------------

from pathlib import Path  # noqa: E402

HF = Path(__file__).parent / "fixtures" / "hf"
# fixture -> (model_type after unwrapping, preset it must match or None)
REAL = {
    "llama-3.1-8b-instruct": ("llama", "llama-3.1-8b"),
    "llama-3.1-8b-instruct-tf5": ("llama", "llama-3.1-8b"),
    "qwen2.5-7b-instruct": ("qwen2", None),
    "qwen3-8b": ("qwen3", None),
    "qwen3-30b-a3b": ("qwen3_moe", "qwen3-30b-a3b"),
    "qwen3-30b-a3b-tf5": ("qwen3_moe", "qwen3-30b-a3b"),
    "qwen3-235b-a22b": ("qwen3_moe", "qwen3-235b-a22b"),
    "mixtral-8x7b-instruct": ("mixtral", None),
    "deepseek-v3": ("deepseek_v3", "deepseek-v3"),
    "kimi-k2-instruct": ("kimi_k2", "kimi-k2"),
    "kimi-k2.5": ("kimi_k2", "kimi-k2.5"),
}


def test_every_model_type_has_a_real_fixture():
    raw_types = set()
    for name in REAL:
        cfg = json.loads((HF / name / "config.json").read_text())
        raw_types.add((cfg.get("text_config") or cfg)["model_type"])
    assert raw_types == set(SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_configs_load_and_match_presets(name):
    t, d = load_hf_config(HF / name / "config.json")
    assert t.hidden % t.attention.num_heads == 0 or t.attention.kind == "mla" or t.attention.head_dim
    assert d.num_heads == t.attention.num_heads
    preset = REAL[name][1]
    if preset:
        pt, _ = get_model(preset)
        got = (t.num_layers, t.hidden, t.intermediate, t.vocab, t.attention.num_heads, t.attention.num_kv_heads)
        want = (pt.num_layers, pt.hidden, pt.intermediate, pt.vocab, pt.attention.num_heads, pt.attention.num_kv_heads)
        assert got == want
        assert (t.moe is None) == (pt.moe is None)
        if t.moe:
            assert (t.moe.num_experts, t.moe.experts_per_token, t.moe.expert_intermediate, t.moe.num_shared_experts) == (
                pt.moe.num_experts, pt.moe.experts_per_token, pt.moe.expert_intermediate, pt.moe.num_shared_experts)
            assert t.num_dense_layers == pt.num_dense_layers


def test_transformers5_renames_are_the_same_model():
    for a, b in (("qwen3-30b-a3b", "qwen3-30b-a3b-tf5"), ("llama-3.1-8b-instruct", "llama-3.1-8b-instruct-tf5")):
        ta, _ = load_hf_config(HF / a)
        tb, _ = load_hf_config(HF / b)
        assert ta.model_dump(exclude={"sources", "name"}) == tb.model_dump(exclude={"sources", "name"})


QWEN_MOE = json.loads((HF / "qwen3-30b-a3b" / "config.json").read_text())


@pytest.mark.parametrize("base,key,value,needle", [
    (LLAMA, "num_attention_heads", 0, "num_attention_heads"),
    (LLAMA, "hidden_size", 1e999, "hidden_size"),
    (LLAMA, "hidden_size", 4097, "hidden_size"),  # not divisible by 32 heads, no head_dim
    (LLAMA, "num_hidden_layers", True, "num_hidden_layers"),
    (LLAMA, "num_hidden_layers", 1e9, "num_hidden_layers"),
    (LLAMA, "num_hidden_layers", "32", "num_hidden_layers"),
    (LLAMA, "num_key_value_heads", 5, "num_key_value_heads"),
    (LLAMA, "vocab_size", -1, "vocab_size"),
    (QWEN_MOE, "num_experts", 127.9, "num_experts"),
    (QWEN_MOE, "num_experts_per_tok", 200, "num_experts_per_tok"),
    (DSV3, "n_routed_experts", None, "num_experts"),
    (DSV3, "first_k_dense_replace", 99, "first_k_dense_replace"),
    (MIXTRAL, "num_local_experts", False, "num_local_experts"),
])
def test_hostile_values_name_the_key(tmp_path, base, key, value, needle):
    cfg = dict(base)
    if value is None:
        cfg.pop(key)
    else:
        cfg[key] = value
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg).replace("Infinity", "1e999"))
    with pytest.raises(SpecsimError) as exc:
        load_hf_config(f)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg


def test_deep_nesting_and_devices_are_refused(tmp_path):
    f = tmp_path / "config.json"
    f.write_text("[" * 100_000)
    with pytest.raises(SpecsimError, match="nested deeper"):
        load_hf_config(f)
    with pytest.raises(SpecsimError, match="character device"):
        load_hf_config("/dev/zero")


def test_an_fp8_checkpoint_s_scaling_comes_from_its_quantization_config(tmp_path):
    """weight_block_size in an fp8 quantization_config: block-wise experts (DeepSeek-V3, Kimi-K2); fp8 without it:
    per-tensor; other checkpoints keep the default."""
    import json
    from pathlib import Path

    from specsim.io.hfconfig import load_hf_config

    fx = Path(__file__).parent / "fixtures" / "hf"
    for name in ("deepseek-v3", "kimi-k2-instruct"):
        target, _ = load_hf_config(fx / name / "config.json")
        assert target.moe.fp8_scales == "block", name
    cfg = json.loads((fx / "deepseek-v3" / "config.json").read_text())
    cfg["quantization_config"].pop("weight_block_size")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    target, _ = load_hf_config(tmp_path / "config.json")
    assert target.moe.fp8_scales == "tensor" and target.dtypes.routed_experts == "fp8"
    target, _ = load_hf_config(fx / "qwen3-30b-a3b" / "config.json")
    assert target.moe.fp8_scales == "block" and target.dtypes.routed_experts == "bf16"  # the default, unused for bf16
