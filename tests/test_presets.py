"""Every preset number carries its source; presets load and validate."""

import json
from pathlib import Path

import pytest

from specsim.io.presets import (
    allreduce_names,
    engine_names,
    get_allreduce,
    get_engine,
    get_gpu,
    get_model,
    gpu_names,
    model_names,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", gpu_names())
def test_gpu_numbers_have_sources(name):
    g, ar = get_gpu(name)
    for field in ("hbm_bytes_per_s", "memory_bytes", "peak_flops", "mem_efficiency", "flop_efficiency", "kernel_floor_us"):
        assert field in g.sources, f"{name}.{field}"
    assert ar.alpha_at(8) > 0


@pytest.mark.parametrize("name", engine_names())
def test_engine_numbers_have_sources(name):
    e = get_engine(name)
    for field, value in e.model_dump().items():
        if field in ("name", "sources"):
            continue
        assert field in e.sources, f"engine {name}.{field} = {value!r} has no source"


@pytest.mark.parametrize("name", allreduce_names())
def test_allreduce_sources(name):
    ar = get_allreduce(name)
    assert "alpha_us" in ar.sources and "bus_bytes_per_s" in ar.sources


@pytest.mark.parametrize("name", model_names())
def test_models_have_sources_and_drafts(name):
    t, d = get_model(name)
    assert t.sources and d.sources
    assert d.num_layers == 1


def test_seed_scenarios_have_provenance():
    for f in (ROOT / "calibration" / "scenarios").glob("*.json"):
        d = json.loads(f.read_text())
        assert d["provenance"]["assumptions"] and d["provenance"]["fitted_parameters"], f.name


def test_int4_experts_take_the_w4a16_bandwidth_prior():
    """A fresh deployment whose routed experts are INT4 starts from the engine's W4A16 prior (public
    kernel timings), every other model from the bf16 one; the scenario's one field is what calibration moves."""
    from specsim.analysis.build import build_scenario
    from specsim.io.presets import get_engine, get_gpu
    from specsim.physics.params import scenario_params

    eng = get_engine("sglang")
    assert eng.moe_mem_efficiency is None  # the bf16 kernel's share is the GPU's measured one
    assert eng.moe_mem_efficiency_int4 is not None and eng.moe_mem_efficiency_int4 < get_gpu("h200")[0].moe_mem_efficiency
    kimi = build_scenario(model="kimi-k2.5", gpu="h200", tp=8)
    assert kimi.target.dtypes.routed_experts == "int4"
    assert kimi.engine.moe_mem_efficiency == eng.moe_mem_efficiency_int4
    assert "INT4" in kimi.engine.sources["moe_mem_efficiency"]
    qwen = build_scenario(model="qwen3-30b-a3b", gpu="h200", tp=1)
    assert qwen.engine.moe_mem_efficiency is None
    assert scenario_params(qwen)["moe_mem_efficiency"] == qwen.gpu.moe_mem_efficiency
    qwen4 = build_scenario(model="qwen3-30b-a3b", gpu="h200", tp=1, dtype="int4")
    assert qwen4.engine.moe_mem_efficiency == eng.moe_mem_efficiency_int4
    # an engine without an INT4 prior keeps its one value
    hf = build_scenario(model="kimi-k2.5", gpu="h200", tp=8, engine="hf-transformers")
    assert hf.engine.moe_mem_efficiency == get_engine("hf-transformers").moe_mem_efficiency
