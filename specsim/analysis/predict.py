"""The library entry points: build a scenario with overrides, predict tok/s, verify curves."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import SpecsimError, SpecsimTypeError
from ..physics import acceptance as acc
from ..physics.acceptance import expected_accept_length, rates_for  # noqa: F401
from ..physics.cost import COMPONENTS
from ..physics.cycle import PHASES, running, throughput, verify_breakdown
from ..physics.params import scenario_params
from .build import build_scenario, build_view, check_tp  # noqa: F401  (re-exported)

if TYPE_CHECKING:
    from ..physics.record import Record
    from ..physics.schema import Scenario


@dataclass
class Prediction:
    """A modeled speculative-decoding prediction for one scenario (all times per cycle, ms)."""

    scenario: str
    model: str
    gpu: str
    tp: int
    steps: int
    topk: int
    num_draft_tokens: int
    batch: int
    ctx: int
    accept_length: float
    accept_length_std: float | None
    tok_s: float
    baseline_tok_s: float
    speedup: float
    cycle_ms: float
    verify_ms: float
    baseline_step_ms: float
    phases_ms: dict[str, float]
    verify_breakdown_ms: dict[str, float]
    acceptance_rates: list[float]
    measured: dict[str, object] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    running_requests: int | None = None  # requests the speculative run runs at once (the batch, or the engine's cap)
    baseline_running_requests: int | None = None

    @property
    def phases_pct(self) -> dict[str, float]:
        return {k: 100.0 * v / self.cycle_ms for k, v in self.phases_ms.items()}

    def to_dict(self) -> dict:
        """JSON-ready dict; ``measured`` holds the scenario's recorded measurements, never model output."""
        return {
            "kind": "modeled",
            "scenario": self.scenario,
            "model": self.model,
            "gpu": self.gpu,
            "tp": self.tp,
            "steps": self.steps,
            "topk": self.topk,
            "num_draft_tokens": self.num_draft_tokens,
            "batch": self.batch,
            "ctx": self.ctx,
            "tok_s": self.tok_s,
            "baseline_tok_s": self.baseline_tok_s,
            "speedup": self.speedup,
            "cycle_ms": self.cycle_ms,
            "verify_ms": self.verify_ms,
            "baseline_step_ms": self.baseline_step_ms,
            "accept_length": self.accept_length,
            "accept_length_std": self.accept_length_std,
            "acceptance_rates": self.acceptance_rates,
            "phases_ms": self.phases_ms,
            "phases_pct": self.phases_pct,
            "verify_breakdown_ms": self.verify_breakdown_ms,
            "running_requests": self.running_requests,
            "baseline_running_requests": self.baseline_running_requests,
            "measured": self.measured,
            "warnings": self.warnings,
        }

    def __repr__(self) -> str:
        from ..output.render import prediction_text

        return prediction_text(self)

    def _repr_markdown_(self) -> str:
        from ..output.render import prediction_markdown

        return prediction_markdown(self)

    def _repr_html_(self) -> str:
        from ..output.render import prediction_html

        return prediction_html(self)


WEIGHTS_MAX_FRACTION = 0.92  # weights above this share of HBM leave no room for KV cache and graphs (assumed)
USABLE_MEMORY_FRACTION = 0.95  # share of HBM weights + KV may take (engines reserve the rest; assumed)
GPUS_PER_NODE = 8  # HGX/DGX nodes: TP beyond this crosses nodes


def kv_bytes_per_rank(sc: Scenario, tokens_per_request=None, *, tp=None, batch=None, ctx=None, p=None):
    """KV-cache bytes one TP rank holds for the workload (running requests x (context + verify width)).

    ``tp``, ``batch``, ``ctx`` and ``tokens_per_request`` default to the scenario's; given as arrays they
    broadcast (the sweep's memory fit), and the result is an array. ``p``: the scenario's parameters, where the
    caller has them (else built)."""
    import numpy as np

    from ..physics.memory import kv_token_bytes

    p = scenario_params(sc) if p is None else p
    tp = sc.parallel.tp if tp is None else tp
    per_token = kv_token_bytes({**p, "tp": tp})  # the one per-token rule (physics.memory)
    w = tokens_per_request if tokens_per_request is not None else (sc.speculation.num_draft_tokens or 1)
    if batch is None:  # the requests running at once (speculation on): queued ones hold no KV cache
        batch = sc.engine.running_at_once(sc.workload.batch, True)
    c = sc.workload.ctx if ctx is None else ctx
    kv = batch * (c + w) * per_token
    return kv if np.ndim(kv) else float(kv)


def fits_memory(weights, kv, memory_bytes):
    """Whether weights and KV cache fit one GPU (the rule of :func:`scenario_warnings`; arrays broadcast)."""
    return (weights <= WEIGHTS_MAX_FRACTION * memory_bytes) & (weights + kv <= USABLE_MEMORY_FRACTION * memory_bytes)


def workload_fits(p: dict, weights, memory_bytes, without_pool, width: float, speculative: bool):
    """Whether a workload fits (the sweep's ``fits_memory`` rule, and predict's warnings): the weights leave room and,
    for an engine that sizes a KV pool, the pool holds one request at the context (+ ``width`` tokens a step adds),
    as the engine then queues the rest; else ``without_pool`` (weights + the running requests' KV cache over 95 % of
    HBM, :func:`fits_memory`). Arrays broadcast."""
    import numpy as np

    from ..physics.memory import KV_RULE_NONE, kv_pool_tokens

    has_pool = (p["kv_memory_rule"] != KV_RULE_NONE) | (p["kv_pool_tokens"] > 0)
    pool_ok = (fits_memory(weights, 0.0, memory_bytes)  # the weights leave room
               & (kv_pool_tokens(p, weights, speculative=speculative) >= p["ctx"] + width))
    return np.where(has_pool, pool_ok, without_pool)


def scenario_warnings(sc: Scenario, p: dict | None = None) -> list[str]:
    """Things a user should know before trusting the numbers: memory fit, node size, notes."""
    from ..physics.cost import weight_bytes_per_rank

    p = p if p is not None else scenario_params(sc)
    out = list(sc.notes)
    weights, kv = weight_bytes_per_rank(p), kv_bytes_per_rank(sc, p=p)
    mem = sc.gpu.memory_bytes
    if weights > WEIGHTS_MAX_FRACTION * mem:
        out.append(f"target weights need {weights / 1e9:.0f} GB per rank at TP{sc.parallel.tp}, more than the "
                   f"{mem / 1e9:.0f} GB of a {sc.gpu.name} leaves room for (KV cache, graphs)")
    elif sc.engine.kv_memory_rule is not None or sc.engine.kv_pool_tokens is not None:
        out += kv_pool_warnings(sc, p, weights)
    elif sc.engine.kv_memory_fraction is not None:
        out.append(f"{sc.engine.name} sizes no KV-cache pool (a static cache sized to the batch): --mem-fraction "
                   f"{sc.engine.kv_memory_fraction} changes nothing here")
    elif weights + kv > USABLE_MEMORY_FRACTION * mem:
        run = sc.engine.running_at_once(sc.workload.batch, True)
        out.append(f"weights ({weights / 1e9:.0f} GB) + KV cache for {run} running requests x ctx {sc.workload.ctx} "
                   f"({kv / 1e9:.0f} GB) exceed the {mem / 1e9:.0f} GB per GPU: this workload does not fit")
    else:
        run_base = sc.engine.running_at_once(sc.workload.batch, False)
        kv_base = kv_bytes_per_rank(sc, 1, batch=run_base, p=p)
        if not fits_memory(weights, kv_base, mem):
            out.append(f"the baseline (no speculation) runs {run_base} requests at once: their KV cache x ctx "
                       f"{sc.workload.ctx} ({kv_base / 1e9:.0f} GB) with the weights exceeds the {mem / 1e9:.0f} GB per "
                       "GPU, so baseline tok/s and the speedup are against a baseline that does not fit")
    if sc.parallel.tp > GPUS_PER_NODE:
        out.append(f"TP{sc.parallel.tp} spans more than one 8-GPU node: all-reduce latency is extrapolated "
                   "from intra-node measurements and is likely optimistic")
    if sc.engine.model_kernels and sc.target.architecture not in sc.engine.model_kernels:
        arch = sc.target.architecture
        what = (f"architecture {arch[:80]} is not among those whose kernels the engine preset itemises" if arch else
                "target.architecture is not set (config.json architectures[0])")
        out.append(f"{what}: its layers take the engine's default small kernels ({', '.join(sorted(sc.engine.model_kernels))} "
                   "are itemised)")
    if sc.engine.chains_only and sc.speculation.topk > 1:
        out.append(f"{sc.engine.name} verifies chains only (topk 1); this tree (topk {sc.speculation.topk}) is modeled "
                   "as if it could run there")
    out += running_cap_warnings(sc, p)
    if sc.acceptance.pmf is not None and len(sc.acceptance.pmf) > sc.speculation.steps + 1:
        out.append(f"acceptance PMF has {len(sc.acceptance.pmf)} entries; only lengths 1..{sc.speculation.steps + 1} "
                   "are possible at these steps (the tail is cut)")
    return out


def kv_pool_warnings(sc: Scenario, p: dict, weights: float) -> list[str]:
    """The batch past what the engine's KV-cache pool holds at the context (``physics.memory``): it waits in the
    queue; a request the pool cannot hold at all does not run; a launch's pool larger than the GPU can hold."""
    from ..physics.cycle import kv_held
    from ..physics.memory import kv_pool_tokens, kv_token_bytes

    e, w = sc.engine, sc.workload
    width = sc.speculation.num_draft_tokens or 1
    pool_s, pool_b = (kv_pool_tokens(p, weights, speculative=spec) for spec in (True, False))
    whence = ("the launch's --kv-pool-tokens" if e.kv_pool_tokens is not None else
              "modeled from the engine's memory rule" + (f" at --mem-fraction {e.kv_memory_fraction}"
                                                         if e.kv_memory_fraction is not None else ""))
    out = []
    room = p["device_memory_bytes"] - weights
    need = 0.0 if e.kv_pool_tokens is None else e.kv_pool_tokens * kv_token_bytes(p)
    if need > room:
        out.append(f"--kv-pool-tokens {e.kv_pool_tokens:,} needs {need / 1e9:,.1f} GB of "
                   f"KV cache per GPU, more than the {max(room, 0) / 1e9:,.1f} GB the weights leave on a {sc.gpu.name}: "
                   "check the figure (tokens per GPU, from this launch's log)")
    if pool_s < w.ctx + width:
        return out + [f"the KV-cache pool ({pool_s:,.0f} tokens per GPU, {whence}) cannot hold one request at ctx "
                      f"{w.ctx} (+{width} draft tokens): this workload does not fit (the numbers assume one runs)"]
    held_s, held_b = int(kv_held(p, True)), int(kv_held(p, False))
    want_s, want_b = e.running_at_once(w.batch, True), e.running_at_once(w.batch, False)
    if held_s >= want_s and held_b >= want_b:
        return out

    def runs(held, want, what):
        return (f"{held} at once {what} (the pool)" if held < want else
                f"{want} {what} (the engine's cap)" if want < w.batch else f"all {w.batch} {what}")

    return out + [f"the KV-cache pool holds {pool_s:,.0f} tokens per GPU with speculation and {pool_b:,.0f} without "
                  f"({whence}; SGLang's max_total_num_tokens, vLLM's 'GPU KV cache size'): at ctx {w.ctx} the batch of "
                  f"{w.batch} runs {runs(held_s, want_s, 'with speculation')} and {runs(held_b, want_b, 'without')}; "
                  "the rest wait in the queue (--kv-pool-tokens takes your log's figure)"]


def running_cap_warnings(sc: Scenario, p: dict | None = None) -> list[str]:
    """The batch past the engine's cap on requests run at once: it waits in the queue (said by the KV-pool warning
    instead where the pool holds fewer than the cap)."""
    from ..physics.cycle import kv_held

    e, b = sc.engine, sc.workload.batch
    cap = e.running_cap(True)
    if cap is None or b <= cap or p is not None and kv_held(p, True) < cap:
        return []
    if e.max_running_requests:
        return [f"{e.name} runs at most {cap} requests at once (the launch's --max-running-requests): {b - cap} of the "
                f"batch of {b} wait in the queue, speculation on or off"]
    base = b if p is None else min(b, int(kv_held(p, False)))
    plain = f"all {b}" if base == b else f"{base} (what its KV pool holds)"
    return [f"{e.name} runs at most {cap} requests at once (its default with speculation on, as --max-running-requests "
            f"is not set): with speculation {b - cap} of the batch of {b} wait in the queue, and speculative tok/s is that "
            f"of {cap} running while plain decode runs {plain}; give --max-running-requests to model a launch that raises it"]


def evaluate(sc: Scenario | Record) -> Prediction:
    """Run the cost, cycle and acceptance models on one scenario (validated, or a record of one)."""
    p = scenario_params(sc)
    s = sc.speculation
    rates = rates_for(sc)
    tau = expected_accept_length(sc)
    th = throughput(p, tau)
    phases, cyc, base = th["phases"], float(th["cycle_ms"]), th["baseline"]
    vb = th["verify_breakdown"]
    batch = sc.workload.batch
    tok_s, base_tok_s = float(th["tok_s"]), float(th["baseline_tok_s"])
    std = float(acc.accept_length_std(rates, s.steps)) if s.topk == 1 else None
    warnings = scenario_warnings(sc, p)
    measured = {}
    if sc.provenance.get("measured"):
        measured = dict(sc.provenance["measured"])  # type: ignore[arg-type]
    return Prediction(
        scenario=sc.name, model=sc.target.name, gpu=sc.gpu.name, tp=sc.parallel.tp, steps=s.steps, topk=s.topk,
        num_draft_tokens=int(s.num_draft_tokens), batch=batch, ctx=sc.workload.ctx, accept_length=tau,
        accept_length_std=std, tok_s=tok_s, baseline_tok_s=base_tok_s, speedup=tok_s / base_tok_s, cycle_ms=cyc,
        verify_ms=float(vb["total"]), baseline_step_ms=float(base["total"]),
        phases_ms={k: float(phases[k]) for k in PHASES},
        verify_breakdown_ms={k: float(vb[k]) for k in COMPONENTS},
        acceptance_rates=[float(x) for x in rates[: s.steps]], measured=measured, warnings=warnings,
        running_requests=int(th["running_requests"]), baseline_running_requests=int(th["baseline_running_requests"]),
    )


def predict(scenario: str | Scenario | None = None, **overrides) -> Prediction:
    """Predict speculative tok/s: ``specsim.predict(steps=2, accept=2.1)`` on the default scenario."""
    return evaluate(build_view(scenario, **overrides))


@dataclass
class VerifyCurve:
    """Target verify forward time (modeled) versus draft tokens per request."""

    scenario: str
    tokens: list[int]
    verify_ms: list[float]
    verify_ms_low: list[float] | None = None
    verify_ms_high: list[float] | None = None
    breakdown_ms: dict[str, list[float]] = field(default_factory=dict)
    measured: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what predict warns of for the same deployment

    @property
    def ms(self) -> list[float]:
        """The modeled verify times in milliseconds, one per width in ``tokens``."""
        return list(self.verify_ms)

    def to_dict(self) -> dict:
        d = {"kind": "modeled", "scenario": self.scenario, "tokens": self.tokens, "verify_ms": self.verify_ms}
        if self.verify_ms_low is not None:
            d["verify_ms_low"], d["verify_ms_high"] = self.verify_ms_low, self.verify_ms_high
        d["breakdown_ms"] = self.breakdown_ms
        if self.measured:
            d["measured"] = self.measured
        d["warnings"] = self.warnings
        return d

    def __repr__(self) -> str:
        from ..output.render import verify_text

        return verify_text(self)

    def _repr_html_(self) -> str:
        from ..output.render import verify_html

        return verify_html(self)


MAX_VERIFY_WIDTH = 65536  # draft tokens per request a verify forward may take (the datasets' range)


def verify_widths(tokens, one: bool = False) -> list[int]:
    """Verify widths as the API takes them: an integer, or (unless ``one``) a non-empty list, tuple or range of at
    most :data:`~specsim.physics.rules.MAX_LIST` integers, each in [1, 65536]; else the one-line error naming
    ``tokens``."""
    import numbers

    from ..io.checks import check_int
    from ..physics.rules import MAX_LIST

    one_width = f"allowed: an integer in [1, {MAX_VERIFY_WIDTH}]"
    allowed = one_width + ("" if one else f", or a list of 1 to {MAX_LIST} of them")
    if one or isinstance(tokens, (numbers.Number, str, bytes)):
        tokens = [tokens]  # one width (a string is refused as one, not read as its characters)
    elif not isinstance(tokens, (list, tuple, range)) or not 1 <= len(tokens) <= MAX_LIST:
        raise SpecsimTypeError("tokens", tokens, allowed)
    for i, t in enumerate(tokens):
        if not isinstance(t, numbers.Integral) or isinstance(t, bool):  # 2.5 or "3" is no width (2.0 is, as in JSON)
            check_int(t, "tokens" if one else f"tokens[{i}]", 1, MAX_VERIFY_WIDTH)
        elif not 1 <= t <= MAX_VERIFY_WIDTH:
            raise SpecsimError("tokens" if one else f"tokens[{i}]", t, one_width)
    return [int(t) for t in tokens]


def verify_ms(tokens=(1, 3, 6, 16), scenario: str | Scenario | None = None, **overrides) -> VerifyCurve:
    """Modeled target verify forward (ms) for each verify width in ``tokens``, over the requests the engine runs
    at once with speculation on (the batch, or its cap where smaller: the rest of the batch waits)."""
    toks = verify_widths(tokens)
    sc = build_scenario(scenario, **overrides)
    p = running(scenario_params(sc), "spec_running_cap")
    vb = verify_breakdown(p, num_draft_tokens=np.asarray(toks, dtype=float))
    curve = VerifyCurve(
        scenario=sc.name, tokens=toks, verify_ms=[float(x) for x in np.broadcast_to(vb["total"], (len(toks),))],
        breakdown_ms={k: [float(x) for x in np.broadcast_to(vb[k], (len(toks),))] for k in COMPONENTS},
        warnings=scenario_warnings(sc),
    )
    if sc.calibration:
        from .calibrate import verify_band

        band = verify_band(sc, toks)
        if band is not None:
            curve.verify_ms_low, curve.verify_ms_high = band
    points = (sc.calibration or {}).get("points") if sc.calibration else None
    if points:
        curve.measured = [dict(x) for x in points]  # type: ignore[union-attr]
    return curve


@dataclass
class OperatorTable:
    """Per-operator breakdown of the target verify forward (modeled), one row per kernel kind."""

    scenario: str
    tokens: int
    batch: int
    ctx: int
    total_ms: float
    kernels: int
    rows: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what predict warns of for the same deployment

    def to_dict(self) -> dict:
        return {"kind": "modeled", "scenario": self.scenario, "tokens": self.tokens, "batch": self.batch,
                "ctx": self.ctx, "total_ms": self.total_ms, "kernels": self.kernels, "operators": self.rows}

    def __repr__(self) -> str:
        from ..output.render import table_text

        rows = [[r["name"], r["family"], r["phase"], r["count"], r["mbytes"], r["gflops"], r["ms"], r["pct"]] for r in self.rows]
        head = ["operator", "family", "phase", "kernels", "MB each", "GFLOP each", "ms", "%"]
        return table_text(head, rows, self._title()) + "".join(f"\n{line}" for line in self.grid_lines())

    def grid_lines(self) -> list[str]:
        """One line per fused-MoE GEMM on the engine's Triton grid: its CTAs and what bounds its weight stream."""
        out = []
        for r in self.rows:
            g = r.get("grid")
            if g:
                why = "too few CTAs: latency-bound" if g["latency_bound"] else "the tiles' bandwidth share"
                out.append(f"{r['name']}: {g['ctas_live']:,.0f} live CTAs of {g['ctas_launched']:,.0f} launched, "
                           f"{g['rows_padded']:,.0f} padded rows; weights stream at {g['stream_TB_s']:.2f} TB/s ({why})")
        return out

    def _title(self) -> str:
        return (f"{self.scenario}: verify forward over {self.batch} x {self.tokens} tokens, ctx {self.ctx} "
                f"(modeled): {self.total_ms:.3f} ms, {self.kernels} kernels")

    def _repr_markdown_(self) -> str:
        from ..output.render import table_markdown

        rows = [[r["name"], r["family"], r["phase"], r["count"], r["mbytes"], r["gflops"], r["ms"], r["pct"]] for r in self.rows]
        head = ["operator", "family", "phase", "kernels", "MB each", "GFLOP each", "ms", "%"]
        notes = "".join(f"\n\n{line}" for line in self.grid_lines())
        return f"**{self._title()}**\n\n" + table_markdown(head, rows) + notes


def operator_table(tokens: int = 3, scenario: str | Scenario | None = None, **overrides) -> OperatorTable:
    """The verify forward as its operator list: count, bytes, FLOPs and modeled time of each kernel kind.

    Launch cost and graph replay are rows of their own, so the rows add up to the verify time. The forward
    runs the requests the engine runs at once with speculation on (``batch``: the batch, or the engine's cap).
    """
    from ..physics.cycle import graph_batch, graph_width

    tokens = verify_widths(tokens, one=True)[0]
    sc = build_scenario(scenario, **overrides)
    p = running(scenario_params(sc), "spec_running_cap")
    out = verify_breakdown(p, num_draft_tokens=float(tokens), keep_rows=True)
    b, g = graph_batch(p, p["batch"], p["graph_verify"])  # whether the verify replays a graph at this batch ...
    _, g = graph_width(p, b, float(tokens), g)  # ... and at this many tokens (token-captured engines)
    total = float(out["total"])
    rows = []
    for r in out["rows"]:
        count = float(np.max(r["count"]))
        us = float(np.max(r["us"]))
        if count == 0 and not (r["family"] in ("fixed", "launch") and us > 0):  # time with no kernel of its own stays a row
            continue
        row = {"name": r["name"], "family": r["family"], "phase": r["phase"], "count": int(round(count)),
               "mbytes": float(np.max(r["bytes"])) / 1e6, "gflops": float(np.max(r["flops"])) / 1e9, "ms": us / 1e3}
        grid = r.get("grid")
        if grid and np.isfinite(grid["ctas_live"]):
            row["grid"] = {"ctas_live": float(grid["ctas_live"]), "ctas_launched": float(grid["ctas_launched"]),
                           "rows_padded": float(grid["rows_padded"]), "stream_TB_s": float(grid["stream_bytes_per_s"]) / 1e12,
                           "latency_bound": bool(grid["latency_bound"])}
        rows.append(row)
    # each row holds its kernels' node gaps; the eager host's wait (eager_launch_wait) and the replay itself apart
    fixed_ms = float(g) * float(p["graph_fixed_us"]) / 1e3
    if fixed_ms > 0:
        rows.append({"name": "graph_replay", "family": "launch", "phase": "misc", "count": 1, "mbytes": 0.0, "gflops": 0.0,
                     "ms": fixed_ms})
    for r in rows:
        r["pct"] = 100.0 * r["ms"] / total if total > 0 else 0.0
    rows.sort(key=lambda r: -r["ms"])
    return OperatorTable(sc.name, int(tokens), int(p["batch"]), int(sc.workload.ctx), total,
                         int(round(float(out["kernels"]))), rows, scenario_warnings(sc))
