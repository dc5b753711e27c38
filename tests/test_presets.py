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
