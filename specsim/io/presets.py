"""Presets shipped as package data (``models/``) and built-in scenarios (``calibration/``)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path

from pydantic import ValidationError

from ..errors import SpecsimError
from ..physics.schema import GPU, AllReduce, DraftModel, Engine, Scenario, TargetModel

DEFAULT_SCENARIO = "kimi-k2.5-seed"


def data_root(kind: str):
    """The shipped data folder ``models`` or ``calibration``.

    Installed, it is the package ``specsim.<kind>``; when the source tree shadows the installed
    package (tests run from a checkout) it is the top-level folder beside ``specsim/``.
    """
    try:
        return resources.files(f"specsim.{kind}")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / kind


@cache
def _json(kind: str, name: str) -> dict:
    return json.loads(data_root(kind).joinpath(name).read_text(encoding="utf-8"))


def _table(kind: str) -> dict:
    return {k: v for k, v in _json("models", f"{kind}.json").items() if not k.startswith("_")}


_COMPONENT = {"gpus": "gpu", "engines": "engine", "models": "target"}  # the entry's part that carries a "name"


def _find(kind: str, name: str, by_component_name: bool = False) -> str | None:
    """The preset key that ``name`` is (a key or an alias; optionally the component's own name), or None."""
    key = name.strip().lower()
    inner = _COMPONENT.get(kind)
    for canon, entry in _table(kind).items():
        if key == canon or key in [a.lower() for a in entry.get("aliases", [])]:
            return canon
        if by_component_name and inner and key == str(entry.get(inner, {}).get("name", "")).lower():
            return canon
    return None


def preset_key(kind: str, name: str) -> str | None:
    """The preset key (``gpus``, ``engines``, ``models``) for a key, an alias or the component's own name."""
    return _find(kind, name, by_component_name=True)


def _resolve(kind: str, name: str, field: str) -> tuple[str, dict]:
    canon = _find(kind, name)
    if canon is None:
        raise SpecsimError(field, name, f"choose one of: {', '.join(_table(kind))}")
    return canon, _table(kind)[canon]


def gpu_names() -> list[str]:
    return list(_table("gpus"))


def model_names() -> list[str]:
    return list(_table("models"))


def allreduce_names() -> list[str]:
    return list(_table("allreduce"))


def engine_names() -> list[str]:
    return list(_table("engines"))


def get_gpu(name: str) -> tuple[GPU, AllReduce]:
    """A GPU preset and its default small-message all-reduce."""
    _, entry = _resolve("gpus", name, "gpu")
    return GPU(**entry["gpu"]), get_allreduce(entry["default_allreduce"])


def get_allreduce(name: str) -> AllReduce:
    """An all-reduce preset; its ``fallback`` (the implementation messages past its size limit take) is
    another preset's name, embedded here as that preset."""
    canon, entry = _resolve("allreduce", name, "allreduce")
    fields = {k: v for k, v in entry.items() if k != "aliases"}
    if isinstance(fields.get("fallback"), str):
        fields["fallback"] = get_allreduce(fields["fallback"]).model_dump()
    return AllReduce(**fields)


def get_engine(name: str) -> Engine:
    _, entry = _resolve("engines", name, "engine")
    return Engine(**entry["engine"])


def get_model(name_or_path: str) -> tuple[TargetModel, DraftModel]:
    """A model preset (target + EAGLE-3 head), or a Hugging Face config.json path."""
    looks_like_path = any(c in name_or_path for c in "/\\") or name_or_path.endswith(".json")
    if looks_like_path and (Path(name_or_path).exists() or name_or_path.endswith(".json")):
        from .hfconfig import load_hf_config

        return load_hf_config(name_or_path)
    _, entry = _resolve("models", name_or_path, "model")
    return TargetModel(**entry["target"]), DraftModel(**entry["draft"])


def builtin_scenarios() -> dict[str, str]:
    """Built-in scenario names -> their one-line description."""
    return dict(_builtin_index())


@cache
def _builtin_index() -> dict[str, str]:
    out = {}
    for f in sorted(data_root("calibration").joinpath("scenarios").iterdir(), key=lambda x: x.name):
        if f.name.endswith(".json"):
            out[f.name[:-5]] = json.loads(f.read_text(encoding="utf-8")).get("description", "")
    return out


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
    text = data_root("calibration").joinpath("scenarios", f"{name}.json").read_text(encoding="utf-8")
    return scenario_from_dict(json.loads(text), f"scenario {name}")


def load_scenario(name_or_file: str | None = None) -> Scenario:
    """A built-in scenario by name, or a scenario JSON file (as written by dump/calibrate)."""
    name = name_or_file or DEFAULT_SCENARIO
    builtins = builtin_scenarios()
    if name_or_file is not None and not str(name_or_file).strip():  # "" is not "the default"
        raise SpecsimError("scenario", name_or_file, f"give a built-in name or a file; built-in scenarios: {', '.join(builtins)}")
    if name in builtins:
        return _builtin_scenario(name)
    from .safe_read import read_json_file

    path = Path(name)
    if not path.exists() and not path.is_symlink() and name != "-":
        raise SpecsimError("scenario", name, f"not a file; built-in scenarios: {', '.join(builtins)}")
    data = read_json_file(name, "scenario", allow_stdin=True)
    if not isinstance(data, dict):
        raise SpecsimError("scenario", name, "must hold a JSON object")
    return scenario_from_dict(data, f"scenario {path.name}")


def moe_config_tuned(gpu_name: str, num_experts: int, num_shared: int, n_per_rank: int, dtype: str,
                     block_scales: bool = True) -> str | None:
    """The tuned fused-MoE config file SGLang ships for these experts on this GPU, or None (``get_default_config``).

    From ``models/sglang_moe_configs.json``. Two approximations, as the model records neither: the kernel's
    expert count is the routed experts, or one more where SGLang fuses the shared expert into the kernel
    (DeepSeek-V3, GLM-4.x), and either name counts; for fp8 / int8 weights the tables of their scaling
    (``block_scales``: a ``block_shape`` name; else per-tensor or per-channel ones). An unknown GPU has no tables.
    """
    idx = _json("models", "sglang_moe_configs.json")
    dev = idx["device_names"].get(preset_key("gpus", gpu_name) or "")
    if dev is None:
        return None
    kind = {"fp8": "fp8_w8a8", "int8": "int8_w8a8", "int4": "int4_w4a16"}.get(dtype, "bf16")
    for e in dict.fromkeys((num_experts, num_experts + min(num_shared, 1))):
        key = f"E={e},N={n_per_rank},device_name={dev},dtype={kind}"
        for name in idx["configs"]:
            if name == key or name.startswith(key + ","):
                if kind in ("fp8_w8a8", "int8_w8a8") and ("block_shape" in name) != bool(block_scales):
                    continue  # SGLang looks up the file of the checkpoint's own scaling
                return name
    return None
