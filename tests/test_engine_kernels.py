"""The small kernels of a forward as the engine's code launches them (engine.model_kernels), and what each costs."""

from __future__ import annotations

import json

import numpy as np
import pytest

import specsim
from specsim.analysis.predict import operator_table
from specsim.physics.params import scenario_params

#: kernels of one decode forward inside SGLang's CUDA graph, counted from the v0.5.5/v0.5.6 (and fork) model code
#: (models/notes/sglang_decode_kernels.md): per layer x layers + the head's kernels
SGLANG_DECODE_KERNELS = {
    ("llama-3.1-8b", 1, None): 32 * 13 + 4,
    ("qwen3-30b-a3b", 1, None): 48 * 18 + 4,
    ("qwen3-30b-a3b", 2, None): 48 * 20 + 8,
    ("glm-4.7-fp8", 8, None): 3 * 21 + 89 * 40 + 8,  # per-tensor fp8 experts (3 input-quant kernels per GEMM), 11-kernel top-k
    ("kimi-k2.5", 8, "int4"): 19 + 60 * 30 + 9,
}


@pytest.mark.parametrize("key", list(SGLANG_DECODE_KERNELS))
def test_decode_kernel_count_is_the_code_reading(key):
    model, tp, dtype = key
    t = operator_table(1, model=model, gpu="h200", tp=tp, engine="sglang", dtype=dtype)
    # Kimi: the model costs q_a and kv_a as two GEMMs where SGLang's dsv3_fused_a_gemm runs one (61 of 1,828)
    assert t.kernels == pytest.approx(SGLANG_DECODE_KERNELS[key], rel=0.035), (key, t.kernels)


def test_architecture_specific_kernels():
    """Qwen3-MoE's rotary writes K/V (no store kernels) and adds q/k norms; Llama stores K and V apart;
    GLM's compiled grouped top-k is 11 kernels (measured); a fused shared expert leaves no GEMM of its own."""
    rows = {m: {r["name"]: r for r in operator_table(1, model=m, gpu="h200", tp=tp, engine="sglang").rows}
            for m, tp in (("qwen3-30b-a3b", 1), ("llama-3.1-8b", 1), ("glm-4.7-flash", 1))}
    q, ll, g = rows["qwen3-30b-a3b"], rows["llama-3.1-8b"], rows["glm-4.7-flash"]
    assert "kv_store" not in q and q["qk_norm"]["count"] == 2 * 48
    assert ll["kv_store"]["count"] == 2 * 32 and "qk_norm" not in ll
    assert q["attention_aux"]["count"] == 2 * 48 and g["attention_aux"]["count"] == 1 * 47  # FA3 vs FlashInfer
    assert g["router_topk"]["count"] == 11 * 46 and g["attention_copies"]["count"] == 7 * 47
    assert "shared_gate_up" not in g and "shared_expert_glue" not in g
    kimi = {r["name"]: r for r in operator_table(1, model="kimi-k2.5", gpu="h200", tp=8, dtype="int4").rows}
    assert kimi["shared_gate_up"]["count"] == 60 and kimi["shared_expert_glue"]["count"] == 2 * 60
    assert kimi["moe_int4_glue"]["count"] == 2 * 60


def test_a_small_kernel_costs_its_node_its_floor_and_its_bytes():
    sc = specsim.build_scenario(model="llama-3.1-8b", gpu="h200", tp=1, engine="sglang", ctx=512)
    e = sc.engine
    rows = {r["name"]: r for r in operator_table(1, sc).rows}
    norm = rows["layer_norms"]
    per_kernel = norm["us"] / norm["count"] if "us" in norm else norm["ms"] * 1e3 / norm["count"]
    assert e.small_kernel_floor_us == 1.65
    assert e.graph_node_us is None  # the GPU's measured node gap
    assert per_kernel == pytest.approx(sc.gpu.graph_node_us + e.small_kernel_floor_us, abs=0.05)
    # an engine without its own floor takes the GPU's, and a calibration that moves that floor moves it too
    p = scenario_params(specsim.build_scenario(model="llama-3.1-8b", gpu="h200", tp=1, engine="torch-graph"))
    assert p["small_kernel_floor_own"] == 0.0
    from specsim.physics.cost import target_forward_ms

    a = target_forward_ms(p, 1)["total"]
    b = target_forward_ms({**p, "kernel_floor_us": p["kernel_floor_us"] + 1.0}, 1)["total"]
    n = target_forward_ms(p, 1)["kernels"]
    assert float(b - a) == pytest.approx(float(n) * 1.0 / 1e3, rel=0.02)  # every kernel, small ones included


def test_unknown_architecture_takes_the_engine_defaults(tmp_path):
    sc = specsim.build_scenario(model="qwen3-8b", gpu="h200", tp=1, engine="sglang")
    assert sc.target.architecture == "Qwen3ForCausalLM"
    d = sc.model_dump()
    d["target"]["architecture"] = "SomethingNewForCausalLM"
    from specsim.io.presets import scenario_from_dict

    p = scenario_params(scenario_from_dict(d, "scenario"))
    assert p["qk_norm_kernels"] == 0 and p["kv_store_kernels"] == sc.engine.kv_store_kernels
    assert p["router_topk_kernels"] == 1 and p["attention_aux_kernels"] == sc.engine.attention_aux_kernels


def test_hf_config_names_its_architecture(tmp_path):
    from pathlib import Path

    from specsim.io.hfconfig import load_hf_config

    fixtures = Path(__file__).resolve().parent / "fixtures" / "hf"
    target, _ = load_hf_config(fixtures / "qwen3-8b")
    assert target.architecture == "Qwen3ForCausalLM"
    raw = json.loads((fixtures / "qwen3-8b" / "config.json").read_text())
    for bad in (7, [], [None], "Qwen3ForCausalLM"):
        raw["architectures"] = bad
        (tmp_path / "config.json").write_text(json.dumps(raw))
        assert load_hf_config(tmp_path / "config.json")[0].architecture is None


def test_bad_engine_kernel_counts_are_one_line_errors(tmp_path, capsys):
    from specsim.cli import main

    def run(f):
        try:
            main(["predict", "--scenario", str(f)])
            code = 0
        except SystemExit as exc:
            code = exc.code
        return code, capsys.readouterr().err

    d = specsim.build_scenario(model="qwen3-8b", gpu="h200", tp=1, engine="sglang").model_dump()
    d["engine"]["model_kernels"]["Qwen3ForCausalLM"]["qk_norm"] = -1
    f = tmp_path / "s.json"
    f.write_text(json.dumps(d))
    code, err = run(f)
    assert code == 2 and "qk_norm" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    d["engine"]["model_kernels"]["Qwen3ForCausalLM"] = {"qk_norm": 2, "bogus": 1}
    f.write_text(json.dumps(d))
    code, err = run(f)
    assert code == 2 and "bogus" in err


def test_glm_router_topk_count_is_the_measured_one():
    """The presets' GLM router top-k is what its compiled body launched on the H200, at every token count."""
    from pathlib import Path

    from specsim.io.presets import get_engine

    d = json.loads((Path(__file__).resolve().parents[1] / "calibration" / "datasets" / "h200-sglang-router-topk.json").read_text())
    topk = [p for p in d["points"] if p["op"] == "biased_grouped_topk"]
    assert {p["kernels"] for p in topk} == {get_engine("sglang").model_kernels["Glm4MoeForCausalLM"].router_topk}
    assert d["provenance"]["measured"] and d["provenance"]["gpu"] == "NVIDIA H200"
    sums = [p for p in d["points"] if p["op"] == "moe_sum_reduce_torch_compile"]
    assert sums and {p["kernels"] for p in sums} == {get_engine("sglang").moe_combine_kernels}


def test_a_measured_router_costs_its_measured_time_per_call():
    """GLM's router top-k: 11 kernels at the engine floor plus the measured excess = the measured us per call."""
    sc = specsim.build_scenario(model="glm-4.7-flash", gpu="h200", tp=1, engine="sglang")
    mk = sc.engine.model_kernels["Glm4MoeLiteForCausalLM"]
    rows = {r["name"]: r for r in operator_table(1, sc).rows}
    layers = sc.target.num_layers - sc.target.num_dense_layers
    per_call = (rows["router_topk"]["ms"] + rows["router_topk_measured_excess"]["ms"]) * 1e3 / layers
    assert per_call == pytest.approx(mk.router_topk_us, rel=0.01)
    assert "router_topk_measured_excess" not in {r["name"] for r in operator_table(1, model="qwen3-30b-a3b", gpu="h200").rows}


@pytest.mark.parametrize("model,tp,engine,kernels", [
    ("llama-3.1-8b", 1, "hf-transformers", 839), ("qwen3-30b-a3b", 1, "hf-transformers", 2263),
    ("deepseek-v3", 1, "hf-transformers", 3781), ("kimi-k2.5", 8, "hf-transformers", 3951),
    ("glm-4.7-fp8", 8, "hf-transformers", 4632), ("llama-3.1-8b", 1, "torch-graph", 801),
    ("qwen3-30b-a3b", 1, "torch-graph", 2355), ("deepseek-v3", 8, "torch-graph", 4207)])
def test_torch_engines_keep_the_kernel_counts_they_were_fitted_with(model, tp, engine, kernels):
    """The eager/torch engines are not itemised: their forwards launch what they did before the itemisation."""
    assert operator_table(1, model=model, gpu="h200", tp=tp, engine=engine).kernels == kernels


def test_model_kernels_is_bounded(tmp_path, capsys):
    """A scenario may name at most 64 architectures, each name at most 200 characters: one line, exit 2."""
    from specsim.cli import main

    d = specsim.build_scenario(model="qwen3-8b", gpu="h200", tp=1, engine="sglang").model_dump()
    for bad in ({f"A{i}": {} for i in range(65)}, {"A" * 201: {}}):
        d["engine"]["model_kernels"] = bad
        f = tmp_path / "s.json"
        f.write_text(json.dumps(d))
        with pytest.raises(SystemExit) as exc:
            main(["predict", "--scenario", str(f)])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "model_kernels" in err and len(err.strip().splitlines()) == 1



def test_an_architecture_the_engine_does_not_itemise_is_said(tmp_path):
    from specsim.analysis.predict import scenario_warnings

    sc = specsim.build_scenario(model="llama-3.1-8b", gpu="h100", tp=1, engine="sglang")
    assert not [w for w in scenario_warnings(sc) if "architecture" in w]
    for arch in ("MixtralForCausalLM", None):
        d = sc.model_dump()
        d["target"]["architecture"] = arch
        from specsim.io.presets import scenario_from_dict

        w = [x for x in scenario_warnings(scenario_from_dict(d, "scenario")) if "architecture" in x]
        assert len(w) == 1 and ("MixtralForCausalLM" in w[0] if arch else "not set" in w[0])


def test_a_tree_verify_on_flashinfer_pays_its_custom_mask():
    """SGLang verifies a tree of a model without MLA with FlashInfer's FA2 custom-mask prefill: its attention row
    costs more than the chain's at the same width, by the measured kernel's terms (KV stream x slowdown, MMAs at its
    share of the peak over FA2's padded tile, a fixed cost per tile row); a chain, a decode step, an MLA tree and an
    engine without that path do not pay it."""
    from specsim.physics.operators import fa2_query_tile

    def attention_ms(model, topk, tokens, tp=1, engine="sglang"):
        rows = {r["name"]: r for r in operator_table(tokens, model=model, gpu="h200", tp=tp, engine=engine,
                                                     steps=3, topk=topk, draft_tokens=6, batch=8, ctx=4096).rows}
        return rows.get("attention_gqa", rows.get("attention_mla_latent"))["ms"]
    sc = specsim.build_scenario(model="llama-3.1-8b", gpu="h200", tp=1, engine="sglang")
    e = sc.engine
    assert e.tree_attention_fa2_custom_mask and 1.0 < e.tree_mask_attention_slowdown < 3.0
    assert 0.0 < e.tree_mask_attention_flop_efficiency < 0.5 and e.tree_mask_attention_us_per_tile_row > 0
    chain, tree = attention_ms("llama-3.1-8b", 1, 6), attention_ms("llama-3.1-8b", 4, 6)
    # 6 tokens x a GQA group of 4 = 24 packed rows: FA2's 64-row tile; the extra fixed time alone is 64 x that per row
    assert fa2_query_tile(24.0) == 64.0
    extra_fixed_ms = sc.target.num_layers * 64 * e.tree_mask_attention_us_per_tile_row / 1e3
    assert tree > chain + extra_fixed_ms
    assert attention_ms("llama-3.1-8b", 4, 1) == pytest.approx(attention_ms("llama-3.1-8b", 1, 1), rel=1e-9)
    assert attention_ms("deepseek-v3", 4, 6, tp=8) == pytest.approx(attention_ms("deepseek-v3", 1, 6, tp=8), rel=1e-9)
    assert attention_ms("llama-3.1-8b", 4, 6, engine="vllm") == pytest.approx(
        attention_ms("llama-3.1-8b", 1, 6, engine="vllm"), rel=1e-9)


def test_fa2_query_tile_is_flashinfers_rule():
    """FA2DetermineCtaTileQ (flashinfer include/flashinfer/utils.cuh, head dim < 256, sm80+): 16 up to 16 packed
    rows, 64 up to 64, 128 past; element-wise over arrays."""
    from specsim.physics.operators import fa2_query_tile

    assert [fa2_query_tile(float(r)) for r in (1, 16, 17, 64, 65, 176)] == [16.0, 16.0, 64.0, 64.0, 128.0, 128.0]
    assert fa2_query_tile(np.array([16.0, 17.0, 65.0])).tolist() == [16.0, 64.0, 128.0]


def test_a_topk_sweep_costs_the_tree_as_a_tree_scenario_does():
    """The tree path (FlashInfer's masked verify, host plans) follows each swept topk, not the base scenario's."""
    from specsim.analysis.sweep import sweep

    out = []
    for topk, tokens in ((1, 4), (4, 6)):
        base = specsim.build_scenario(model="llama-3.1-8b", gpu="h200", tp=1, engine="sglang", steps=3, topk=topk,
                                      draft_tokens=tokens, batch=8, ctx=4096)
        r = sweep(base, steps=[3], topk=[4], draft_tokens=[6], accept=[2.5], accept_at_steps=3, progress=False)
        out.append((r.best["verify_ms"], r.best["cycle_ms"]))
    assert out[0] == pytest.approx(out[1], rel=1e-12)


def test_the_tree_attention_terms_cost_the_same_one_point_at_a_time_and_as_arrays():
    """Chains and trees, small and wide tiles, in one array call equal the scalar evaluations of each point."""
    from specsim.physics.cycle import verify_breakdown

    sc = specsim.build_scenario(model="qwen3-8b", gpu="h100", tp=1, engine="sglang", steps=3, topk=4, draft_tokens=22)
    p = scenario_params(sc)
    topk, batch, width = np.array([1.0, 4.0, 4.0, 2.0]), np.array([1.0, 8.0, 64.0, 16.0]), np.array([4.0, 6.0, 22.0, 7.0])
    vec = verify_breakdown({**p, "topk": topk, "batch": batch}, num_draft_tokens=width)
    for i in range(4):
        one = verify_breakdown({**p, "topk": float(topk[i]), "batch": float(batch[i])}, num_draft_tokens=float(width[i]))
        assert float(one["attention"]) == pytest.approx(vec["attention"][i], rel=1e-12)
        assert float(one["total"]) == pytest.approx(vec["total"][i], rel=1e-12)


def test_a_mixed_chain_and_tree_point_set_costs_each_point_as_its_own_scenario():
    """throughput() over chains and trees at once (the tree path's verify kernel, per-branch draft reads and plan
    costs per point) equals each point evaluated alone."""
    from specsim.physics.cycle import throughput

    sc = specsim.build_scenario(model="qwen3-8b", gpu="h100", tp=1, engine="sglang", steps=3, topk=4, draft_tokens=8)
    p = scenario_params(sc)
    topk, batch = np.array([1.0, 2.0, 4.0, 4.0]), np.array([1.0, 16.0, 64.0, 8.0])
    ndt, tau = np.array([4.0, 6.0, 8.0, 22.0]), np.array([2.0, 2.2, 2.5, 2.9])
    vec = throughput({**p, "topk": topk, "batch": batch, "num_draft_tokens": ndt}, tau)
    for i in range(4):
        one = throughput({**p, "topk": float(topk[i]), "batch": float(batch[i]), "num_draft_tokens": float(ndt[i])},
                         float(tau[i]))
        assert float(one["tok_s"]) == pytest.approx(vec["tok_s"][i], rel=1e-12)
        for k in one["phases"]:
            assert float(one["phases"][k]) == pytest.approx(vec["phases"][k][i], rel=1e-12)
