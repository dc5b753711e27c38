"""Package data without validation: where the shipped ``models/`` and ``calibration/`` folders are, the preset
tables and their names and aliases, and the built-in scenarios as their files hold them (no pydantic here: the
start-up path of ``specsim predict`` reads them; :mod:`specsim.io.presets` validates)."""

from __future__ import annotations

import json
import os
from functools import cache
from importlib import resources
from pathlib import Path

from ..errors import SpecsimError

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
        raise SpecsimError(field, name, f"choose one of: {', '.join(_table(kind))}"
                           + (", or a path to a Hugging Face config.json" if kind == "models" else ""))
    return canon, _table(kind)[canon]


def gpu_names() -> list[str]:
    return list(_table("gpus"))


def model_names() -> list[str]:
    return list(_table("models"))


def allreduce_names() -> list[str]:
    return list(_table("allreduce"))


def engine_names() -> list[str]:
    return list(_table("engines"))


@cache
def builtin_scenario_names() -> tuple[str, ...]:
    """The built-in scenarios' names (their files in ``calibration/scenarios``, in file-name order); no file is read."""
    files = sorted(f.name for f in data_root("calibration").joinpath("scenarios").iterdir() if f.name.endswith(".json"))
    return tuple(f[:-5] for f in files)


def builtin_scenarios() -> dict[str, str]:
    """Built-in scenario names -> their one-line description."""
    return {n: builtin_scenario_data(n).get("description", "") for n in builtin_scenario_names()}


@cache
def builtin_scenario_data(name: str) -> dict:
    """A built-in scenario's file as it is: the schema's canonical dump of it (``tests/test_record.py`` holds each
    file to ``Scenario.model_validate(file).model_dump(mode="json")``). Callers copy before they change it."""
    return json.loads(data_root("calibration").joinpath("scenarios", f"{name}.json").read_text(encoding="utf-8"))


def gpu_entry(name: str) -> tuple[dict, str]:
    """A GPU preset's fields as the file holds them, and the name of its default all-reduce preset."""
    _, entry = _resolve("gpus", name, "gpu")
    return entry["gpu"], entry["default_allreduce"]


def allreduce_entry(name: str) -> dict:
    """An all-reduce preset's fields; its ``fallback`` (another preset's name) embedded as that preset's fields."""
    _, entry = _resolve("allreduce", name, "allreduce")
    fields = {k: v for k, v in entry.items() if k != "aliases"}
    if isinstance(fields.get("fallback"), str):
        fields["fallback"] = allreduce_entry(fields["fallback"])
    return fields


def engine_entry(name: str) -> dict:
    return _resolve("engines", name, "engine")[1]["engine"]


def names_a_file(name: str) -> bool:
    """Whether a ``--model`` value is a path (a Hugging Face config.json or its folder), not a preset name: a file or
    folder of that name exists and, without a path separator or ``.json``, it names no model preset (a preset wins
    over a stray file; an existing ``org/name`` folder over the preset of that hub id); or it names nothing that
    exists but looks like a path (a separator or ``.json``) and is no preset's hub id (it is then refused as the
    missing file it is). ``--model garbage.bin`` is read, and refused, as the file it is."""
    try:
        exists = bool(name) and os.path.lexists(name)
    except (ValueError, OSError):  # a NUL byte, a name the system refuses
        exists = False
    if any(c in name for c in "/\\") or name.endswith(".json"):
        return exists or _find("models", name) is None
    return exists and _find("models", name) is None


def model_entry(name: str) -> tuple[dict, dict]:
    """A model preset's target and EAGLE head fields."""
    _, entry = _resolve("models", name, "model")
    return entry["target"], entry["draft"]


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


@cache
def builtin_dataset_names() -> tuple[str, ...]:
    """The shipped datasets ``specsim validate NAME`` scores: measured-points datasets (model, gpu, tp, points) and
    throughput-sweeps datasets; the other files beside them are kernel timings other code reads."""
    names = []
    for f in sorted(data_root("calibration").joinpath("datasets").iterdir(), key=lambda f: f.name):
        if not f.name.endswith(".json"):
            continue
        try:
            d = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(d, dict) and (d.get("kind") == "throughput_sweeps" or {"model", "gpu", "tp", "points"} <= d.keys()):
            names.append(f.name.removesuffix(".json"))
    return tuple(names)


def unknown_dataset(name: str) -> SpecsimError:
    """The error for a ``validate`` dataset that is neither a file nor a built-in name: it lists the built-in ones."""
    return SpecsimError("dataset", name, f"no such file or built-in dataset; built-in datasets: "
                                         f"{', '.join(builtin_dataset_names())}")
