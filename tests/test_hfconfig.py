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


# ---- dtype, architecture and name of a config.json; --model values that are no config --------------------------


@pytest.mark.parametrize("extra, want", [
    ({}, "bf16"),
    ({"torch_dtype": "bfloat16"}, "bf16"),
    ({"torch_dtype": "float16"}, "fp16"),
    ({"torch_dtype": "float32"}, "fp16"),  # SGLang / vLLM --dtype auto serve float32 checkpoints as float16
    ({"dtype": "float8_e4m3fn"}, "fp8"),  # transformers 5's key
    ({"torch_dtype": "torch.float16"}, "fp16"),
    ({"torch_dtype": "auto"}, "bf16"),
])
def test_the_checkpoint_dtype_is_the_weights_dtype(tmp_path, extra, want):
    """torch_dtype / dtype were ignored: every config was modeled as bf16 weights."""
    t, _ = load_hf_config(_write(tmp_path, {**LLAMA, **extra}))
    assert {t.dtypes.attention, t.dtypes.dense_mlp, t.dtypes.embedding, t.dtypes.lm_head, t.dtypes.kv_cache} == {want}
    if extra:
        assert "dtypes" in t.sources


def test_a_quantised_checkpoint_keeps_its_quantisation_and_the_rest_takes_its_dtype(tmp_path):
    cfg = {**DSV3, "torch_dtype": "float16"}
    t, _ = load_hf_config(_write(tmp_path, cfg))
    assert t.dtypes.routed_experts == "fp8" and t.dtypes.attention == "fp8" and t.dtypes.embedding == "fp16"


def test_an_fp8_checkpoint_dtype_streams_fewer_bytes(run_json, tmp_path):
    """Direction check: fp8 weights (dtype float8_e4m3fn) take less memory time than the bf16 checkpoint."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _write(tmp_path / "a", LLAMA)
    _write(tmp_path / "b", {**LLAMA, "dtype": "float8_e4m3fn"})
    bf16, fp8 = (run_json("predict", "--model", str(tmp_path / d), "--gpu", "h100", "--tp", "1") for d in ("a", "b"))
    assert fp8["verify_breakdown_ms"]["weights"] < 0.6 * bf16["verify_breakdown_ms"]["weights"]
    assert fp8["tok_s"] > bf16["tok_s"]


@pytest.mark.parametrize("extra, needle", [
    ({"torch_dtype": "float99"}, "torch_dtype: got 'float99'; allowed: one of bfloat16"),
    ({"torch_dtype": 16}, "torch_dtype: got 16"),
    ({"torch_dtype": "float16", "dtype": "bfloat16"}, "dtype: got 'bfloat16'; contradicts torch_dtype 'float16'"),
])
def test_a_bad_dtype_names_its_key(tmp_path, extra, needle):
    with pytest.raises(SpecsimError, match=needle.replace("(", r"\(")):
        load_hf_config(_write(tmp_path, {**LLAMA, **extra}))


def test_the_architecture_gives_the_model_type_when_it_is_missing(tmp_path):
    cfg = {k: v for k, v in MIXTRAL.items() if k != "model_type"}
    t, _ = load_hf_config(_write(tmp_path, {**cfg, "architectures": ["MixtralForCausalLM"]}))
    assert t.moe.num_experts == 8 and t.architecture == "MixtralForCausalLM" and "model_type" in t.sources


@pytest.mark.parametrize("cfg, needle", [
    ({**LLAMA, "model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"]},
     "model_type: got 'gemma2'; not a model specsim models (architectures[0] 'Gemma2ForCausalLM'); supported: llama"),
    ({k: v for k, v in LLAMA.items() if k != "model_type"}, "model_type: missing; a Hugging Face config.json names"),
    ({**LLAMA, "model_type": "qwen3", "architectures": ["Qwen3MoeForCausalLM"]},
     "architectures: got 'Qwen3MoeForCausalLM'; a MoE architecture, but model_type 'qwen3' is dense"),
    ({**LLAMA, "model_type": "qwen3", "num_experts": 128, "num_experts_per_tok": 8},
     "num_experts: got 128; routed experts, but model_type 'qwen3' is a dense model"),
])
def test_an_unknown_or_contradictory_architecture_is_named(tmp_path, cfg, needle):
    """A MoE config under a dense model_type was modeled dense without a word; an unknown one named only model_type."""
    with pytest.raises(SpecsimError) as exc:
        load_hf_config(_write(tmp_path, cfg))
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_an_architecture_specsim_does_not_know_is_read_as_its_model_type_and_said(tmp_path):
    t, _ = load_hf_config(_write(tmp_path, {**LLAMA, "architectures": ["MyLlamaForCausalLM"]}))
    assert t.moe is None and "not one specsim knows" in t.sources["assumed_architecture"]


@pytest.mark.parametrize("where, name_or_path, want", [
    ("Meta-Llama-3-8B/config.json", None, "Meta-Llama-3-8B"),
    ("m/config.json", "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B"),  # a hub id stays whole
    ("m/config.json", "/data/models/Llama-3-8B/", "Llama-3-8B"),  # a local path: its last part
    ("m/llama3-8b.json", None, "llama3-8b"),
    ("m/config.json", 5, "m"),  # not text: the folder
])
def test_the_model_is_named_after_the_checkpoint(tmp_path, where, name_or_path, want):
    f = tmp_path / where
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps({**LLAMA, **({} if name_or_path is None else {"_name_or_path": name_or_path})}))
    t, d = load_hf_config(f)
    assert t.name == want and d.name == f"EAGLE-3 head for {want}"


def test_a_bare_config_json_takes_the_working_directory_s_name(tmp_path, monkeypatch):
    (tmp_path / "Qwen3-8B").mkdir()
    _write(tmp_path / "Qwen3-8B", LLAMA)
    monkeypatch.chdir(tmp_path / "Qwen3-8B")
    assert load_hf_config("config.json")[0].name == "Qwen3-8B"


@pytest.fixture
def not_configs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage.bin").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "null.json").write_text("null")
    (tmp_path / "emptydir").mkdir()
    (tmp_path / "nohidden.json").write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 2}))
    return tmp_path


@pytest.mark.parametrize("model, field, why", [
    ("garbage.bin", "model: got 'garbage.bin'", "is not UTF-8 text"),  # no slash, no .json: read as the file it is
    ("./garbage.bin", "model: got 'garbage.bin'", "is not UTF-8 text"),
    ("empty.json", "model: got 'empty.json'", "not valid JSON"),
    ("list.json", "model: got 'list.json'", "holds JSON list, not an object"),
    ("null.json", "model: got 'null.json'", "holds JSON null, not an object"),
    ("emptydir", "model: got 'emptydir'", "a folder without a config.json"),
    ("./nothing-here", "model: got 'nothing-here'", "no such file or model preset"),
    ("nothing-here.bin", "model: got 'nothing-here.bin'", "choose one of: kimi-k2.5"),
    ("nohidden.json", "model nohidden.json: hidden_size", "missing; config.json needs 'hidden_size'"),
])
def test_a_model_that_is_no_config_is_one_line_naming_the_file(run_cli, not_configs, model, field, why):
    code, out, err = run_cli("predict", "--model", model)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: {field}") and why in err
    assert "config.json" in err and ("llama-3.1-8b" in err or "hidden_size" in err)  # what is expected


def test_a_preset_name_wins_over_a_file_of_that_name(run_json, not_configs):
    (not_configs / "llama-3.1-8b").write_text("not a config")
    assert run_json("predict", "--model", "llama-3.1-8b", "--tp", "1")["model"].startswith("Llama-3.1-8B")


def test_a_hub_id_of_a_preset_is_the_preset_unless_that_folder_exists(run_json, not_configs):
    """org/name is a path and a preset's hub id: with no such folder it is the preset (as before), with one the folder."""
    assert run_json("predict", "--model", "meta-llama/Llama-2-7b-chat-hf", "--tp", "1")["model"] == get_model("llama-2-7b")[0].name
    (not_configs / "meta-llama" / "Llama-2-7b-chat-hf").mkdir(parents=True)
    _write(not_configs / "meta-llama" / "Llama-2-7b-chat-hf", LLAMA)
    assert run_json("predict", "--model", "meta-llama/Llama-2-7b-chat-hf", "--tp", "1")["model"] == "Llama-2-7b-chat-hf"


def test_name_or_path_with_control_characters_is_a_label_without_them(tmp_path):
    """``_name_or_path`` only names the model: control characters are dropped from the label, not an error."""
    import json

    from specsim.io.hfconfig import model_name

    assert model_name({"_name_or_path": "org/bad\x07na\x1bme"}, tmp_path / "config.json") == "org/badname"
    assert model_name({"_name_or_path": "\x07\x08"}, tmp_path / "my-model.json") == "my-model"
    src = Path(__file__).resolve().parents[1] / "examples" / "qwen3-30b-a3b" / "config.json"
    d = json.loads(src.read_text())
    d["_name_or_path"] = "Qwen/Qwen3\x07-30B-A3B"
    f = tmp_path / "c.json"
    f.write_text(json.dumps(d))
    import specsim

    assert specsim.predict(model=str(f), gpu="h200", tp=1).tok_s > 0
