"""The start-up path of ``specsim predict``: records built without pydantic give exactly what the schema gives."""

from __future__ import annotations

import json
import subprocess
import sys
import types
import typing

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from specsim.analysis.build import build_record, build_scenario, build_view
from specsim.analysis.predict import evaluate
from specsim.errors import SpecsimError
from specsim.io.packagedata import builtin_scenario_data, builtin_scenarios
from specsim.physics import record, rules, schema
from specsim.physics.params import scenario_params


def _shape(tp) -> tuple | None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return ("model", tp.__name__)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is dict:
        key, val = args
        if isinstance(val, type) and issubclass(val, BaseModel):
            return ("models", val.__name__)
        return ("int_keys",) if key is int else None
    if origin in (typing.Union, types.UnionType):
        found = [s for s in (_shape(a) for a in args if a is not type(None)) if s]
        return found[0] if found else None
    return None


def test_shapes_are_the_schemas():
    seen: dict[str, dict] = {}

    def walk(model) -> None:
        if model.__name__ in seen:
            return
        seen[model.__name__] = {n: s for n, f in model.model_fields.items() if (s := _shape(f.annotation))}
        for s in seen[model.__name__].values():
            if s[0] in ("model", "models"):
                walk(getattr(schema, s[1]))

    walk(schema.Scenario)
    assert seen == record.SHAPES


def test_defaults_and_limits_are_the_schemas():
    from specsim.physics.defaults import DEFAULTS

    assert DEFAULTS == schema.schema_defaults(), "regenerate: python -m specsim.physics.defaults"
    assert DEFAULTS["ModelKernels"] == schema.ModelKernels().model_dump()
    assert DEFAULTS["Acceptance"] == {n: f.default for n, f in schema.Acceptance.model_fields.items()}
    for name, (lo, hi) in rules.LIMITS.items():
        model, field = name.split(".")
        assert schema.field_range(getattr(schema, model), field) == (lo, hi), name


@pytest.mark.parametrize("name", sorted(builtin_scenarios()))
def test_builtin_scenario_files_are_canonical_dumps(name):
    """The record path reads these files unvalidated: each must be what validating it gives back."""
    raw = builtin_scenario_data(name)
    assert schema.Scenario.model_validate(raw).model_dump(mode="json") == raw


def test_record_is_read_only_and_methods_match():
    sc = build_scenario()
    rec = build_record()
    assert rec is not None and rec.model_dump() == sc.model_dump()
    with pytest.raises(AttributeError):
        rec.workload = None
    with pytest.raises(AttributeError):
        rec.no_such_field  # noqa: B018
    for tp in (1, 2, 3, 4, 6, 8, 16, 64):
        for a, b in ((rec.parallel.allreduce, sc.parallel.allreduce), (rec.parallel.allreduce_eager, sc.parallel.allreduce_eager)):
            assert (a.alpha_at(tp), a.bus_at(tp), a.max_bytes_at(tp)) == (b.alpha_at(tp), b.bus_at(tp), b.max_bytes_at(tp))
    for dt in ("bf16", "fp8", "int4", "fp4"):
        assert rec.gpu.flops_for(dt) == sc.gpu.flops_for(dt)
    for batch in (1, 47, 48, 200):
        assert rec.engine.running_at_once(batch, True) == sc.engine.running_at_once(batch, True)


COMMON = [{}, {"steps": 2, "accept": 2.1}, {"steps": 5}, {"batch": 32}, {"ctx": 16384}, {"topk": 4, "steps": 3},
          {"topk": 4, "steps": 3, "draft_tokens": 8}, {"accept_rates": [0.9, 0.7, 0.5]}, {"graph_max": 16, "batch": 64},
          {"max_running_requests": 8, "batch": 16}, {"stop_strings": True}, {"steps": 1, "draft_tokens": 7},
          {"model": "llama-3.1-8b", "gpu": "h100", "tp": 1}, {"model": "qwen3-30b-a3b", "gpu": "h200", "tp": 2,
                                                                "engine": "vllm", "steps": 3, "accept": 2.5},
          {"model": "kimi-k2.5", "dtype": "int4", "batch": 8}, {"model": "glm-4.7-flash", "gpu": "h200", "tp": 1, "topk": 4,
                                                                "draft_tokens": 6, "batch": 32, "engine": "sglang-v2"}]


@pytest.mark.parametrize("over", COMMON)
def test_record_path_takes_the_common_runs_and_matches(over):
    for name in builtin_scenarios():
        rec = build_record(name, **over)
        sc = build_scenario(name, **over)
        assert rec is not None, over
        assert rec.model_dump() == sc.model_dump()
        p_rec, p_sc = scenario_params(rec), scenario_params(sc)
        assert p_rec.keys() == p_sc.keys()
        assert all(json.dumps(p_rec[k].tolist() if hasattr(p_rec[k], "tolist") else p_rec[k])
                   == json.dumps(p_sc[k].tolist() if hasattr(p_sc[k], "tolist") else p_sc[k]) for k in p_rec)
        assert evaluate(rec).to_dict() == evaluate(sc).to_dict()
        # the cached file data the records share is never changed by a build
        from specsim.io.packagedata import data_root

        on_disk = json.loads(data_root("calibration").joinpath("scenarios", f"{name}.json").read_text())
        assert builtin_scenario_data(name) == on_disk


def test_record_path_declines_what_it_cannot_vouch_for():
    assert build_record(model="examples/qwen3-30b-a3b/config.json") is None  # a config.json: the schema reads it
    assert build_record(gpu="h100") is None  # the same deployment on another GPU
    assert build_record(engine="vllm") is None
    assert build_record(tp=4) is None
    assert build_record(dtype="fp8") is None
    assert build_record(model="llama-3.1-8b", profile="models/profiles/h200.json") is None
    assert build_record(model="llama-3.1-8b", gpu="") is None  # an empty name is an error, not "the base's GPU"
    assert build_record(steps=2.0) is None  # not plainly an int: the schema judges it
    assert build_record(stop_strings=1) is None
    assert build_record("no-such-scenario") is None
    assert build_record(accept=float("nan")) is None


_value = st.one_of(st.none(), st.integers(-3, 80), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                   st.text(max_size=3))
_overrides = st.fixed_dictionaries({}, optional={
    "steps": _value, "topk": _value, "draft_tokens": _value, "batch": _value, "ctx": _value,
    "accept": st.one_of(_value, st.floats(1, 9)), "graph_max": _value, "max_running_requests": _value,
    "stop_strings": _value, "accept_rates": st.one_of(st.none(), st.lists(st.floats(-0.5, 1.5), max_size=5)),
})


def _outcome(fn, over):
    try:
        return "ok", fn(**over)
    except SpecsimError as exc:
        return "error", str(exc)
    except (TypeError, ValueError) as exc:  # the schema path's own refusal of a non-number (library use)
        return "raised", type(exc).__name__


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_overrides)
def test_view_is_the_schema_build_or_its_error(over):
    """Whatever the overrides, build_view gives what build_scenario gives: the same scenario or the same error."""
    kind_v, view = _outcome(build_view, over)
    kind_s, sc = _outcome(build_scenario, over)
    assert kind_v == kind_s
    if kind_v == "ok":
        assert view.model_dump() == sc.model_dump()
    else:
        assert view == sc


def test_cold_predict_loads_no_schema(tmp_path):
    """``specsim predict`` on the default scenario and on a new deployment of presets runs without pydantic's
    models (the start-up figures of benchmarks/bench_predict.py); a scenario file still validates through the
    schema."""
    code = ("import sys; from specsim.cli import main; sys.argv = ['specsim', 'predict', '--steps', '3', '--batch', '8']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            "print(sorted(m for m in ('pydantic.main', 'specsim.physics.schema', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
    code2 = code.replace("'--steps', '3', '--batch', '8'", "'--model', 'llama-3.1-8b', '--gpu', 'h100', '--tp', '1'")
    out2 = subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True, check=True).stdout
    assert out2.strip().splitlines()[-1] == "[]"
    f = tmp_path / "mine.json"
    f.write_text(build_scenario().model_dump_json())
    code3 = code.replace("'--steps', '3', '--batch', '8'", f"'--scenario', {str(f)!r}")
    out3 = subprocess.run([sys.executable, "-c", code3], capture_output=True, text=True, check=True).stdout
    assert "specsim.physics.schema" in out3.strip().splitlines()[-1]


_plain = st.fixed_dictionaries({}, optional={
    "steps": st.integers(1, 8), "topk": st.integers(1, 8), "draft_tokens": st.integers(1, 80),
    "batch": st.integers(1, 300), "ctx": st.integers(0, 40_000), "accept": st.floats(1, 9),
    "accept_rates": st.lists(st.floats(0, 1), min_size=1, max_size=6), "graph_max": st.integers(0, 300),
    "max_running_requests": st.integers(1, 300), "stop_strings": st.booleans(),
})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_plain, st.sampled_from(sorted(builtin_scenarios())))
def test_record_path_takes_every_valid_run(over, name):
    """Plain in-range values: wherever the schema accepts the run, the record path takes it, with the same data."""
    kind, sc = _outcome(lambda **o: build_scenario(name, **o), over)
    rec = None if kind != "ok" else build_record(name, **over)
    assert (rec is not None) == (kind == "ok")
    if rec is not None:
        assert rec.model_dump() == sc.model_dump()


from specsim.io.packagedata import engine_names, gpu_names, model_names  # noqa: E402

_deployment = st.fixed_dictionaries({"model": st.sampled_from(model_names() + ["no-such-model", ""])}, optional={
    "gpu": st.sampled_from(gpu_names() + ["tpu", ""]), "tp": st.sampled_from([0, 1, 2, 3, 4, 8, 16]),
    "engine": st.sampled_from(engine_names() + ["trt", ""]), "dtype": st.sampled_from(["bf16", "fp8", "int4", "fp3", ""]),
    "steps": st.integers(1, 6), "topk": st.integers(1, 4), "batch": st.integers(1, 128), "ctx": st.integers(0, 9000),
    "accept": st.floats(1, 4), "max_running_requests": st.integers(1, 64),
})


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_deployment)
def test_new_deployments_from_presets_match_the_schema(over):
    """A new deployment built from preset records is the schema's build; where the schema refuses, so does the view."""
    kind, sc = _outcome(build_scenario, over)
    rec = build_record(**over)
    assert (rec is not None) == (kind == "ok"), (over, sc)
    kind_v, view = _outcome(build_view, over)
    assert kind_v == kind
    if rec is not None:
        assert rec.model_dump() == sc.model_dump()
        assert evaluate(rec).to_dict() == evaluate(sc).to_dict()
    else:
        assert view == sc


@pytest.mark.parametrize("kind,part,model", [("gpus", "gpu", "GPU"), ("models", "target", "TargetModel"),
                                              ("models", "draft", "DraftModel"), ("engines", "engine", "Engine")])
def test_presets_completed_with_defaults_are_the_schemas(kind, part, model):
    """The record path reads presets unvalidated: each file entry completed with the defaults is what the schema makes
    of it."""
    from specsim.io.packagedata import _table, allreduce_entry, allreduce_names

    for key, entry in _table(kind).items():
        as_record = record.record(model, record.complete(model, entry[part]))
        assert as_record.model_dump() == getattr(schema, model)(**entry[part]).model_dump(), key
    for name in allreduce_names():
        as_record = record.record("AllReduce", record.complete("AllReduce", allreduce_entry(name)))
        assert as_record.model_dump() == schema.AllReduce(**allreduce_entry(name)).model_dump(), name
