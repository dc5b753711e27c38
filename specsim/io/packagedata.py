"""Package data without validation: where the shipped ``models/`` and ``calibration/`` folders are, the preset
tables and their names and aliases, and the built-in scenarios as their files hold them (no pydantic here: the
start-up path of ``specsim predict`` reads them; :mod:`specsim.io.presets` validates)."""

from __future__ import annotations

import json
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


@cache
def builtin_scenario_data(name: str) -> dict:
    """A built-in scenario's file as it is: the schema's canonical dump of it (``tests/test_record.py`` holds each
    file to ``Scenario.model_validate(file).model_dump(mode="json")``). Callers copy before they change it."""
    return json.loads(data_root("calibration").joinpath("scenarios", f"{name}.json").read_text(encoding="utf-8"))
