"""One scenario builder for every command: base scenario + deployment overrides + one policy."""

from __future__ import annotations

from ..errors import SpecsimError
from ..io.presets import get_engine, get_gpu, get_model, load_scenario, scenario_from_dict
from ..physics.schema import Scenario


def check_tp(tp: int, target_heads: int, draft_heads: int) -> None:
    """TP must be >= 1 and divide the attention heads of the target and of the draft head."""
    if tp < 1:
        raise SpecsimError("tp", tp, "TP size must be an integer >= 1")
    for who, heads in (("target", target_heads), ("draft", draft_heads)):
        if heads % tp:
            ok = [d for d in range(1, heads + 1) if heads % d == 0]
            raise SpecsimError("tp", tp, f"must divide the {who} model's {heads} attention heads; allowed: {ok}")


def _check_accept(accept: float, steps: int) -> None:
    if not (1.0 <= accept <= steps + 1):
        raise SpecsimError("accept", accept, f"accept length must be in [1, steps+1] = [1, {steps + 1}] for steps={steps}")


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
) -> Scenario:
    """A base scenario (name, file or object; default ``kimi-k2.5-seed``) with overrides applied.

    Policy for the base scenario's fitted, setup-specific parts:

    * ``model`` or ``engine`` describes a new deployment: the engine becomes the ``engine``
      preset (default ``sglang``) and the base's eager all-reduce path is dropped.
    * ``gpu`` alone swaps the accelerator of the same deployment: the engine behaviour and the
      eager collective path stay, the GPU numbers and its default graph all-reduce change; the
      scenario's own GPU is a no-op.
    * any change of model, GPU, TP, batch, context or engine drops the recorded measurements and
      the calibration points (they belong to the measured setup); fitted parameters and their
      covariance stay, so verify bands remain available.
    """
    sc = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    data = sc.model_dump()
    notes = list(data.get("notes") or [])
    if gpu is not None:
        g, ar = get_gpu(gpu)
        if g.name == sc.gpu.name:
            gpu = None  # the scenario's own GPU: nothing to change
    if any(x is not None for x in (model, gpu, tp, batch, ctx, engine)):
        data["provenance"] = {k: v for k, v in data.get("provenance", {}).items() if k != "measured"}
        if data.get("calibration"):
            data["calibration"] = {k: v for k, v in data["calibration"].items() if k not in ("points", "residuals")}
    if engine is not None or model is not None:
        data["engine"] = get_engine(engine or "sglang").model_dump()
        data["parallel"]["allreduce_eager"] = None
        data["calibration"] = None
    if model is not None:
        target, draft = get_model(model)
        data["target"], data["draft"] = target.model_dump(), draft.model_dump()
        data["name"] = f"{data['name']}+model={model}"
        if accept is None and accept_rates is None:
            notes.append(f"acceptance carried over from {sc.name} ({sc.acceptance.source or 'its profile'}); "
                         "give --accept or --accept-rates for this model's draft")
    if gpu is not None:
        data["gpu"] = g.model_dump()
        data["parallel"]["allreduce"] = ar.model_dump()
        data["name"] = f"{data['name']}+gpu={gpu}"
    if tp is not None:
        data["parallel"]["tp"] = tp
    check_tp(data["parallel"]["tp"], data["target"]["attention"]["num_heads"], data["draft"]["num_heads"])
    spec = data["speculation"]
    if steps is not None:
        if not 1 <= steps <= 64:
            raise SpecsimError("steps", steps, "steps must be an integer in [1, 64]")
        spec["steps"] = steps
    if topk is not None:
        if not 1 <= topk <= 64:
            raise SpecsimError("topk", topk, "topk must be an integer in [1, 64]")
        spec["topk"] = topk
    if draft_tokens is not None:
        if draft_tokens < 1:
            raise SpecsimError("draft-tokens", draft_tokens, "num_draft_tokens must be >= 1")
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
    shape = old.get("rates") or old.get("shape_rates")
    if accept is not None:
        _check_accept(accept, st)
        data["acceptance"] = {"accept_length": accept, "shape_rates": shape, "source": "user --accept"}
    elif accept_rates is not None:
        if not accept_rates or any(not (0.0 <= r <= 1.0) for r in accept_rates):
            raise SpecsimError("accept-rates", accept_rates, "each rate must be in [0, 1]")
        data["acceptance"] = {"rates": list(accept_rates), "source": "user --accept-rates"}
    elif old.get("accept_length") is not None and steps is not None and steps != sc.speculation.steps:
        # tau is tied to the steps it was measured at: carry the implied profile instead
        from ..physics.acceptance import rates_for

        rates = rates_for(sc, sc.speculation.steps)
        data["acceptance"] = {"rates": [float(x) for x in rates], "source": old.get("source", "") + " (profile implied at the scenario's steps)"}
    data["notes"] = notes
    if batch is not None:
        if batch < 1:
            raise SpecsimError("batch", batch, "batch must be an integer >= 1")
        data["workload"]["batch"] = batch
    if ctx is not None:
        if ctx < 0:
            raise SpecsimError("ctx", ctx, "context length must be an integer >= 0")
        data["workload"]["ctx"] = ctx
    return scenario_from_dict(data, "scenario")
