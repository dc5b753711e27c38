"""Presets shipped as package data (``models/``) and built-in scenarios (``calibration/``)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from pydantic import ValidationError

from ..errors import SpecsimError
from ..physics.schema import GPU, AllReduce, DraftModel, Engine, Scenario, TargetModel
from .packagedata import (  # noqa: F401  (re-exported)
    DEFAULT_SCENARIO,
    _find,
    _json,
    _resolve,
    _table,
    allreduce_entry,
    allreduce_names,
    builtin_scenario_data,
    builtin_scenarios,
    data_root,
    engine_entry,
    engine_names,
    gpu_entry,
    gpu_names,
    model_entry,
    model_names,
    moe_config_tuned,
    names_a_file,
    preset_key,
)


def get_gpu(name: str) -> tuple[GPU, AllReduce]:
    """A GPU preset and its default small-message all-reduce."""
    gpu, allreduce = gpu_entry(name)
    return GPU(**gpu), get_allreduce(allreduce)


def get_allreduce(name: str) -> AllReduce:
    """An all-reduce preset; its ``fallback`` (the implementation messages past its size limit take) is
    another preset's name, embedded here as that preset."""
    return AllReduce(**allreduce_entry(name))


def get_engine(name: str) -> Engine:
    return Engine(**engine_entry(name))


def get_model(name_or_path: str) -> tuple[TargetModel, DraftModel]:
    """A model preset (target + EAGLE-3 head), or a Hugging Face config.json path."""
    if names_a_file(name_or_path):
        from .hfconfig import load_hf_config

        return load_hf_config(name_or_path)
    target, draft = model_entry(name_or_path)
    return TargetModel(**target), DraftModel(**draft)


def scenario_from_dict(data: dict, origin: str = "scenario") -> Scenario:
    """Validate a scenario dict; the first problem becomes a one-line SpecsimError naming the field."""
    from ..errors import from_validation_error

    if not isinstance(data, dict):
        raise SpecsimError(origin, None, "must hold a JSON object", show_value=False)
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(exc, origin) from None


@cache
def _builtin_scenario(name: str) -> Scenario:
    """A built-in scenario, validated once per process (callers copy before they change it)."""
    return scenario_from_dict(builtin_scenario_data(name), f"scenario {name}")


def load_scenario(name_or_file: str | None = None) -> Scenario:
    """A built-in scenario by name, or a scenario JSON file (as written by dump/calibrate)."""
    import os

    if name_or_file is not None and not isinstance(name_or_file, (str, os.PathLike)):
        from ..errors import SpecsimTypeError

        raise SpecsimTypeError("scenario", name_or_file, "allowed: a built-in scenario name, a scenario JSON path or None "
                               "(the default)")
    name_or_file = None if name_or_file is None else os.fspath(name_or_file)
    name = name_or_file or DEFAULT_SCENARIO
    builtins = builtin_scenarios()
    if name_or_file is not None and not str(name_or_file).strip():  # "" is not "the default"
        raise SpecsimError("scenario", name_or_file, f"give a built-in name or a file; built-in scenarios: {', '.join(builtins)}")
    if name in builtins:
        return _builtin_scenario(name)
    from .safe_read import read_json_file

    path = Path(name)
    if not path.exists() and not path.is_symlink() and name != "-":
        raise SpecsimError("scenario", name, f"no such file or built-in scenario; built-in scenarios: {', '.join(builtins)}")
    data = read_json_file(name, "scenario", allow_stdin=True)
    if not isinstance(data, dict):
        raise SpecsimError("scenario", name, "must hold a JSON object")
    return scenario_from_dict(with_kv_pool_fields(data), f"scenario {path.name}")


#: the engine fields of the KV-pool model (session 29): a scenario file saved before them takes its engine preset's
KV_POOL_FIELDS = ("kv_memory_rule", "kv_reserve_bytes", "kv_reserve_fraction")


def with_kv_pool_fields(data: dict) -> dict:
    """``data`` whose engine, written before the KV-pool fields existed (none of :data:`KV_POOL_FIELDS`), takes
    them from the engine preset of the same name, with a note; anything else is returned as it is."""
    eng = data.get("engine")
    if not isinstance(eng, dict) or any(k in eng for k in KV_POOL_FIELDS) or not isinstance(eng.get("name"), str):
        return data
    from .packagedata import engine_entry

    key = preset_key("engines", eng["name"])
    if key is None:
        return data
    preset = engine_entry(key)
    sources = {**(eng.get("sources") or {}), **{k: preset["sources"][k] + " (the engine preset's: this file predates "
                                                 "the field)" for k in KV_POOL_FIELDS if k in preset.get("sources", {})}}
    new_eng = {**eng, **{k: preset[k] for k in KV_POOL_FIELDS if k in preset}, "sources": sources}
    notes = [*(data.get("notes") or []), f"the scenario file predates the KV-pool model: its engine takes the "
             f"{eng['name']} preset's pool rule ({preset.get('kv_memory_rule')})"]
    return {**data, "engine": new_eng, "notes": notes}
