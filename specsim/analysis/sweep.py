"""Vectorised sweeps over scenario fields: the best configuration and a ranked table.

Each swept numeric field gets its own broadcast axis, so an operator only costs the size of the
axes it depends on (the verify cost never sees the accept-length axis); the structural fields
(steps, topk, draft tokens) are looped over. One call evaluates a million configurations.
"""

from __future__ import annotations

import itertools
import sys
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..errors import SpecsimError, fmt_allowed
from ..physics import acceptance as acc
from ..physics.acceptance import rates_for
from ..physics.cycle import running, throughput
from ..physics.params import allreduce_path_params, gpu_params, scenario_params
from ..physics.rules import draft_tokens_for
from .build import build_scenario, check_tp

MAX_STEPS = 64  # = the schema's Speculation.steps upper bound (checked in tests)
MAX_SWEEP_POINTS = 2_000_000  # configurations in one sweep: ~100 bytes of result columns each, and as much again
#                               of temporaries per (steps, topk, draft_tokens) grid (~0.4 GB at the cap; 10M took 2 GB)
MAX_SWEEP_COMBOS = 2_000  # (steps, topk, draft_tokens) combinations: each one evaluates the whole grid
AXES = ("accept", "tp", "batch", "ctx", "gpu", "allreduce_scale", "routing_locality", "routing_skew")
#: result columns; routing_locality (added 2026-12-05) and baseline_fits_memory (whether the plain-decode baseline's
#: own running requests fit) come last so that positional CSV readers keep working; routing_skew (2026-12-06) after them
COLUMNS = ("steps", "topk", "draft_tokens", "accept_length", "tp", "batch", "ctx", "gpu", "allreduce_scale",
           "tok_s", "baseline_tok_s", "speedup", "cycle_ms", "verify_ms", "fits_memory", "routing_locality",
           "baseline_fits_memory", "routing_skew")
_FLAG_COLUMNS = ("fits_memory", "baseline_fits_memory")  # true / false in rows, 0 / 1 in CSV
_INT_COLUMNS = ("steps", "topk", "draft_tokens", "tp", "batch", "ctx")  # whole numbers in rows and CSV


class BestRow(dict):
    """A sweep row; calling it returns itself, so code written for ``SweepResult.best()`` keeps working."""

    def __call__(self) -> BestRow:
        return self


@dataclass
class SweepResult:
    """All evaluated configurations (modeled), with the best one first in ``ranked``."""

    scenario: str
    columns: dict[str, np.ndarray]
    gpu_names: list[str]
    accept_labels: list[str]
    n: int = 0
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.n = int(len(self.columns["tok_s"]))

    def _rank_key(self) -> np.ndarray:
        """tok/s, with the configurations that do not fit in GPU memory ranked after all that do."""
        tok = self.columns["tok_s"]
        fits = self.columns.get("fits_memory")
        if fits is None or fits.all() or not fits.any():
            return tok
        return np.where(fits, tok, tok - (float(tok.max()) - float(tok.min()) + 1.0))

    def ranked(self, top: int = 10) -> list[dict]:
        tok = self._rank_key()
        k = min(top, self.n)
        idx = np.argpartition(-tok, k - 1)[:k] if self.n > k else np.arange(self.n)
        idx = idx[np.argsort(-tok[idx], kind="stable")]
        return [self.row(int(i)) for i in idx]

    @property
    def best(self) -> BestRow:
        """The highest-tok/s configuration (an attribute, like Prediction's fields; ``best()`` still works)."""
        return BestRow(self.row(int(np.argmax(self._rank_key()))))

    def row(self, i: int) -> dict:
        r = {}
        for c in COLUMNS:
            v = self.columns[c][i]
            if c == "gpu":
                r[c] = self.gpu_names[int(v)]
            elif c in _FLAG_COLUMNS:
                r[c] = bool(v)
            elif c in _INT_COLUMNS:
                r[c] = int(v)
            else:
                r[c] = float(v)
        return r

    def to_dict(self, top: int = 20) -> dict:
        return {"kind": "modeled", "scenario": self.scenario, "points": self.n, "best": dict(self.best),
                "ranked": self.ranked(top), "notes": self.notes}

    def _csv_columns(self) -> list[tuple[str, np.ndarray]]:
        ints = (*_INT_COLUMNS, *_FLAG_COLUMNS)  # the flags as 0 / 1
        return [("label" if c == "gpu" else "int" if c in ints else "float", self.columns[c]) for c in COLUMNS]

    def to_csv(self) -> str:
        """Every configuration as CSV (vectorised: :func:`specsim.io.csvfmt.columns_to_csv`)."""
        from ..io import csvfmt

        return csvfmt.columns_to_csv(list(COLUMNS), self._csv_columns(), {COLUMNS.index("gpu"): self.gpu_names})

    def iter_csv(self):
        """The same CSV as :meth:`to_csv`, as byte pieces (its chunks of rows), for writing without holding it."""
        from ..io import csvfmt

        return csvfmt.iter_csv(list(COLUMNS), self._csv_columns(), {COLUMNS.index("gpu"): self.gpu_names})

    def __repr__(self) -> str:
        from ..output.render import table_text

        rows = [[r["steps"], r["topk"], r["draft_tokens"], r["accept_length"], r["tp"], r["batch"], r["ctx"], r["gpu"],
                 r["allreduce_scale"], r["tok_s"], r["speedup"], r["cycle_ms"]] for r in self.ranked(10)]
        head = ["steps", "topk", "draft_tokens", "accept", "tp", "batch", "ctx", "gpu", "ar_scale", "tok/s", "speedup", "cycle ms"]
        b = self.best
        notes = "".join(f"\nnote: {n}" for n in self.notes)
        return (f"best of {self.n:,} configurations ({self.scenario}, modeled): steps={b['steps']} topk={b['topk']} "
                f"draft_tokens={b['draft_tokens']} tp={b['tp']} batch={b['batch']} gpu={b['gpu']} -> "
                f"{b['tok_s']:.1f} tok/s, speedup {b['speedup']:.3f}\n\n" + table_text(head, rows, "ranked (top 10)") + notes)

    def _repr_html_(self) -> str:
        from ..output.render import table_html

        rows = [[r[c] for c in COLUMNS] for r in self.ranked(10)]
        return table_html(list(COLUMNS), rows, f"sweep of {self.n:,} configurations (modeled)")


def _axis(values, pos: int) -> np.ndarray:
    shape = [1] * len(AXES)
    arr = np.asarray(values, dtype=float)
    shape[pos] = arr.size
    return arr.reshape(shape)


def _check_list(name: str, values, lo=None, hi=None, integer=False):
    if values is None:
        return None
    vals = list(values)
    if not vals:
        raise SpecsimError(name, values, "the range is empty")
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v):
            raise SpecsimError(name, v, "allowed: finite numbers")
        if integer and int(v) != v:
            raise SpecsimError(name, v, "must be integers")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise SpecsimError(name, v, fmt_allowed(lo, hi, "integers" if integer else "values"))
    if len(set(vals)) < len(vals):  # a value twice would sweep the same rows twice and rank them twice
        twice = next(v for v, n in Counter(vals).items() if n > 1)
        raise SpecsimError(name, twice, "is given twice; give each value once")
    return vals


def sweep(
    scenario=None,
    *,
    steps=None,
    topk=None,
    draft_tokens=None,
    accept=None,
    accept_at_steps: int | None = None,
    accept_rates: list[list[float]] | None = None,
    tp=None,
    batch=None,
    ctx=None,
    gpu: list[str] | None = None,
    allreduce_scale=None,
    routing_locality=None,
    routing_skew=None,
    progress: bool | None = None,
) -> SweepResult:
    """Evaluate every combination of the given values (others stay at the scenario's).

    ``accept`` values are accept lengths at ``accept_at_steps`` (default: the scenario's steps);
    each is turned into a per-position profile with the scenario's shape, so tau changes with
    the step count as the draft's quality dictates. ``accept_rates`` sweeps whole profiles.
    ``routing_locality`` sweeps a MoE target's rho (``target.moe.routing_locality``, in [0, 1]); ``routing_skew``
    its router's c across experts (``target.moe.routing_skew``, up to the router's sqrt((E - k) / k)).
    """
    from ..physics.schema import MoE, Parallel, Speculation, Workload, field_range

    steps = _check_list("steps", steps, *field_range(Speculation, "steps"), True)
    topk = _check_list("topk", topk, *field_range(Speculation, "topk"), True)
    draft_tokens = _check_list("draft-tokens", draft_tokens, *field_range(Speculation, "num_draft_tokens"), True)
    accept = _check_list("accept", accept, 1.0)
    tp = _check_list("tp", tp, *field_range(Parallel, "tp"), True)
    batch = _check_list("batch", batch, *field_range(Workload, "batch"), True)
    ctx = _check_list("ctx", ctx, *field_range(Workload, "ctx"), True)
    allreduce_scale = _check_list("allreduce-scale", allreduce_scale, 1e-6, 1e6)
    if allreduce_scale is not None and any(v <= 0 for v in allreduce_scale):
        raise SpecsimError("allreduce-scale", allreduce_scale, "scales must be > 0")
    routing_locality = _check_list("routing-locality", routing_locality, *field_range(MoE, "routing_locality"))
    routing_skew = _check_list("routing-skew", routing_skew, *field_range(MoE, "routing_skew"))
    if accept is not None and accept_rates is not None:
        raise SpecsimError("accept", accept, "sweep either accept lengths or acceptance profiles, not both")
    if gpu is not None and not gpu:
        raise SpecsimError("gpu", gpu, "the list is empty")
    if gpu is not None and len(set(gpu)) < len(gpu):
        raise SpecsimError("gpu", ",".join(gpu), "a GPU is given twice; give each once")

    sc = build_scenario(scenario)
    from .build import no_routed_experts

    for name, vals in (("routing-locality", routing_locality), ("routing-skew", routing_skew)):
        if vals is not None and sc.target.moe is None:
            raise no_routed_experts(name, ",".join(f"{v:g}" for v in vals), sc.target.name)
    if routing_skew is not None:
        from ..physics.moe import check_routing_skew

        moe = sc.target.moe
        routing_skew = [check_routing_skew(v, moe.num_experts, moe.experts_per_token, "routing-skew")
                        for v in routing_skew]
    s0 = sc.speculation
    steps = steps or [s0.steps]
    topk = topk or [s0.topk]
    smax = max(steps)
    for t in tp or [sc.parallel.tp]:
        check_tp(int(t), sc.target.attention.num_heads, sc.draft.num_heads)

    # acceptance axis: rates (n_acc, smax). An accept length is tied to the step count it was
    # measured at: --accept-at-steps, else the one swept step count, else the scenario's steps.
    if accept_at_steps is not None and not 1 <= accept_at_steps <= MAX_STEPS:
        raise SpecsimError("accept-at-steps", accept_at_steps, f"must be an integer in [1, {MAX_STEPS}]")
    ref = accept_at_steps or (steps[0] if len(steps) == 1 else s0.steps)
    if accept is not None:
        bad = [a for a in accept if a > ref + 1]
        if bad:
            raise SpecsimError("accept", bad[0], f"accept length at {ref} steps must be in [1, {ref + 1}]")
        shape = sc.acceptance.rates or sc.acceptance.shape_rates or [0.6]
        rates = acc.extend_rates(acc.scale_profile_to_tau(np.asarray(shape), np.asarray(accept), ref), smax)
        labels = [f"tau={a:g}@{ref}" for a in accept]
    elif accept_rates is not None:
        for prof in accept_rates:
            if not prof or any(not 0 <= r <= 1 for r in prof):
                raise SpecsimError("accept-rates", prof, "each rate must be in [0, 1]")
        rates = np.stack([acc.extend_rates(np.asarray(prof), smax) for prof in accept_rates])
        labels = [",".join(f"{r:g}" for r in prof) for prof in accept_rates]
    else:
        rates = acc.extend_rates(rates_for(sc, smax), smax)[None, :]
        labels = ["scenario profile"]

    p = scenario_params(sc)
    gpu_names = [sc.gpu.name]
    if tp is not None:
        p["tp"] = _axis(tp, 1)
    if batch is not None:
        p["batch"] = _axis(batch, 2)
    if ctx is not None:
        p["ctx"] = _axis(ctx, 3)
    if allreduce_scale is not None:
        p["allreduce_scale"] = _axis(allreduce_scale, 5)
    if routing_locality is not None:
        p["routing_locality"] = _axis(routing_locality, 6)
    if routing_skew is not None:
        p["routing_skew"] = _axis(routing_skew, 7)
    tps = tp or [sc.parallel.tp]
    if gpu is not None:
        from ..io.presets import get_gpu

        gpu_names = []
        cols: dict[str, list] = {}
        per_tp: dict[str, list] = {}  # (gpu, tp) entries: the all-reduce numbers at each TP
        for name in gpu:
            g, ar = get_gpu(name)
            gpu_names.append(g.name)
            are = sc.parallel.allreduce_eager or ar  # no eager path of its own: the graph path's implementation
            for k, v in gpu_params(g, sc.target.dtypes, sc.draft.dtype, sc.engine.moe_fp8_block_scales,
                                   sc.engine).items():
                cols.setdefault(k, []).append(v)
            at_tp = [allreduce_path_params(ar, are, int(t)) for t in tps]  # latencies, bandwidths, limits by TP
            for k in at_tp[0]:
                per_tp.setdefault(k, []).append([x[k] for x in at_tp])
        for k, v in cols.items():
            p[k] = _axis(v, 4)
        shape = [1] * len(AXES)
        shape[1], shape[4] = len(tps), len(gpu_names)
        for k, v in per_tp.items():
            p[k] = np.asarray(v).T.reshape(shape)  # (tp, gpu)
    elif tp is not None:
        ar, are = sc.parallel.allreduce, sc.parallel.allreduce_eager or sc.parallel.allreduce
        at_tp = [allreduce_path_params(ar, are, int(t)) for t in tps]
        for k in at_tp[0]:
            p[k] = _axis([x[k] for x in at_tp], 1)

    full = (len(labels), len(tps), len(batch or [1]), len(ctx or [1]), len(gpu_names), len(allreduce_scale or [1]),
            len(routing_locality or [1]), len(routing_skew or [1]))
    combos = []
    for s, k in itertools.product(steps, topk):
        for req in (draft_tokens if k > 1 and draft_tokens else [None]):
            d = draft_tokens_for(s, k, req)
            if d is not None:
                combos.append((s, k, d))
                if len(combos) > MAX_SWEEP_COMBOS:  # each is one evaluation of the whole grid (~1 ms)
                    raise SpecsimError("sweep", f"more than {MAX_SWEEP_COMBOS:,} (steps, topk, draft_tokens) combinations",
                                       f"allowed at most {MAX_SWEEP_COMBOS:,} per sweep; narrow --steps, --topk or "
                                       "--draft-tokens, or split the sweep")
    if not combos:
        raise SpecsimError("draft-tokens", draft_tokens, "no (steps, topk, draft_tokens) combination is valid: need draft_tokens-1 <= topk+(steps-1)*topk^2")
    total = len(combos) * int(np.prod(full))
    if total > MAX_SWEEP_POINTS:
        raise SpecsimError("sweep", f"{total:,} configurations",
                           f"allowed at most {MAX_SWEEP_POINTS:,} per sweep; narrow the ranges or split the sweep")
    show = progress if progress is not None else total > 5_000_000 and sys.stderr.isatty()  # ~0.5 s and more, to a terminal
    n_grid = int(np.prod(full))
    dtypes = {"steps": np.int16, "topk": np.int16, "draft_tokens": np.int16, "fits_memory": bool,
              "baseline_fits_memory": bool}
    columns = {c: np.empty(len(combos) * n_grid, dtype=dtypes.get(c, float)) for c in COLUMNS}  # written in place
    grids = np.meshgrid(np.arange(full[0]), np.asarray(tps, float), np.asarray(batch or [sc.workload.batch], float),
                        np.asarray(ctx or [sc.workload.ctx], float), np.arange(full[4]),
                        np.asarray(allreduce_scale or [sc.parallel.allreduce_scale], float),
                        np.asarray(routing_locality or [float(p["routing_locality"])], float),
                        np.asarray(routing_skew or [float(p["routing_skew"])], float), indexing="ij",
                        sparse=True)  # broadcast views: each column is written from its axis, no full grids
    # memory fit (weights + KV cache per rank against each GPU's HBM): the rule predict warns with
    from ..physics.cost import weight_bytes_per_rank
    from .predict import fits_memory, kv_bytes_per_rank, workload_fits

    mem = _axis([sc.gpu.memory_bytes], 4) if gpu is None else _axis([get_gpu(g)[0].memory_bytes for g in gpu], 4)
    weights = weight_bytes_per_rank(p)
    running_batch = running(p, "spec_running_cap")["batch"]  # queued requests hold no KV cache
    # the baseline (plain decode, one token per request) runs its own requests at once, often more than the capped
    # speculative run: the same rule, the same for every (steps, topk, draft_tokens)
    kv_base = kv_bytes_per_rank(sc, 1, tp=p["tp"], batch=running(p, "running_cap")["batch"], ctx=p["ctx"], p=p)
    base_fits = np.broadcast_to(workload_fits(p, weights, mem, fits_memory(weights, kv_base, mem), 1.0, False), full)
    pooled_rows, fewest_held = 0, np.inf  # rows where the KV pool, not the batch or the cap, bounds a run
    for i, (s, k, d) in enumerate(combos):
        if k == 1:
            tau = 1.0 + np.cumprod(rates[:, :s], axis=1).sum(axis=1)
        else:
            tau = acc.tree_accept_length(rates, s, k, d)
        q = dict(p)
        q.update(steps=float(s), topk=float(k), num_draft_tokens=float(d))
        tau_b = _axis(tau, 0)
        th = throughput(q, tau_b)
        phases = th["phases"]
        cyc = np.broadcast_to(th["cycle_ms"], full)
        tok = np.broadcast_to(th["tok_s"], full)
        base_tok = np.broadcast_to(th["baseline_tok_s"], full)
        sl = slice(i * n_grid, (i + 1) * n_grid)
        col = {c: columns[c][sl].reshape(full) for c in COLUMNS}  # views: each column written once
        col["steps"][...], col["topk"][...], col["draft_tokens"][...] = s, k, d
        col["accept_length"][...] = tau_b
        for c, g in zip(("tp", "batch", "ctx", "gpu", "allreduce_scale", "routing_locality", "routing_skew"), grids[1:]):
            col[c][...] = g
        col["tok_s"][...] = tok
        col["baseline_tok_s"][...] = base_tok
        np.divide(tok, base_tok, out=col["speedup"])
        col["cycle_ms"][...] = cyc
        col["verify_ms"][...] = phases["verify"]
        kv = kv_bytes_per_rank(sc, d, tp=p["tp"], batch=running_batch, ctx=p["ctx"], p=p)
        col["fits_memory"][...] = workload_fits(q, weights, mem, fits_memory(weights, kv, mem), float(d), True)
        pooled = np.zeros(full, dtype=bool)  # the requests running (throughput's) below batch and cap: the pool's
        for run, cap in (("running_requests", "spec_running_cap"), ("baseline_running_requests", "running_cap")):
            held = np.broadcast_to(th[run], full)
            short = held < np.broadcast_to(np.minimum(q["batch"], q[cap]), full)
            if short.any():
                fewest_held = min(fewest_held, float(held[short].min()))
            pooled |= short
        pooled_rows += int(pooled.sum())
        col["baseline_fits_memory"][...] = base_fits
        if show:
            done = (i + 1) / len(combos)
            sys.stderr.write(f"\rsweep [{'#' * int(30 * done):<30}] {i + 1}/{len(combos)} structural configs")
            sys.stderr.flush()
    if show:
        sys.stderr.write("\n")
    res = SweepResult(scenario=sc.name, columns=columns, gpu_names=gpu_names, accept_labels=labels)
    if gpu:
        res.notes.append("GPU axis: each GPU preset with its default graph all-reduce; engine behaviour and the eager "
                         "collective path stay the scenario's (as `specsim predict --gpu`)")
    if accept is not None:
        res.notes.append(f"accept lengths are chain (topk=1) accept lengths at {ref} steps; other step counts and "
                         "trees follow from the per-position profile they imply")
    if sc.engine.chains_only and any(k > 1 for k in topk):
        res.notes.append(f"{sc.engine.name} verifies chains only (topk 1): its topk > 1 rows are modeled as if trees "
                         "could run there")
    e = sc.engine
    cap = e.running_cap(True)
    if cap is not None and max(batch or [sc.workload.batch]) > cap:
        res.notes.append(f"{e.name} runs at most {cap} requests at once"
                         + (" (--max-running-requests), speculation on or off" if e.max_running_requests else
                            " with speculation on (its default; plain decode runs the whole batch)")
                         + f": rows of batch above {cap} are modeled with {cap} running and the rest queued")
    if pooled_rows:
        res.notes.append(f"{pooled_rows:,} of {len(combos) * n_grid:,} configurations ask for more requests than the "
                         "engine's KV-cache pool holds at their context (physics.memory): they run what it holds, as few "
                         f"as {int(fewest_held)}, and the rest wait in the queue (--kv-pool-tokens takes your launch "
                         "log's figure)")
    fits = columns["fits_memory"]
    if not fits.all():
        n_out = int(fits.size - fits.sum())
        res.notes.append(f"{n_out:,} of {fits.size:,} configurations do not fit in GPU memory (the weights, or one request's KV "
                         "cache x (ctx + draft tokens) in the engine's KV pool; engines without a pool: weights + the "
                         "running requests' KV cache over 95 % of HBM): "
                         + ("ranked after those that do (fits_memory false)" if fits.any() else "none fits"))
    base_out = fits & ~columns["baseline_fits_memory"]
    if base_out.any():
        n_base = int(base_out.sum())
        res.notes.append(f"{n_base:,} of {fits.size:,} configurations fit but their baseline does not (no speculation, "
                         "the engine runs more requests at once: weights + their KV cache x (ctx + 1) per rank over 95 % "
                         "of HBM): baseline tok/s and speedup there are against a baseline that cannot run "
                         "(baseline_fits_memory false)")
    res.notes.extend(sc.notes)
    return res


def best_steps(scenario=None, max_steps: int = 10, *, min_steps: int = 1,
               accept_rates: list[float] | None = None) -> BestRow:
    """The one best-step-count search: the sweep's best row over steps min_steps..max_steps.

    Used by figures, reports, what-ifs and the training what-if alike; ``accept_rates`` sweeps
    one given per-position profile instead of the scenario's own. Ties go to fewer steps.
    """
    if not 1 <= int(min_steps) <= int(max_steps) <= MAX_STEPS:
        raise SpecsimError("steps", f"{min_steps}..{max_steps}", f"need 1 <= min <= max <= {MAX_STEPS}")
    profiles = None if accept_rates is None else [[float(x) for x in accept_rates[:max_steps]]]
    return sweep(scenario, steps=list(range(int(min_steps), int(max_steps) + 1)), accept_rates=profiles,
                 progress=False).best
