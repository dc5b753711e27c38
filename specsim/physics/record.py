"""Read-only records of validated scenario data, for the start-up path that loads no pydantic.

A record is the plain data of a schema object (what ``model_dump()`` returns) behind attribute access,
with the object's derived quantities (:mod:`specsim.physics.methods`). ``specsim predict`` on a built-in
scenario builds one instead of the pydantic :class:`~specsim.physics.schema.Scenario`: the scenario's
file is the schema's own canonical dump (a test validates it), and the overrides a command applies are
checked with the schema's rules (:mod:`specsim.physics.rules`); anything the record path cannot vouch
for goes through the schema, which gives the error. Tests hold :data:`SHAPES` and :data:`DEFAULTS` to
the schema's own.
"""

from __future__ import annotations

from .defaults import DEFAULTS
from .methods import AllReduceMethods, EngineMethods, GPUMethods
from .rules import (
    CAPTURE_SIZES,
    MAX_LIST,
    MAX_TEXT,
    acceptance_problem,
    draft_tokens_for,
    finite_number,
    in_limits,
    scenario_problem,
)

#: each model's fields that are not plain values: a nested model, a mapping of models, or a mapping keyed by
#: TP size (JSON writes its integer keys as text)
SHAPES: dict[str, dict[str, tuple]] = {
    "Scenario": {"gpu": ("model", "GPU"), "parallel": ("model", "Parallel"), "target": ("model", "TargetModel"),
                 "draft": ("model", "DraftModel"), "engine": ("model", "Engine"),
                 "speculation": ("model", "Speculation"), "acceptance": ("model", "Acceptance"),
                 "workload": ("model", "Workload")},
    "Parallel": {"allreduce": ("model", "AllReduce"), "allreduce_eager": ("model", "AllReduce")},
    "AllReduce": {"alpha_us": ("int_keys",), "bus_bytes_per_s_by_tp": ("int_keys",),
                  "max_message_bytes_by_tp": ("int_keys",), "fallback": ("model", "AllReduce")},
    "TargetModel": {"attention": ("model", "Attention"), "dtypes": ("model", "WeightDtypes"), "moe": ("model", "MoE")},
    "Engine": {"model_kernels": ("models", "ModelKernels")},
    "GPU": {}, "Attention": {}, "MoE": {}, "WeightDtypes": {}, "DraftModel": {}, "ModelKernels": {},
    "Speculation": {}, "Acceptance": {}, "Workload": {},
}

class Record:
    """Attribute access to one validated object's plain data (read-only; its lists and mappings are shared with the
    cached data it was built from: copy them, as ``model_dump()`` does, before changing anything)."""

    def __init__(self, model: str, data: dict):
        self.__dict__.update(data)  # plain attributes: read as fast as a pydantic model's
        self.__dict__["_model"] = model

    def __getattr__(self, name: str):  # only reached for a name that is not a field
        raise AttributeError(f"{self.__dict__.get('_model', 'record')} has no field {name!r}")

    def __setattr__(self, name, value):
        raise AttributeError(f"{self._model} record is read-only")

    def __eq__(self, other) -> bool:
        return isinstance(other, Record) and self._model == other._model and self.model_dump() == other.model_dump()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{self._model}Record({self.model_dump()!r})"

    def model_dump(self) -> dict:
        """The plain data, as the schema model's ``model_dump()`` gives it (a deep copy)."""
        return {k: _plain(v) for k, v in self.__dict__.items() if k != "_model"}


class GPURecord(GPUMethods, Record):
    pass


class AllReduceRecord(AllReduceMethods, Record):
    pass


class EngineRecord(EngineMethods, Record):
    pass


_CLASSES = {"GPU": GPURecord, "AllReduce": AllReduceRecord, "Engine": EngineRecord}


def _plain(x):
    if isinstance(x, Record):
        return x.model_dump()
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


def record(model: str, data: dict) -> Record:
    """A record of ``model`` over validated ``data`` (nested models become records; TP keys become ints)."""
    out = dict(data)
    for name, shape in SHAPES[model].items():
        v = out.get(name)
        if v is None:
            continue
        if shape[0] == "model":
            out[name] = record(shape[1], v)
        elif shape[0] == "models":
            out[name] = {k: record(shape[1], x) for k, x in v.items()}
        else:
            out[name] = {int(k): x for k, x in v.items()}
    return _CLASSES.get(model, Record)(model, out)


def complete(model: str, data: dict) -> dict:
    """``data`` of ``model`` with every field it leaves out at its default, nested models too: what the schema's
    ``model_dump()`` gives for trusted package data (presets), numbers aside (an int where a float is declared
    stays an int, equal in value). ``data`` is not changed: a mapping that lacks nothing, at any depth, is
    returned itself (records share their data, read-only), else a new one with the defaults (copies) filled in."""
    import copy

    defaults = DEFAULTS[model]
    out = None
    if len(data) < len(defaults) or not data.keys() >= defaults.keys():
        out = {k: copy.deepcopy(v) for k, v in defaults.items() if k not in data}
        out.update(data)
    cur = data if out is None else out
    for name, shape in SHAPES[model].items():
        v = cur.get(name)
        if v is None or shape[0] == "int_keys":
            continue
        if shape[0] == "model":
            new = complete(shape[1], v)
        else:
            new = {k: complete(shape[1], x) for k, x in v.items()}
            if all(new[k] is x for k, x in v.items()):
                new = v
        if new is not v:
            if out is None:
                out = cur = dict(data)
            out[name] = new
    return cur


def default_record(model: str) -> Record:
    """A record of ``model`` with every field at its default."""
    return record(model, DEFAULTS[model])


def _is_int(x) -> bool:
    return type(x) is int


def _numbers(x) -> bool:
    return isinstance(x, list) and 0 < len(x) <= MAX_LIST and all(finite_number(v) for v in x)


def checked_scenario(data: dict) -> Record | None:
    """A record of a scenario whose parts a command may have changed (speculation, acceptance, workload, the
    engine's running cap and captured sizes) when they pass the schema's ranges and rules; None when any does
    not, or is not plainly of its type: the schema then judges it (and names the problem)."""
    data = complete("Scenario", data)  # what a command assembled anew (a fresh deployment's parts) at its defaults
    spec, acc, work, eng = data["speculation"], data["acceptance"], data["workload"], data["engine"]
    steps, topk, width = spec.get("steps"), spec.get("topk"), spec.get("num_draft_tokens")
    if set(spec) - {"steps", "topk", "num_draft_tokens"} or not (_is_int(steps) and _is_int(topk)):
        return None
    if not (in_limits("Speculation.steps", steps) and in_limits("Speculation.topk", topk)):
        return None
    if width is not None and not (_is_int(width) and in_limits("Speculation.num_draft_tokens", width)):
        return None
    width = draft_tokens_for(steps, topk, width)
    if width is None or set(acc) - set(DEFAULTS["Acceptance"]):
        return None
    tau = acc["accept_length"]
    if tau is not None and not (finite_number(tau) and in_limits("Acceptance.accept_length", tau)):
        return None
    if any(acc[k] is not None and not _numbers(acc[k]) for k in ("rates", "pmf", "shape_rates")):
        return None
    if type(acc["source"]) is not str or not acc["source"].isprintable() or len(acc["source"]) > MAX_TEXT:
        return None
    if acceptance_problem(acc["accept_length"], acc["rates"], acc["pmf"], acc["shape_rates"]):
        return None
    if set(work) != {"batch", "ctx", "stop_strings"} or not (_is_int(work["batch"]) and _is_int(work["ctx"])):
        return None
    if not (in_limits("Workload.batch", work["batch"]) and in_limits("Workload.ctx", work["ctx"])
            and type(work["stop_strings"]) is bool):
        return None
    cap = eng.get("max_running_requests")
    if cap is not None and not (_is_int(cap) and in_limits("Engine.max_running_requests", cap)):
        return None
    pool, frac = eng.get("kv_pool_tokens"), eng.get("kv_memory_fraction")
    if pool is not None and not (_is_int(pool) and in_limits("Engine.kv_pool_tokens", pool)):
        return None
    if frac is not None and not (finite_number(frac) and in_limits("Engine.kv_memory_fraction", frac)):
        return None
    lo, hi = CAPTURE_SIZES
    for sizes in (eng.get("capture_batch_sizes"), eng.get("capture_token_sizes")):
        if sizes is not None and not (isinstance(sizes, list) and all(_is_int(s) and lo <= s <= hi for s in sizes)):
            return None
    notes = data.get("notes", [])
    if not (isinstance(notes, list) and all(type(n) is str and n.isprintable() for n in notes)):
        return None
    if scenario_problem(data["parallel"]["tp"], data["target"]["attention"]["num_heads"], data["draft"]["num_heads"],
                        tau, steps):
        return None
    out = dict(data)
    out["speculation"] = {"steps": steps, "topk": topk, "num_draft_tokens": width}
    out["acceptance"] = {k: (float(v) if k == "accept_length" and v is not None else
                             [float(r) for r in v] if isinstance(v, list) else v) for k, v in acc.items()}
    return record("Scenario", out)
