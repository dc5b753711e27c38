"""One scenario builder for every command: base scenario + deployment overrides + one policy."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from ..errors import SpecsimError, SpecsimTypeError
from ..io.packagedata import (
    DEFAULT_SCENARIO,
    allreduce_entry,
    builtin_scenario_data,
    builtin_scenario_names,
    engine_entry,
    gpu_entry,
    model_entry,
    names_a_file,
    preset_key,
)
from ..physics.rules import FLAG_LIMITS, LIMITS, MAX_LIST, check_limit, finite_number

if TYPE_CHECKING:
    from ..physics.record import Record
    from ..physics.schema import Scenario


PRESETS_MARK = " (presets only, not calibrated)"  # the end of a description built from presets alone


def check_running_cap(value, flag: str = "max-running-requests") -> int:
    """A cap on requests run at once: an integer (numpy's too, not a bool) in the schema's range, else the one-line
    error naming ``flag``."""
    import numbers

    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        lo, hi = LIMITS["Engine.max_running_requests"]
        raise SpecsimError(flag, value, f"allowed: an integer in [{lo}, {hi}]")
    return int(check_limit("Engine.max_running_requests", int(value), flag))


def check_tp(tp: int, target_heads: int, draft_heads: int) -> None:
    """TP must be in the schema's range and divide the attention heads of the target and of the draft head."""
    check_limit("Parallel.tp", tp, "tp")
    for who, heads in (("target", target_heads), ("draft", draft_heads)):
        if heads % tp:
            ok = [d for d in range(1, heads + 1) if heads % d == 0]
            raise SpecsimError("tp", tp, f"must divide the {who} model's {heads} attention heads; allowed: {ok}")


def _check_deployment_limits(*, batch, ctx, tp, steps, topk, draft_tokens) -> None:
    """The flags' values in the schema's ranges (:data:`specsim.physics.rules.LIMITS`), each error naming its flag."""
    for val, flag in ((batch, "batch"), (ctx, "ctx"), (tp, "tp"), (steps, "steps"), (topk, "topk"),
                      (draft_tokens, "draft-tokens")):
        if val is not None:
            check_limit(FLAG_LIMITS[flag], val, flag)


def check_accept(accept: float, steps: int, flag: str = "accept") -> None:
    """An accept length at ``steps`` draft steps: in [1, steps + 1] (the bonus token included)."""
    if not (1.0 <= accept <= steps + 1):
        raise SpecsimError(flag, accept, f"accept length must be in [1, steps+1] = [1, {steps + 1}] for steps={steps}")


#: Per-position conditional acceptance of a well-trained EAGLE-3 head: EAGLE-3 paper
#: (Li et al. 2025, https://arxiv.org/abs/2503.01840), Fig. 7, positions stay ~0.76-0.81.
GENERIC_EAGLE3_RATES = [0.8, 0.78, 0.77, 0.76, 0.76, 0.76, 0.76, 0.76]
GENERIC_EAGLE3_SOURCE = ("generic EAGLE-3 profile: EAGLE-3 paper Fig. 7, per-position ~0.76-0.81 "
                         "(https://arxiv.org/abs/2503.01840)")
DTYPES = ("bf16", "fp8", "int4")


def gpu_preset_key(name: str) -> str | None:
    """The GPU preset whose device is ``name`` (a preset key, alias or a scenario's GPU name)."""
    return preset_key("gpus", name)


_DTYPE_TAG_RE = re.compile(r"\s*\([^()]*\b(?:bf16|fp16|fp8|fp4|int4|int8|w4a16|w8a8)\b[^()]*\)\s*$", re.IGNORECASE)


def dtype_tagged_name(name: str, tag: str) -> str:
    """``name`` with its trailing dtype tag, e.g. "(bf16)" or "(block FP8)", replaced by "(tag)"."""
    return f"{_DTYPE_TAG_RE.sub('', name)} ({tag})"


def apply_dtype(target: dict, dtype: str) -> None:
    """Set the weight dtype of a target dict: int4 on a MoE quantises the routed experts only (W4A16,
    Kimi-K2.5 style); otherwise attention, dense MLP and experts all take ``dtype``."""
    if dtype not in DTYPES:
        raise SpecsimError("dtype", dtype, f"choose one of: {', '.join(DTYPES)}")
    dt = target["dtypes"]
    if dtype == "int4" and target.get("moe") is not None:
        dt["routed_experts"] = "int4"
        tag = "INT4 routed experts"
    else:
        for k in ("attention", "dense_mlp", "shared_experts", "routed_experts"):
            dt[k] = dtype
        tag = dtype
    if isinstance(target.get("name"), str):  # the title says the dtype that is modeled: "Llama-3.1-8B (int4)"
        target["name"] = dtype_tagged_name(target["name"], tag)


def set_moe_prior(engine: dict, preset, target: dict) -> None:
    """The engine preset's routed-expert bandwidth prior for the target's expert dtype: W4A16 kernels
    (``moe_mem_efficiency_int4``) when the routed experts are int4, else ``moe_mem_efficiency``."""
    int4 = target.get("moe") is not None and target["dtypes"]["routed_experts"] == "int4"
    use_int4 = int4 and preset.moe_mem_efficiency_int4 is not None
    engine["moe_mem_efficiency"] = preset.moe_mem_efficiency_int4 if use_int4 else preset.moe_mem_efficiency
    src = preset.sources.get("moe_mem_efficiency_int4" if use_int4 else "moe_mem_efficiency")
    if src:
        engine.setdefault("sources", {})["moe_mem_efficiency"] = src + (" (routed experts are INT4)" if use_int4 else "")


def set_moe_config(data: dict) -> None:
    """A deployment on an engine with Triton fused-MoE tiles runs a tuned config table where the engine ships
    one for its experts, TP and GPU (:func:`~specsim.io.presets.moe_config_tuned`), else the default config."""
    from ..io.packagedata import moe_config_tuned

    eng, t = data["engine"], data["target"]
    if eng.get("moe_tiles", "none") == "none" or not t.get("moe"):
        return
    m, tp = t["moe"], data["parallel"]["tp"]
    block = m.get("fp8_scales", "block") == "block"
    found = moe_config_tuned(data["gpu"]["name"], m["num_experts"], m.get("num_shared_experts") or 0,
                             m["expert_intermediate"] // tp, t["dtypes"]["routed_experts"], block)
    eng["moe_config"] = "tuned" if found else "default"
    eng["moe_fp8_block_scales"] = block  # the model's checkpoint scaling (target.moe.fp8_scales)
    sources = eng.setdefault("sources", {})
    sources["moe_fp8_block_scales"] = f"target.moe.fp8_scales = {m.get('fp8_scales', 'block')}"
    sources["moe_config"] = (
        (f"tuned table {found}.json" if found else
         f"no tuned table for E={m['num_experts']}, N={m['expert_intermediate'] // tp}, {data['gpu']['name']}, "
         f"{t['dtypes']['routed_experts']}: get_default_config")
        + " in SGLang v0.5.6's fused_moe_triton/configs (models/sglang_moe_configs.json)")


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


class _Validated:
    """Presets as the schema's models, and scenarios validated by it."""

    def model(self, name: str):
        from ..io.presets import get_model

        return get_model(name)

    def gpu(self, name: str):
        from ..io.presets import get_gpu

        return get_gpu(name)

    def engine(self, name: str):
        from ..io.presets import get_engine

        return get_engine(name)

    def scenario(self, data: dict):
        from ..io.presets import scenario_from_dict

        return scenario_from_dict(data, "scenario")


class _Records:
    """Presets as records of their files completed with the schema's defaults (package data, validated by the
    tests), and scenarios the record path vouches for (else :class:`_NotVouched`)."""

    def model(self, name: str):
        from ..physics.record import complete, record

        if names_a_file(name):
            raise _NotVouched  # a Hugging Face config.json: read and validated by the schema
        target, draft = model_entry(name)
        return record("TargetModel", complete("TargetModel", target)), record("DraftModel", complete("DraftModel", draft))

    def gpu(self, name: str):
        from ..physics.record import complete, record

        gpu, allreduce = gpu_entry(name)
        return record("GPU", complete("GPU", gpu)), record("AllReduce", complete("AllReduce", allreduce_entry(allreduce)))

    def engine(self, name: str):
        from ..physics.record import complete, record

        return record("Engine", complete("Engine", engine_entry(name)))

    def scenario(self, data: dict):
        return _vouched(data)


VALIDATED, RECORDS = _Validated(), _Records()


#: the TP sizes a new deployment given no ``--tp`` is tried at, smallest first (one 8-GPU node at most)
DEFAULT_TP_CHOICES = (1, 2, 4, 8)


def default_tp(model: str, gpu: str, engine: str | None = None, *, dtype: str | None = None, batch: int | None = None,
               ctx: int | None = None, presets=VALIDATED) -> tuple[int, str]:
    """:func:`_default_tp`, cached for preset names (a config.json is read again each call)."""
    if names_a_file(model):
        return _default_tp(model, gpu, engine, dtype, batch, ctx, presets)
    return _default_tp_cached(model, gpu, engine, dtype, batch, ctx, presets)


def _default_tp(model, gpu, engine, dtype, batch, ctx, presets) -> tuple[int, str]:
    """The TP a new deployment takes when none is given: the smallest of :data:`DEFAULT_TP_CHOICES` that divides the
    target's and the draft's attention heads and whose weights and KV cache (the workload's running requests) fit one
    GPU by predict's memory rule; the largest such TP where none fits (predict then warns). Returns it and a note."""
    import numpy as np

    from ..physics.cost import weight_bytes_per_rank
    from ..physics.params import scenario_params
    from .predict import fits_memory, kv_bytes_per_rank

    one = fresh_scenario(model, gpu, 1, engine, dtype=dtype, batch=batch, ctx=ctx, presets=presets)
    heads = (one.target.attention.num_heads, one.draft.num_heads)
    tps = np.array([t for t in DEFAULT_TP_CHOICES if all(h % t == 0 for h in heads)], dtype=float)
    p = dict(scenario_params(one))
    p["tp"] = tps
    ok = fits_memory(weight_bytes_per_rank(p), kv_bytes_per_rank(one, tp=tps, p=p), one.gpu.memory_bytes)
    tried = ", ".join(str(int(t)) for t in tps)
    if ok.any():
        tp = int(tps[np.argmax(ok)])
        return tp, f"tp={tp}: the smallest TP of {tried} whose weights and KV cache fit one {one.gpu.name} (pass --tp to choose)"
    tp = int(tps[-1])
    return tp, (f"tp={tp}: the largest TP of {tried}, though at none do the weights and KV cache fit one {one.gpu.name} "
                "(pass --tp to choose)")


_default_tp_cached = functools.lru_cache(maxsize=256)(_default_tp)


def fresh_scenario(model: str, gpu: str, tp: int, engine: str | None = None, *, dtype: str | None = None,
                   batch: int | None = None, ctx: int | None = None, name: str | None = None,
                   presets=VALIDATED) -> Scenario:
    """A new deployment from presets only: no fitted parameter, measurement, calibration or provenance of
    any other scenario. Named ``<model>-<gpu>-tp<N>-<engine>``; acceptance is the generic EAGLE-3 profile
    until the caller gives its own. ``presets``: :data:`VALIDATED` (the schema's models) or :data:`RECORDS`
    (records, for :func:`build_record`)."""
    target, draft = presets.model(model)
    assumed = [v for k, v in target.sources.items() if k.startswith("assumed_")]  # a config.json's gaps
    g, ar = presets.gpu(gpu)
    eng = presets.engine(engine or "sglang")
    check_tp(tp, target.attention.num_heads, draft.num_heads)
    t = target.model_dump()
    if dtype is not None:
        apply_dtype(t, dtype)
    model_label = _slug(model) if not any(c in model for c in "/\\") and not model.endswith(".json") else _slug(target.name)
    gkey = gpu_preset_key(gpu) or _slug(g.name)
    if dtype is not None:
        model_label += f"-{dtype}"
    data = {
        "name": name or f"{model_label}-{gkey}-tp{tp}-{preset_key('engines', engine or 'sglang') or _slug(eng.name)}",
        "description": f"{target.name}{f' as {dtype}' if dtype else ''} + {draft.name} on {tp}x {g.name}, {eng.name}"
                       f"{PRESETS_MARK}",
        "gpu": g.model_dump(), "target": t, "draft": draft.model_dump(), "engine": eng.model_dump(),
        "parallel": {"tp": tp, "allreduce": ar.model_dump(), "allreduce_eager": None},
        "speculation": {"steps": 3, "topk": 1},
        "acceptance": {"rates": list(GENERIC_EAGLE3_RATES), "source": GENERIC_EAGLE3_SOURCE},
        "workload": {"batch": 1 if batch is None else batch, "ctx": 2048 if ctx is None else ctx},
        "provenance": {"built_from": "presets", "model": model, "gpu": gpu, "tp": tp, "engine": eng.name,
                       **({"dtype": dtype} if dtype else {})},
    }
    if assumed:
        data["notes"] = [f"{target.name}: {a}" for a in assumed]
    set_moe_prior(data["engine"], eng, t)
    set_moe_config(data)
    return presets.scenario(data)


#: the keyword arguments of :func:`build_scenario` (and so of ``predict``, ``verify_ms``, ...), each with the kind of
#: value it takes: ``name`` a string (a path too for model and profile), ``int`` an integer, ``number`` a finite
#: number, ``numbers`` a list of them, ``bool`` true or false
OVERRIDE_KINDS = {"model": "name", "gpu": "name", "tp": "int", "steps": "int", "topk": "int", "draft_tokens": "int",
                  "accept": "number", "accept_rates": "numbers", "batch": "int", "ctx": "int", "engine": "name",
                  "dtype": "name", "profile": "name", "graph_max": "int", "stop_strings": "bool",
                  "max_running_requests": "int", "routing_skew": "number", "kv_pool_tokens": "int",
                  "mem_fraction": "number"}
_KIND_ALLOWED = {"name": "allowed: a name (a string)", "int": "allowed: an integer", "number": "allowed: a finite number",
                 "numbers": f"allowed: a list of at most {MAX_LIST} finite numbers", "bool": "allowed: True or False"}


def check_overrides(overrides: dict) -> dict:
    """The overrides of the Python API with plain values, else a one-line :class:`SpecsimTypeError` naming the
    argument (as its flag, ``draft-tokens``, like the range errors): an unknown name (with the nearest known one), a string for a number, a fraction or a bool for an
    integer, a NaN, a list of the wrong things. Integers may come as integral floats (2.0) or numpy scalars; paths
    (model, profile) as ``os.PathLike``. Ranges are checked where the values are applied."""
    import difflib
    import math
    import numbers
    import os

    for key in overrides:
        if key not in OVERRIDE_KINDS:
            near = difflib.get_close_matches(str(key), OVERRIDE_KINDS, n=1)
            raise SpecsimTypeError(str(key)[:80], None, f"unknown argument{f' (did you mean {near[0]!r}?)' if near else ''}; "
                                   f"allowed: {', '.join(OVERRIDE_KINDS)}", show_value=False)
    out = {}
    for key, kind in OVERRIDE_KINDS.items():  # in one order, whatever the caller's: the first problem is the same one
        if key not in overrides:
            continue
        v = overrides[key]
        if v is None:
            out[key] = None
            continue
        real = isinstance(v, numbers.Real) and not isinstance(v, bool)
        if kind == "int" and real and (isinstance(v, numbers.Integral) or math.isfinite(v) and float(v).is_integer()):
            out[key] = int(v)
        elif kind == "number" and real and math.isfinite(v):
            out[key] = float(v)
        elif kind == "bool" and (isinstance(v, bool) or type(v).__name__ == "bool_"):  # numpy's too
            out[key] = bool(v)
        elif kind == "name" and (isinstance(v, str) or key in ("model", "profile") and isinstance(v, os.PathLike)):
            out[key] = os.fspath(v)
        elif kind == "numbers" and isinstance(v, (list, tuple)) and len(v) <= MAX_LIST and all(
                isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) for x in v):
            out[key] = [float(x) for x in v]
        else:
            raise SpecsimTypeError(key.replace("_", "-"), v, _KIND_ALLOWED[kind] + (" (not NaN or infinite)" if real and not math.isfinite(v)
                                                                   and kind == "int" else ""))
    return {key: out[key] for key in overrides}  # the caller's order


def check_scenario_arg(scenario) -> None:
    """The base scenario the API takes: None (the default), a built-in name or a file (str or path), a Scenario or a
    record of one."""
    import os
    import sys

    from ..physics.record import Record

    if scenario is None or isinstance(scenario, (str, os.PathLike, Record)):
        return
    schema = sys.modules.get("specsim.physics.schema")  # a Scenario object means the schema is loaded already
    if schema is None or not isinstance(scenario, schema.Scenario):
        raise SpecsimTypeError("scenario", scenario, "allowed: a built-in scenario name, a scenario JSON path, a "
                               "Scenario or None (the default)")


def build_scenario(
    scenario: str | Scenario | None = None,
    *,
    model: str | None = None,
    gpu: str | None = None,
    tp: int | None = None,
    steps: int | None = None,
    topk: int | None = None,
    draft_tokens: int | None = None,
    accept: float | None = None,
    accept_rates: list[float] | None = None,
    batch: int | None = None,
    ctx: int | None = None,
    engine: str | None = None,
    dtype: str | None = None,
    profile: str | None = None,
    graph_max: int | None = None,
    stop_strings: bool | None = None,
    max_running_requests: int | None = None,
    routing_skew: float | None = None,
    kv_pool_tokens: int | None = None,
    mem_fraction: float | None = None,
    **unknown,
) -> Scenario:
    """A base scenario (name, file or object; default ``kimi-k2.5-seed``) with overrides applied.

    ``profile``: a hardware profile from ``specsim measure gpu`` whose fits replace the GPU's
    (and the engine's launch) parameters - the user's own measured box instead of the presets.
    ``graph_max``: the largest CUDA-graph size the engine captures (requests, e.g. SGLang's
    ``--cuda-graph-max-bs``; tokens for token-captured engines, vLLM's max capture size): larger
    batches run that phase eagerly.
    ``stop_strings``: whether the requests carry stop strings (the engine's finish checks then
    decode the output tail, ``engine.stop_check_us`` each).
    ``max_running_requests``: the launch's cap on requests run at once, speculation on or off
    (SGLang's ``--max-running-requests``): it replaces the engine's speculative default (48 in
    SGLang); batch past it waits in the queue.
    ``routing_skew``: a MoE target's router skew across its experts (``target.moe.routing_skew``, the CV of an
    expert's token share: ``specsim routing`` reads it from the engine's expert counts); a dense model refuses it.
    ``kv_pool_tokens``: the KV-cache tokens per GPU the launch's log gives (SGLang ``max_total_num_tokens``, vLLM
    ``GPU KV cache size``), in place of the modeled pool; ``mem_fraction``: the launch's share of GPU memory for
    weights and KV cache (SGLang ``--mem-fraction-static``, vLLM ``--gpu-memory-utilization``). Either bounds the
    requests run at once at the context (``physics.memory``).

    The one override policy of every command:

    * ``model`` or ``engine`` is a new deployment: a fresh scenario built from presets only
      (:func:`fresh_scenario`), named after model, GPU, TP and engine; it keeps nothing the base
      scenario fitted or measured. GPU and TP default to the base's (its GPU as the preset), the
      engine to ``sglang``; with ``engine`` alone the base's target and draft stay (architecture,
      not fitted) and so does its acceptance (same draft).
    * ``gpu`` alone swaps the accelerator of the same deployment: the engine behaviour and the
      eager collective path stay, the GPU numbers and its default graph all-reduce change; the
      scenario's own GPU is a no-op.
    * any change of GPU, TP, batch, context or dtype drops the recorded measurements and the
      calibration points (they belong to the measured setup); fitted parameters and their
      covariance stay, so verify bands remain available.
    * ``accept`` keeps the profile shape of the scenario's acceptance; a step change without
      ``accept`` carries the per-position profile, not tau.
    """
    from ..io.presets import get_engine, get_gpu, load_scenario, scenario_from_dict
    from ..physics.schema import Scenario

    check_scenario_arg(scenario)
    check_overrides(unknown)  # a misspelt keyword: named, with the nearest known one
    (model, gpu, tp, steps, topk, draft_tokens, accept, accept_rates, batch, ctx, engine, dtype, profile, graph_max,
     stop_strings, max_running_requests, routing_skew, kv_pool_tokens, mem_fraction) = check_overrides({
        "model": model, "gpu": gpu, "tp": tp, "steps": steps, "topk": topk, "draft_tokens": draft_tokens,
        "accept": accept, "accept_rates": accept_rates, "batch": batch, "ctx": ctx, "engine": engine, "dtype": dtype,
        "profile": profile, "graph_max": graph_max, "stop_strings": stop_strings,
        "max_running_requests": max_running_requests, "routing_skew": routing_skew, "kv_pool_tokens": kv_pool_tokens,
        "mem_fraction": mem_fraction}).values()
    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    _check_deployment_limits(batch=batch, ctx=ctx, tp=tp, steps=steps, topk=topk, draft_tokens=draft_tokens)
    if gpu is not None and model is None and engine is None:
        g, ar = get_gpu(gpu)
        if g.name == sc.gpu.name:
            gpu = None  # the scenario's own GPU: nothing to change
    # a new deployment (not the scenario's own GPU or TP again): its MoE kernel config is looked up anew
    redeployed = (model is not None or engine is not None or gpu is not None or dtype is not None
                  or (tp is not None and tp != sc.parallel.tp))
    if model is not None or engine is not None:
        base_gpu = gpu if gpu is not None else (gpu_preset_key(sc.gpu.name) or sc.gpu.name)
        base_tp = tp if tp is not None else sc.parallel.tp
        tp_note = None
        if model is not None and tp is None:  # a new model: the TP that holds it, not the base scenario's
            base_tp, tp_note = default_tp(model, base_gpu, engine, dtype=dtype, batch=batch, ctx=ctx)
        if model is not None:
            new = fresh_scenario(model, base_gpu, base_tp, engine, dtype=dtype, batch=batch, ctx=ctx)
        else:
            key = _model_key(sc)
            new = fresh_scenario(key, base_gpu, base_tp, engine, batch=batch, ctx=ctx) if key else None
            if new is None:  # target from an HF config: keep the base's architecture
                g2, ar2 = get_gpu(base_gpu)
                eng = get_engine(engine)
                check_tp(base_tp, sc.target.attention.num_heads, sc.draft.num_heads)
                new = scenario_from_dict({
                    "name": f"{_slug(sc.target.name)}-{gpu_preset_key(base_gpu) or _slug(g2.name)}-tp{base_tp}-"
                            f"{preset_key('engines', engine) or _slug(eng.name)}",
                    "description": f"{sc.target.name} + {sc.draft.name} on {base_tp}x {g2.name}, {eng.name}"
                                   f"{PRESETS_MARK}",
                    "gpu": g2.model_dump(), "target": sc.target.model_dump(), "draft": sc.draft.model_dump(),
                    "engine": eng.model_dump(),
                    "parallel": {"tp": base_tp, "allreduce": ar2.model_dump(), "allreduce_eager": None},
                    "speculation": {"steps": 3, "topk": 1},
                    "acceptance": {"rates": list(GENERIC_EAGLE3_RATES), "source": GENERIC_EAGLE3_SOURCE},
                    "workload": {"batch": 1 if batch is None else batch, "ctx": 2048 if ctx is None else ctx},
                    "provenance": {"built_from": "presets", "engine": eng.name},
                }, "scenario")
            # same weights and draft as the base: its dtypes, acceptance and speculation settings carry over
            d = new.model_dump()
            d["target"]["dtypes"] = sc.target.dtypes.model_dump()
            if dtype is not None:
                apply_dtype(d["target"], dtype)
            set_moe_prior(d["engine"], get_engine(engine), d["target"])
            d["draft"] = sc.draft.model_dump()
            d["acceptance"] = sc.acceptance.model_dump()
            d["speculation"] = {"steps": sc.speculation.steps, "topk": sc.speculation.topk,
                                "num_draft_tokens": sc.speculation.num_draft_tokens}
            new = scenario_from_dict(d, "scenario")
        data = new.model_dump()
        notes: list[str] = list(new.notes) + ([tp_note] if tp_note else [])  # what the fresh build assumed
        fresh_acceptance = model is not None
        gpu = tp = batch = ctx = dtype = None  # applied by fresh_scenario
    else:
        # the same deployment: components no override touches are kept as the validated objects they are (pydantic
        # does not validate a model instance again); the rest are plain data to change
        same = (gpu is None and tp is None and dtype is None and graph_max is None and max_running_requests is None
                and routing_skew is None and kv_pool_tokens is None and mem_fraction is None and not redeployed)
        kept = {"gpu", "target", "draft", "engine", "parallel"} if same else set()
        data = sc.model_dump(exclude=kept)
        data.update({k: getattr(sc, k) for k in kept})
        notes = list(data.get("notes") or [])
        fresh_acceptance = False
    if any(x is not None for x in (gpu, tp, batch, ctx, dtype)):
        data["provenance"] = {k: v for k, v in data.get("provenance", {}).items() if k != "measured"}
        if data.get("calibration"):
            data["calibration"] = {k: v for k, v in data["calibration"].items() if k not in ("points", "residuals")}
    if gpu is not None:
        data["gpu"] = g.model_dump()
        data["parallel"]["allreduce"] = ar.model_dump()
        data["name"] = f"{data['name']}+gpu={gpu_preset_key(gpu) or gpu}"
    if tp is not None:
        data["parallel"]["tp"] = tp
        if tp != sc.parallel.tp:
            data["name"] = f"{data['name']}+tp={tp}"
    if dtype is not None:
        apply_dtype(data["target"], dtype)
        data["name"] = f"{data['name']}+dtype={dtype}"
    if (isinstance(data["engine"], dict) and kv_pool_tokens is None
            and (gpu is not None or dtype is not None or tp is not None and tp != sc.parallel.tp)):
        drop_launch_kv_pool(data["engine"], notes, "GPU, TP or dtype")
    if routing_skew is not None:
        _apply_routing_skew(data["target"], routing_skew)
    if isinstance(data["target"], dict):  # (kept as validated objects, the deployment's TP was checked when built)
        check_tp(data["parallel"]["tp"], data["target"]["attention"]["num_heads"], data["draft"]["num_heads"])
    _apply_run_overrides(data, notes, fresh_acceptance, lambda d: scenario_from_dict(d, "scenario"), steps=steps, topk=topk,
                         draft_tokens=draft_tokens, accept=accept, accept_rates=accept_rates, batch=batch, ctx=ctx,
                         stop_strings=stop_strings, graph_max=graph_max, max_running_requests=max_running_requests,
                         kv_pool_tokens=kv_pool_tokens, mem_fraction=mem_fraction)
    if redeployed:
        set_moe_config(data)
    out = scenario_from_dict(data, "scenario")
    if profile is not None:
        from .profile_fit import apply_profile

        out = apply_profile(out, profile)
    return out



#: the overrides :func:`build_record` takes, each with the plain type it must have (others go to the schema)
_RUN_OVERRIDES = {"steps": int, "topk": int, "draft_tokens": int, "batch": int, "ctx": int, "graph_max": int,
                  "max_running_requests": int, "stop_strings": bool, "accept": float, "accept_rates": list,
                  "kv_pool_tokens": int, "mem_fraction": float}


class _NotVouched(Exception):
    """The record path cannot vouch for a build: :func:`build_scenario` takes it (and names any problem)."""


def _vouched(data: dict) -> Record:
    from ..physics.record import checked_scenario

    rec = checked_scenario(data)
    if rec is None:
        raise _NotVouched
    return rec


def _plain_type(value, kind) -> bool:
    if kind is float:
        return finite_number(value)
    if kind is list:
        return isinstance(value, list) and len(value) <= MAX_LIST and all(finite_number(v) for v in value)
    return type(value) is kind


#: the new-deployment overrides build_record takes with ``model`` (a model preset's name)
_DEPLOY_OVERRIDES = {"model": str, "gpu": str, "tp": int, "engine": str, "dtype": str}


def build_record(scenario: str | None = None, **overrides) -> Record | None:
    """:func:`build_scenario` as a read-only :class:`~specsim.physics.record.Record`, without loading pydantic, for
    a built-in scenario with the run's overrides (steps, topk, draft tokens, accept, accept rates, batch, ctx, stop
    strings, graph max, running cap), or a new deployment of a model preset (``model``, with ``gpu``, ``tp``,
    ``engine``, ``dtype``) with them. The scenario file is the schema's canonical dump, presets are their files
    completed with the schema's defaults, and what the overrides change is checked with the schema's rules. None for
    anything else (another base, a config.json, a profile, a value not plainly of its type, any doubt or error):
    :func:`build_scenario` then builds it, or names the problem."""
    given = {k: v for k, v in overrides.items() if v is not None}
    kinds = {**_RUN_OVERRIDES, **_DEPLOY_OVERRIDES} if "model" in given else _RUN_OVERRIDES
    if scenario is not None and not isinstance(scenario, str) or set(given) - set(kinds):
        return None
    name = scenario if scenario is not None else DEFAULT_SCENARIO
    if name not in builtin_scenario_names() or not all(_plain_type(v, kinds[k]) for k, v in given.items()):
        return None
    run = {k: overrides.get(k) for k in _RUN_OVERRIDES}
    try:
        _check_deployment_limits(**{k: given.get(k) for k in ("batch", "ctx", "tp", "steps", "topk", "draft_tokens")})
        src = builtin_scenario_data(name)  # cached: copy what the overrides change (they replace, never mutate, the rest)
        if "model" in given:  # a new deployment, as build_scenario builds it
            base_gpu = given["gpu"] if "gpu" in given else gpu_preset_key(src["gpu"]["name"]) or src["gpu"]["name"]
            tp, tp_note = given.get("tp"), None
            if tp is None:  # a new model: the TP that holds it, not the base scenario's
                tp, tp_note = default_tp(given["model"], base_gpu, given.get("engine"), dtype=given.get("dtype"),
                                         batch=given.get("batch"), ctx=given.get("ctx"), presets=RECORDS)
            new = fresh_scenario(given["model"], base_gpu, tp, given.get("engine"),
                                 dtype=given.get("dtype"), batch=given.get("batch"), ctx=given.get("ctx"), presets=RECORDS)
            data = new.model_dump()
            notes = list(new.notes) + ([tp_note] if tp_note else [])
            _apply_run_overrides(data, notes, True, _vouched, **{**run, "batch": None, "ctx": None})
            set_moe_config(data)
            return _vouched(data)
        data = {**src, **{k: dict(src[k]) for k in ("speculation", "workload", "provenance") if k in src}}
        data["engine"] = {**src["engine"], "sources": dict(src["engine"]["sources"])}
        if "batch" in given or "ctx" in given:  # the recorded measurements belong to the measured setup
            data["provenance"] = {k: v for k, v in data.get("provenance", {}).items() if k != "measured"}
            if data.get("calibration"):
                data["calibration"] = {k: v for k, v in data["calibration"].items() if k not in ("points", "residuals")}
        _apply_run_overrides(data, list(data.get("notes") or []), False, _vouched, **run)
        return _vouched(data)
    except (_NotVouched, SpecsimError):  # the schema path builds it again and raises its own error
        return None


def build_view(scenario=None, **overrides) -> Record | Scenario:
    """The scenario to evaluate: :func:`build_record`'s record where it can vouch for it, else
    :func:`build_scenario`'s validated one. The same numbers either way (``tests/test_record.py``)."""
    check_scenario_arg(scenario)
    overrides = check_overrides(overrides)
    return build_record(scenario, **overrides) or build_scenario(scenario, **overrides)


SHAPE_RATE_EDGE = 1e-6  # distance from 0 and 1 of a measured rate carried as an acceptance shape


def _apply_run_overrides(data: dict, notes: list[str], fresh_acceptance: bool, make, *, steps, topk, draft_tokens, accept,
                         accept_rates, batch, ctx, stop_strings, graph_max, max_running_requests, kv_pool_tokens=None,
                         mem_fraction=None) -> None:
    """Apply the overrides of the run (speculation, acceptance, workload, the engine's captured sizes and running
    cap) to a scenario's plain data, in place; ``make`` turns data into a scenario (for the acceptance a step change
    carries over). The one place these rules live: :func:`build_scenario` and :func:`build_record` call it."""
    spec = data["speculation"]
    old_spec = dict(spec)  # the setting the scenario's accept length belongs to
    if steps is not None:
        spec["steps"] = steps
    if topk is not None:
        spec["topk"] = topk
    if draft_tokens is not None:
        spec["num_draft_tokens"] = draft_tokens
        if spec["topk"] == 1 and draft_tokens != spec["steps"] + 1:
            notes.append(f"draft tokens {draft_tokens} adjusted to steps+1 = {spec['steps'] + 1} "
                         "(SGLang forces it when topk = 1)")
    elif topk is not None or steps is not None:
        spec["num_draft_tokens"] = None  # re-derive from steps/topk
    st = spec["steps"]
    if accept is not None and accept_rates is not None:
        raise SpecsimError("accept", accept, "give --accept or --accept-rates, not both")
    old = data["acceptance"]
    # a measured profile becomes the shape an --accept length scales (r ** theta): kept inside (0, 1), where the
    # scaling can move it (a rate of exactly 0 or 1 is a fixed point)
    shape = ([min(max(float(r), SHAPE_RATE_EDGE), 1 - SHAPE_RATE_EDGE) for r in old["rates"]] if old.get("rates")
             else old.get("shape_rates"))
    if accept is not None:
        check_accept(accept, st)
        data["acceptance"] = {"accept_length": accept, "shape_rates": shape, "source": "user --accept"}
    elif accept_rates is not None:
        if not accept_rates or any(not (0.0 <= r <= 1.0) for r in accept_rates):
            raise SpecsimError("accept-rates", accept_rates, "each rate must be in [0, 1]")
        data["acceptance"] = {"rates": list(accept_rates), "source": "user --accept-rates"}
        if len(accept_rates) > st:
            notes.append(f"accept-rates: {len(accept_rates)} rates given for {st} draft steps: positions {st + 1}-"
                         f"{len(accept_rates)} count only where more steps are drafted (best steps, sweeps)")
    elif old.get("accept_length") is not None and st != old_spec["steps"]:
        # tau is tied to the steps it was measured at: carry the implied profile instead
        from ..physics.acceptance import rates_for

        base = make({**data, "speculation": old_spec})
        rates = rates_for(base, old_spec["steps"])
        data["acceptance"] = {"rates": [float(x) for x in rates], "source": old.get("source", "") + " (profile implied at the scenario's steps)"}
    elif fresh_acceptance:
        notes.append(f"acceptance: generic EAGLE-3 profile (paper Fig. 7, a well-trained head), not measured for "
                     f"{data['draft']['name']}; give --accept or --accept-rates")
    data["notes"] = notes
    if batch is not None:
        data["workload"]["batch"] = batch
    if ctx is not None:
        data["workload"]["ctx"] = ctx
    if stop_strings is not None:
        if not isinstance(stop_strings, bool):
            raise SpecsimError("stop-strings", stop_strings, "allowed: true or false")
        data["workload"]["stop_strings"] = stop_strings
    if graph_max is not None:
        if not 0 <= graph_max <= 1_000_000:
            raise SpecsimError("graph-max", graph_max, "must be an integer in [0, 1000000] (0: no CUDA graphs)")
        eng = data["engine"]
        eng["capture_batch_sizes"] = [s for s in eng.get("capture_batch_sizes") or [] if s <= graph_max]
        if eng.get("capture_token_sizes"):
            eng["capture_token_sizes"] = [s for s in eng["capture_token_sizes"] if s <= graph_max] or None
            if eng["capture_token_sizes"] is None:
                eng["capture_batch_sizes"] = []
        eng.setdefault("sources", {})["capture_batch_sizes"] = f"--graph-max {graph_max} (user)"
    if max_running_requests is not None:
        max_running_requests = check_running_cap(max_running_requests)
        data["engine"]["max_running_requests"] = max_running_requests
        data["engine"].setdefault("sources", {})["max_running_requests"] = f"--max-running-requests {max_running_requests} (user)"
    if kv_pool_tokens is not None:
        data["engine"]["kv_pool_tokens"] = int(check_limit("Engine.kv_pool_tokens", kv_pool_tokens, "kv-pool-tokens"))
        data["engine"].setdefault("sources", {})["kv_pool_tokens"] = f"--kv-pool-tokens {kv_pool_tokens} (user)"
    if mem_fraction is not None:
        data["engine"]["kv_memory_fraction"] = float(check_limit("Engine.kv_memory_fraction", mem_fraction, "mem-fraction"))
        data["engine"].setdefault("sources", {})["kv_memory_fraction"] = f"--mem-fraction {mem_fraction} (user)"


def drop_launch_kv_pool(engine: dict, notes: list[str], what: str) -> None:
    """A launch log's KV pool (``--kv-pool-tokens``) on an engine's plain data, dropped with a note where a change of
    ``what`` (GPU, TP, the weights' dtype) makes it another deployment's: the new pool is modeled. Nothing if unset."""
    tokens = engine.get("kv_pool_tokens")
    if tokens is None:
        return
    engine["kv_pool_tokens"] = None
    engine.setdefault("sources", {})["kv_pool_tokens"] = f"None: modeled (the launch's figure was for another {what})"
    notes.append(f"the KV pool of {tokens:,} tokens (--kv-pool-tokens) belonged to the deployment before this change "
                 f"of {what}: the new one's is modeled")


def _apply_routing_skew(target: dict, skew: float) -> None:
    """``target.moe.routing_skew`` = ``skew`` on a target's plain data (checked: a MoE, a c its router can have)."""
    from ..physics.moe import check_routing_skew

    moe = target.get("moe")
    if moe is None:
        raise no_routed_experts("routing-skew", skew, target["name"])
    moe["routing_skew"] = check_routing_skew(skew, moe["num_experts"], moe["experts_per_token"], "routing-skew")


def no_routed_experts(field: str, value, model_name: str) -> SpecsimError:
    """The one error of a routing option given for a dense model."""
    return SpecsimError(field, value, f"{model_name} has no routed experts; allowed: a MoE model")


def _model_key(sc: Scenario) -> str | None:
    """The model preset whose target is this scenario's target (by name), else None."""
    return preset_key("models", sc.target.name)
