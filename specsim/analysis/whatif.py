"""What-if analysis for the engineering levers: before/after side by side, with deltas.

Levers: all-reduce latency (scale, implementation or alpha), GPU swap, TP size, quantisation of
the routed experts (or attention), CUDA-graph capture per phase, overlap scheduler, the running-requests cap,
the routing locality of a MoE's verify tokens. Each
comparison reports the scenario's step count and the best step count before and after.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import SpecsimError
from ..io.presets import get_allreduce, scenario_from_dict
from ..physics.schema import Scenario
from .build import check_running_cap
from .predict import Prediction, build_scenario, evaluate

PHASE_FIELDS = {"decode": "graph_decode", "verify": "graph_verify", "draft": "graph_draft", "draft_extend": "graph_draft_extend"}
QUANT_TARGETS = ("routed_experts", "shared_experts", "attention", "dense_mlp", "all")


@dataclass
class WhatIf:
    """Modeled before/after of one lever."""

    lever: str
    change: str
    before: Prediction
    after: Prediction
    best_steps_before: int
    best_steps_after: int
    best_tok_s_before: float
    best_tok_s_after: float

    def rows(self) -> list[list[object]]:
        b, a = self.before, self.after
        items = [
            ("tok/s", b.tok_s, a.tok_s), ("baseline tok/s", b.baseline_tok_s, a.baseline_tok_s),
            ("speedup", b.speedup, a.speedup), ("cycle ms", b.cycle_ms, a.cycle_ms), ("verify ms", b.verify_ms, a.verify_ms),
            ("baseline step ms", b.baseline_step_ms, a.baseline_step_ms),
        ]
        items += [(f"phase {k} ms", b.phases_ms[k], a.phases_ms[k]) for k in b.phases_ms]
        items += [(f"verify {k} ms", b.verify_breakdown_ms[k], a.verify_breakdown_ms[k]) for k in b.verify_breakdown_ms]
        items += [("best steps (1-10)", self.best_steps_before, self.best_steps_after),
                  ("tok/s at best steps", self.best_tok_s_before, self.best_tok_s_after)]
        out = []
        for name, x, y in items:
            pct = 100.0 * (y / x - 1) if x else float("nan")
            delta = y - x if isinstance(x, int) and isinstance(y, int) else float(y - x)
            out.append([name, x, y, delta, pct])
        return out

    def _text_rows(self) -> list[list[object]]:
        """Rows for text/Markdown/HTML: percentages with one decimal, step counts as integers."""
        from ..output.render import pct

        return [[n, x, y, d, pct(p)] for n, x, y, d, p in self.rows()]

    @property
    def title(self) -> str:
        return f"{self.before.scenario}: what if {self.change} (modeled)"

    def to_dict(self) -> dict:
        return {
            "kind": "modeled", "scenario": self.before.scenario, "lever": self.lever, "change": self.change,
            "before": self.before.to_dict(), "after": self.after.to_dict(),
            "best_steps_before": self.best_steps_before, "best_steps_after": self.best_steps_after,
            "best_tok_s_before": self.best_tok_s_before, "best_tok_s_after": self.best_tok_s_after,
            "delta": {r[0]: {"before": r[1], "after": r[2], "delta": r[3], "delta_pct": r[4]} for r in self.rows()},
        }

    def markdown(self) -> str:
        from ..output.render import table_markdown

        return (f"**{self.before.scenario}: what if {self.change}** (modeled)\n\n"
                + table_markdown(["metric", "before", "after", "delta", "delta %"], self._text_rows())
                + self._warnings().replace("\nwarning", "\n\n> warning"))

    def _warnings(self) -> str:
        lines = [f"warning (before): {w}" for w in self.before.warnings]
        lines += [f"warning (after): {w}" for w in self.after.warnings if w not in self.before.warnings]
        return "".join("\n" + x for x in lines)

    def __repr__(self) -> str:
        from ..output.render import fit_width, table_text

        return fit_width(table_text(["metric", "before", "after", "delta", "delta %"], self._text_rows(), self.title)
                         + self._warnings())

    def _repr_html_(self) -> str:
        from ..output.render import table_html

        return table_html(["metric", "before", "after", "delta", "delta %"], self._text_rows(), self.title)


def _best_steps(sc: Scenario, max_steps: int = 10) -> tuple[int, float]:
    from .sweep import best_steps

    b = best_steps(sc, max_steps)
    return int(b["steps"]), float(b["tok_s"])


def compare(before: Scenario, after: Scenario, lever: str, change: str) -> WhatIf:
    """Before/after predictions; the after side is a modeled change, so it carries no measurements."""
    after = after.model_copy(update={"provenance": {k: v for k, v in after.provenance.items() if k != "measured"}})
    bs, bt = _best_steps(before)
    as_, at = _best_steps(after)
    return WhatIf(lever, change, evaluate(before), evaluate(after), bs, as_, bt, at)


def edit_scenario(sc: Scenario, fn) -> Scenario:
    """``sc`` with ``fn`` applied to its plain data, validated again (the after side of a lever)."""
    data = sc.model_dump()
    fn(data)
    return scenario_from_dict(data, "scenario")


def whatif_allreduce(scenario=None, *, scale: float | None = None, impl: str | None = None,
                     alpha_us: float | None = None, **overrides) -> WhatIf:
    """All-reduce latency lever: a scale on alpha, another implementation, or a given alpha (µs)."""
    given = [x is not None for x in (scale, impl, alpha_us)]
    if sum(given) != 1:
        named = [f for f, g in zip(("--scale", "--impl", "--alpha-us"), given) if g]
        raise SpecsimError("allreduce", " ".join(named) or "none of them",
                           "give exactly one of --scale, --impl, --alpha-us")
    before = build_scenario(scenario, **overrides)
    tp = before.parallel.tp
    if scale is not None:
        from ..physics.schema import Parallel, field_range

        if not (math.isfinite(scale) and scale > 0):
            raise SpecsimError("scale", scale, "allowed: a finite number > 0")
        cur = before.parallel.allreduce_scale
        lo, hi = field_range(Parallel, "allreduce_scale")
        if not lo <= cur * scale <= hi:
            raise SpecsimError("scale", scale, f"allowed: {lo / cur:g} to {hi / cur:g} (the scenario's all-reduce scale, "
                                               f"x{cur:g}, times it must stay within {lo:g} to {hi:g})")
        after = edit_scenario(before, lambda d: d["parallel"].update(allreduce_scale=d["parallel"]["allreduce_scale"] * scale))
        change = f"all-reduce latency x{scale:g}"
    elif impl is not None:
        ar = get_allreduce(impl).model_dump()
        after = edit_scenario(before, lambda d: d["parallel"].update(allreduce=ar, allreduce_eager=None))
        change = f"all-reduce implementation -> {ar['name']}"
    else:
        from ..physics.rules import MAX_ALLREDUCE_ALPHA_US

        if not (math.isfinite(alpha_us) and 0 <= alpha_us <= MAX_ALLREDUCE_ALPHA_US):
            raise SpecsimError("alpha-us", alpha_us, f"allowed: a latency in [0, {MAX_ALLREDUCE_ALPHA_US:g}] us")

        def set_alpha(d):
            for key in ("allreduce", "allreduce_eager"):
                ar = d["parallel"].get(key)
                while ar:  # every implementation of the path's chain (one-shot, two-shot, NCCL past the limits)
                    ar["alpha_us"] = {**ar["alpha_us"], tp: alpha_us}
                    ar = ar.get("fallback")
        after = edit_scenario(before, set_alpha)
        change = f"all-reduce alpha -> {alpha_us:g} us at TP{tp} (every implementation messages of any size take)"
    return compare(before, after, "allreduce", change)


def whatif_gpu(scenario=None, *, to: str, **overrides) -> WhatIf:
    """Swap the accelerator of the same deployment (``build_scenario``'s ``gpu`` policy: engine
    behaviour and eager collective path kept, the new GPU's numbers and default graph all-reduce)."""
    before = build_scenario(scenario, **overrides)
    after = build_scenario(before, gpu=to)
    return compare(before, after, "gpu", f"GPU {before.gpu.name} -> {after.gpu.name}")


def whatif_tp(scenario=None, *, to: int, **overrides) -> WhatIf:
    before = build_scenario(scenario, **overrides)
    after = build_scenario(before, tp=to)
    return compare(before, after, "tp", f"TP {before.parallel.tp} -> {to}")


def whatif_quant(scenario=None, *, dtype: str, target: str | None = None, **overrides) -> WhatIf:
    """Weights of one part (default: the routed experts of a MoE, every weight of a dense model) in ``dtype``."""
    from ..physics.rules import DTYPE_BYTES

    if dtype not in DTYPE_BYTES:
        raise SpecsimError("dtype", dtype, f"choose one of: {', '.join(DTYPE_BYTES)}")
    if target is not None and target not in QUANT_TARGETS:
        raise SpecsimError("target", target, f"choose one of: {', '.join(QUANT_TARGETS)}")
    before = build_scenario(scenario, **overrides)
    t = before.target
    target = target or ("routed_experts" if t.moe is not None else "all")
    absent = {"routed_experts": t.moe is None, "shared_experts": t.moe is None or not t.moe.num_shared_experts,
              "dense_mlp": t.num_dense_layers == 0}
    if absent.get(target):  # quantising a part the model does not have would report a change of nothing
        have = [k for k in QUANT_TARGETS if not absent.get(k)]
        raise SpecsimError("target", target, f"{t.name} has no {target.replace('_', ' ')}; allowed here: {', '.join(have)}")
    keys = ["routed_experts", "shared_experts", "attention", "dense_mlp"] if target == "all" else [target]
    from .build import drop_launch_kv_pool, dtype_tagged_name

    tag = dtype if target == "all" else f"{dtype} {target.replace('_', ' ')}"

    def quantise(d: dict) -> None:
        d["target"]["dtypes"].update({k: dtype for k in keys})
        d["target"]["name"] = dtype_tagged_name(d["target"]["name"], tag)
        d["notes"] = list(d.get("notes") or [])
        drop_launch_kv_pool(d["engine"], d["notes"], "weights' dtype")  # a launch log's pool belongs to its weights

    after = edit_scenario(before, quantise)
    return compare(before, after, "quant", f"{target} weights -> {dtype}")


def whatif_graph(scenario=None, *, phase: str, on: bool, **overrides) -> WhatIf:
    if phase not in PHASE_FIELDS:
        raise SpecsimError("phase", phase, f"choose one of: {', '.join(PHASE_FIELDS)}")
    before = build_scenario(scenario, **overrides)
    after = edit_scenario(before, lambda d: d["engine"].update({PHASE_FIELDS[phase]: on}))
    return compare(before, after, "graph", f"CUDA graph for {phase} {'on' if on else 'off'}")


def whatif_overlap(scenario=None, *, on: bool, **overrides) -> WhatIf:
    before = build_scenario(scenario, **overrides)
    after = edit_scenario(before, lambda d: d["engine"].update(overlap_scheduler=on))
    return compare(before, after, "overlap", f"overlap scheduler (spec cycles) {'on' if on else 'off'}")


def whatif_running_cap(scenario=None, *, to: int, **overrides) -> WhatIf:
    """The launch's cap on requests run at once set to ``to`` (SGLang's --max-running-requests), e.g. raised past
    SGLang's speculative default of 48 so a batch of 128 runs whole."""
    to = check_running_cap(to, "to")
    before = build_scenario(scenario, **overrides)
    after = build_scenario(before, max_running_requests=to)
    was = before.engine.running_cap(True)
    from ..physics.cycle import kv_held
    from ..physics.params import scenario_params

    held = int(kv_held(scenario_params(after), True))
    pool = f" (the KV pool holds {held} at ctx {after.workload.ctx}: {held} run)" if held < min(to, after.workload.batch) else ""
    return compare(before, after, "running-cap", f"requests run at once: {was if was else 'no cap'} -> {to}{pool}")


def whatif_routing(scenario=None, *, locality: float | None = None, skew: float | None = None,
                   **overrides) -> WhatIf:
    """A MoE's routing changed: ``locality`` (rho, ``target.moe.routing_locality``: each request's k verify tokens
    read the distinct experts of 1 + rho (k - 1) independent tokens) and/or ``skew`` (c, ``target.moe.routing_skew``:
    the CV of the per-expert token share, so a batch's independent tokens hit fewer distinct experts)."""
    from ..io.checks import check_number

    if locality is None and skew is None:
        raise SpecsimError("locality", None, "give --locality RHO (a number in [0, 1]) and/or --skew C (a number in "
                           "[0, 3])", show_value=False)
    from ..physics.moe import ROUTING_SKEW_MAX, check_routing_skew, routing_skew_of
    from .build import no_routed_experts

    rho = None if locality is None else check_number(locality, "locality", 0.0, 1.0)
    if skew is not None:
        check_number(skew, "skew", 0.0, ROUTING_SKEW_MAX)
    before = build_scenario(scenario, **overrides)
    if before.target.moe is None:
        field, value = ("locality", locality) if rho is not None else ("skew", skew)
        raise no_routed_experts(field, value, before.target.name)
    moe = before.target.moe
    c = None if skew is None else check_routing_skew(skew, moe.num_experts, moe.experts_per_token, "skew")
    edits, said = {}, []
    if rho is not None:
        edits["routing_locality"] = rho
        said.append(f"routing locality of the verify tokens rho {moe.routing_locality:g} -> {rho:g}")
    if c is not None:
        edits["routing_skew"] = c
        said.append(f"routing skew across experts c {routing_skew_of(moe):g} -> {c:g}")
    after = edit_scenario(before, lambda d: d["target"]["moe"].update(edits))
    return compare(before, after, "routing", "; ".join(said))


def seed_nccl_tuning() -> WhatIf:
    """The founding case's lever: untuned -> tuned NCCL (both built-in scenarios)."""
    before = build_scenario("kimi-k2.5-seed-untuned")
    after = build_scenario("kimi-k2.5-seed")
    return compare(before, after, "allreduce", "seed NCCL tuning (NCCL_PROTO=LL NCCL_ALGO=Ring NCCL_P2P_LEVEL=SYS)")


__all__ = ["WhatIf", "compare", "whatif_allreduce", "whatif_gpu", "whatif_tp", "whatif_quant", "whatif_graph",
           "whatif_overlap", "whatif_running_cap", "whatif_routing", "seed_nccl_tuning"]
