"""Calibration: fit physically named parameters to measured timings, with uncertainty.

Bounded, regularised least squares (scipy) in log-parameter space. Data residuals are
``log(model / measured) / sigma_meas``; each parameter's prior adds ``log(theta / prior) /
sigma_prior``, so the presets' priors regularise the fit and two points move at most what two
points can determine. The covariance ``(J^T J)^-1`` gives the 90 % bands of the verify curve;
a parameter whose posterior width is close to its prior width is reported as not pinned down.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..errors import SpecsimError, fmt_bound, fmt_range
from ..physics.cycle import baseline_step_ms, cycle_ms, cycle_phases_ms, running, verify_breakdown
from ..physics.operators import ACT_BYTES
from ..physics.params import allreduce_path_params, scenario_params
from ..physics.schema import Scenario

Z90 = 1.6448536269514722
MEAS_REL_SIGMA = 0.02  # a measured forward time is good to ~2 %
MAX_BOOTSTRAP = 2000  # bootstrap refits (each a full least-squares fit)
REFIT_TOL = 1e-6  # a bootstrap refit's tolerances (scipy's 1e-8 moved the bands by < 0.1 % of 100 resamples' spread)
FD_STEP = 1.4901161193847656e-08  # finite-difference step of the Jacobian, relative: sqrt(float64 eps), scipy's 2-point
MEASURED_MS_RANGE = (1e-3, 1e7)  # a forward or cycle time calibrate accepts: 1 us to ~3 h (physically possible)
MAX_RESIDUAL_PCT = 25.0  # beyond this the inputs (or missing physics), not the parameters, are wrong: refuse
PINNED_SD_RATIO = 0.7  # a posterior log-sd below this fraction of the prior's means the data pinned the parameter

class FitParameter(NamedTuple):
    """One fitted parameter, declared once: what it is, its prior spread, bounds and scenario field."""

    unit: str
    meaning: str
    prior_sd_log: float  # prior spread, in log units (0.5 ~ a factor 1.65 at one sigma)
    lower: float
    upper: float
    path: tuple[str, str] | None  # (component, field) in the Scenario; None: an all-reduce alpha at this TP
    why: str  # where the spread and bounds come from


_SPREAD = "spread: how well the preset's public prior is known (assumed); bounds: physically possible values"
PARAMETERS: dict[str, FitParameter] = {
    "kernel_floor_us": FitParameter("us", "minimum GPU time of one GEMM / attention kernel (and of the small kernels of "
                                    "an engine without a floor of its own)", 0.5, 0.5, 20.0, ("gpu", "kernel_floor_us"), _SPREAD),
    "small_kernel_floor_us": FitParameter("us", "GPU time of one of the engine's small kernels beyond its launch", 0.5, 0.05,
                                          20.0, ("engine", "small_kernel_floor_us"), _SPREAD),
    "mem_efficiency": FitParameter("fraction", "achieved/datasheet HBM BW of weight GEMMs", 0.25, 0.2, 1.0,
                                   ("gpu", "mem_efficiency"), _SPREAD),
    "moe_mem_efficiency": FitParameter("fraction", "achieved/datasheet HBM BW of routed-expert GEMMs", 0.5, 0.05, 1.0,
                                       ("engine", "moe_mem_efficiency"), _SPREAD),
    "attention_mem_efficiency": FitParameter("fraction", "achieved/datasheet HBM BW of attention over the KV cache", 0.5,
                                             0.05, 1.0, ("engine", "attention_mem_efficiency"), _SPREAD),
    "allreduce_alpha_graph_us": FitParameter("us", "all-reduce latency (graph-captured path)", 0.7, 0.5, 500.0, None, _SPREAD),
    "allreduce_alpha_eager_us": FitParameter("us", "all-reduce latency (eager path)", 0.7, 0.5, 500.0, None, _SPREAD),
    "allreduce_fallback_alpha_graph_us": FitParameter("us", "latency of the all-reduce messages past the path's first size "
                                                      "limit take (custom two-shot; graph-captured path)", 0.7, 0.5, 500.0,
                                                      None, _SPREAD),
    "allreduce_fallback_alpha_eager_us": FitParameter("us", "latency of the all-reduce messages past the path's first size "
                                                      "limit take (eager path)", 0.7, 0.5, 500.0, None, _SPREAD),
    "graph_node_us": FitParameter("us", "CUDA-graph cost per captured kernel", 0.5, 0.05, 10.0, ("engine", "graph_node_us"), _SPREAD),
    "graph_fixed_us": FitParameter("us", "CUDA-graph replay fixed cost", 0.7, 1.0, 5000.0, ("engine", "graph_fixed_us"), _SPREAD),
    "eager_launch_us": FitParameter("us", "host launch cost per eager kernel", 0.4, 1.0, 50.0, ("engine", "eager_launch_us"), _SPREAD),
    "host_per_cycle_ms": FitParameter("ms", "host scheduling + bookkeeping per speculative cycle", 0.8, 0.01, 50.0,
                                      ("engine", "host_per_cycle_ms"), _SPREAD),
    "multi_token_extra_us_per_layer": FitParameter("us", "extra GPU time per layer of the multi-token path vs 1-token decode",
                                                   1.5, 0.01, 500.0, ("engine", "multi_token_extra_us_per_layer"), _SPREAD),
    "host_per_decode_step_ms": FitParameter("ms", "host scheduling per decode iteration", 0.8, 0.01, 50.0,
                                            ("engine", "host_per_decode_step_ms"), _SPREAD),
}
_PATHS = {n: fp.path for n, fp in PARAMETERS.items() if fp.path is not None}
#: the fitted all-reduce latencies: (path, link of the path's fallback chain: 0 its own implementation, 1 the next)
_AR_LINKS = {"allreduce_alpha_graph_us": ("graph", 0), "allreduce_alpha_eager_us": ("eager", 0),
             "allreduce_fallback_alpha_graph_us": ("graph", 1), "allreduce_fallback_alpha_eager_us": ("eager", 1)}
MULTI_TOKEN_PRIOR_US = 1.0  # prior when the data include 1-token and multi-token forwards (assumed)


@dataclass(frozen=True)
class Point:
    """A measured target forward over ``tokens`` new tokens per request taking ``ms``."""

    tokens: int
    ms: float
    source: str = "--point"
    batch: int | None = None  # requests in this forward (default: the scenario's batch)
    ctx: int | None = None  # context tokens per request (default: the scenario's)


MONOTONE_TOLERANCE = 0.05  # a forward over more tokens may measure up to 5 % faster (timing noise, kernel switches)
BOUND_TOLERANCE_LOG = 0.01  # within 1 % of a bound counts as on it


def unique_points(sc: Scenario, points: list[Point], field: str = "point") -> tuple[list[Point], int]:
    """The points with each forward (tokens, batch, context; unset batch and context are the scenario's) once, and
    how many repeats were dropped: a repeat with the same time is the same measurement (fitted once, so it neither
    weighs double nor counts as a second point to free a parameter with); one with another time is refused, naming
    both, as the fit cannot tell which one holds."""
    seen: dict[tuple, Point] = {}
    out = []
    for pt in points:
        key = (pt.tokens, sc.workload.batch if pt.batch is None else pt.batch,
               sc.workload.ctx if pt.ctx is None else pt.ctx)
        first = seen.get(key)
        if first is None:
            seen[key] = pt
            out.append(pt)
        elif first.ms != pt.ms:
            raise SpecsimError(field, f"{pt.tokens}={pt.ms:g}", f"contradicts {first.tokens}={first.ms:g}, the same forward "
                               f"(tokens {key[0]}, batch {key[1]}, ctx {key[2]}) measured twice; give one time per forward "
                               "(average repeated runs first)")
    return out, len(points) - len(out)


def check_monotone(points: list[Point]) -> None:
    """Refuse points whose time falls as the tokens per request grow (same batch and context) beyond noise.

    More tokens never take less work: such data contradict the physics (a swapped pair, another
    setup, or cached/short-circuited runs) and would make the fit meaningless.
    """
    groups: dict[tuple, list[Point]] = {}
    for pt in points:
        groups.setdefault((pt.batch, pt.ctx), []).append(pt)
    bad = []
    for grp in groups.values():  # each point against the slowest point of fewer tokens: one pass over the sorted group
        slowest = None  # of the points with fewer tokens than the current run of equal ones
        for _, run in itertools.groupby(sorted(grp, key=lambda q: q.tokens), key=lambda q: q.tokens):
            run = list(run)
            if slowest is not None:
                bad += [f"{b.tokens}={b.ms:g} < {slowest.tokens}={slowest.ms:g}" for b in run
                        if b.ms < slowest.ms * (1 - MONOTONE_TOLERANCE)]
            top = max(run, key=lambda q: q.ms)
            slowest = top if slowest is None or top.ms > slowest.ms else slowest
    if bad:
        raise SpecsimError("point", "; ".join(bad[:3]) + (" ..." if len(bad) > 3 else ""),
                           f"time falls as tokens grow by more than {MONOTONE_TOLERANCE:.0%} of noise: more tokens cannot "
                           "take less time on the same setup; check the pairs (tokens=ms)")


def at_bounds(values: dict[str, float]) -> dict[str, str]:
    """The parameters that ended on (within 1 % of) a bound of the parameter table, and which bound."""
    out = {}
    for n, v in values.items():
        fp = PARAMETERS.get(n)
        if fp is None or not v > 0:
            continue
        if math.log(v / fp.lower) < BOUND_TOLERANCE_LOG:
            out[n] = "lower"
        elif math.log(fp.upper / v) < BOUND_TOLERANCE_LOG:
            out[n] = "upper"
    return out


def parse_point(text: str) -> Point:
    """Parse ``K=MS`` (e.g. ``3=25.6``)."""
    m = re.fullmatch(r"\s*(-?\d+)\s*=\s*([^\s=]+?)\s*(?:ms)?\s*", text)
    try:
        k, ms = int(m.group(1)), float(m.group(2))
    except (AttributeError, ValueError):  # no K=MS shape, or an MS that is no number
        raise SpecsimError("point", text, "expected K=MS, e.g. --point 3=25.6") from None
    if k < 1:
        raise SpecsimError("point", text, "K (tokens per request) must be an integer >= 1")
    if not ms > 0 or not math.isfinite(ms):
        raise SpecsimError("point", text, "MS must be a finite, positive number of milliseconds")
    return Point(k, ms)


def _allreduce_alphas(sc: Scenario, path: str, sizes: list[float]) -> list[str]:
    """The all-reduce latencies messages of these sizes (bytes) speak to on a path: its own implementation's where a
    message stays within the first size limit (or no size is known), the next implementation's where one passes it
    (SGLang's custom two-shot); messages past the last limit (NCCL, bandwidth-bound) speak to neither."""
    ar = sc.parallel.allreduce
    q = allreduce_path_params(ar, sc.parallel.allreduce_eager or ar, sc.parallel.tp)
    lim0, lim1 = q[f"allreduce_max_bytes_{path}"], q[f"allreduce_fallback_max_bytes_{path}"]
    links = {0 if s <= lim0 else 1 if s <= lim1 else 2 for s in sizes}
    out = [f"allreduce_alpha_{path}_us"] if (0 in links or not sizes) else []
    return out + ([f"allreduce_fallback_alpha_{path}_us"] if 1 in links else [])


def free_parameters(sc: Scenario, n_verify: int, has_baseline: bool, has_cycles: bool,
                    mixes_paths: bool = False, points: list[Point] | None = None) -> list[str]:
    """Parameters this data can speak to, in order of physical relevance for the scenario."""
    e = sc.engine
    names = ["kernel_floor_us"]
    if e.small_kernel_floor_us is not None:  # the engine's small kernels have a floor of their own
        names.append("small_kernel_floor_us")
    h_bytes = sc.target.hidden * ACT_BYTES  # one token's all-reduce message
    if sc.parallel.tp > 1:
        sizes = [e.running_at_once(pt.batch or sc.workload.batch, True) * pt.tokens * h_bytes for pt in points or []]
        names += _allreduce_alphas(sc, "graph" if e.graph_verify else "eager", sizes)
    if sc.target.moe is not None:
        names.append("moe_mem_efficiency")
    names.append("mem_efficiency")
    if sc.workload.ctx * sc.workload.batch > 0:
        names.append("attention_mem_efficiency")
    names.append("graph_node_us" if e.graph_verify else "eager_launch_us")
    if has_baseline:
        names.append("host_per_decode_step_ms")
        if not e.graph_verify and sc.parallel.tp > 1:  # the decode step's all-reduces take the graph path
            decode = [e.running_at_once(sc.workload.batch, False) * h_bytes]
            names += [n for n in _allreduce_alphas(sc, "graph", decode) if n not in names]
    if has_cycles:
        names.append("host_per_cycle_ms")
    if mixes_paths:  # 1-token and multi-token forwards: the switch between the two paths is visible
        names.append("multi_token_extra_us_per_layer")
    return names


@dataclass
class CalibrationResult:
    scenario: Scenario
    names: list[str]
    values: dict[str, float]
    priors: dict[str, float]
    sd_log: dict[str, float]
    prior_sd_log: dict[str, float]
    cov_log: np.ndarray
    residuals: list[dict]
    warnings: list[str] = field(default_factory=list)

    def table_rows(self) -> list[list[object]]:
        rows = []
        for n in self.names:
            v, sd = self.values[n], self.sd_log[n]
            lo = max(v * math.exp(-Z90 * sd), PARAMETERS[n][3])
            hi = min(v * math.exp(Z90 * sd), PARAMETERS[n][4])
            side = at_bounds({n: v}).get(n)
            pinned = f"NO ({side} bound)" if side else "yes" if sd < PINNED_SD_RATIO * self.prior_sd_log[n] else "NO (prior)"
            rows.append([n, v, PARAMETERS[n][0], self.priors[n], f"{lo:.3g}..{hi:.3g}", pinned])
        return rows

    def to_dict(self) -> dict:
        return {
            "parameters": {
                n: {"value": self.values[n], "unit": PARAMETERS[n][0], "meaning": PARAMETERS[n][1], "prior": self.priors[n],
                    "sd_log": self.sd_log[n], "prior_sd_log": self.prior_sd_log[n],
                    "pinned": self.sd_log[n] < PINNED_SD_RATIO * self.prior_sd_log[n] and not at_bounds({n: self.values[n]}),
                    "at_bound": at_bounds({n: self.values[n]}).get(n)}
                for n in self.names
            },
            "cov_log": self.cov_log.tolist(),
            "points": self.residuals,
            "warnings": self.warnings,
        }


def _get(p: dict, name: str) -> float:
    return float(p[name])


def _model_values(p: dict, verify_pts, baseline_ms, cycles, per_set: tuple[str, ...] = (), sets: int = 1) -> np.ndarray:
    """Modeled ms of every measurement (verify points, the baseline step, cycles), in that order.

    With ``sets = k`` the parameters named in ``per_set`` are arrays of k values in ``p`` (k parameter sets,
    e.g. the columns of a finite-difference Jacobian) and the result is a (k, measurements) array from one
    flat evaluation per kind of measurement; without ``per_set``, one 1-D row."""
    assert sets == 1 or per_set, "several parameter sets need the names of the parameters that differ"

    def each(n: int) -> dict:  # p with every per-set parameter repeated for the n measurements of its set
        return {**p, **{k: np.repeat(p[k], n) for k in per_set}}

    cols = []
    if verify_pts:
        n = len(verify_pts)
        toks = np.array([pt.tokens for pt in verify_pts], dtype=float)
        bs = np.array([pt.batch or p["batch"] for pt in verify_pts], dtype=float)
        cs = np.array([p["ctx"] if pt.ctx is None else pt.ctx for pt in verify_pts], dtype=float)
        vb = verify_breakdown(each(n), num_draft_tokens=np.tile(toks, sets), batch=np.tile(bs, sets),
                              ctx=np.tile(cs, sets))["total"]
        cols.append(np.broadcast_to(vb, (sets * n,)).reshape(sets, n))
    if baseline_ms is not None:
        # the requests plain decode runs at once: the batch, the engine's cap, what its KV pool holds
        cols.append(np.broadcast_to(baseline_step_ms(running(p, "running_cap"))["total"], (sets,)).reshape(sets, 1))
    if cycles:
        cols.append(_cycle_values(p, cycles, sets, each))
    out = np.concatenate(cols, axis=1).astype(float) if cols else np.empty((sets, 0))
    return out if per_set else out[0]


def _cycle_values(p: dict, cycles: list[dict], sets: int, each) -> np.ndarray:
    """Modeled cycle ms of every measured cycle for each parameter set, (sets, cycles): one array evaluation
    per tree width (topk is a code-path switch, so chains and each topk run apart), whatever the number of
    cycles a log gives."""
    out = np.empty((sets, len(cycles)))
    by_topk: dict[float, list[int]] = {}
    for i, c in enumerate(cycles):
        by_topk.setdefault(float(c.get("topk") or 1), []).append(i)
    for topk, idx in by_topk.items():
        sel = [cycles[i] for i in idx]
        n = len(sel)
        steps = np.array([float(c["steps"]) for c in sel])
        q = each(n)
        # a benchmark's client batch runs at most the engine's speculative cap, and what its KV pool holds, at once
        batch = np.array([float(c.get("batch") or p["batch"]) for c in sel])
        q.update(steps=np.tile(steps, sets), topk=topk, batch=np.tile(batch, sets),
                 num_draft_tokens=np.tile([float(c.get("num_draft_tokens") or (c["steps"] + 1)) for c in sel], sets))
        q = running(q, "spec_running_cap")
        tau = np.tile([float(c["accept_length"]) for c in sel], sets)
        out[:, idx] = np.broadcast_to(cycle_ms(cycle_phases_ms(q, tau)), (sets * n,)).reshape(sets, n)
    return out


def _pct(x: float) -> str:
    """A signed percentage for a message: one decimal, three significant digits once it is huge (1e300 %)."""
    return f"{x:+.1f}%" if abs(x) < 1e5 else f"{x:+.3g}%"


def fit(
    sc: Scenario,
    points: list[Point],
    baseline_tok_s: float | None = None,
    cycles: list[dict] | None = None,
    names: list[str] | None = None,
    bootstrap: int = 0,
    progress: bool | None = None,
    fields: dict[str, str] | None = None,
    data_from: str | None = None,
) -> CalibrationResult:
    """Fit the scenario's physical parameters to verify points, a baseline and cycle times.

    ``fields`` names, for error lines, where each kind of measurement came from (``verify``, ``baseline``,
    ``cycle``: the caller's flag or dataset field; default ``point``, ``baseline_tok_s``, ``cycle``). ``data_from``
    says where the measurements came from (flags, files, a dataset); the calibrated scenario's description and its
    ``provenance.calibrated`` record name it beside the parameters that moved.

    The covariance comes from the Jacobian at the optimum; with ``bootstrap=N`` it comes instead
    from N refits to measurements redrawn within their 2 % noise and priors redrawn within their
    widths (a parametric bootstrap that also sees the bounds and the non-linearity), with a
    progress bar on stderr.
    """
    from scipy.optimize import least_squares

    cycles = cycles or []
    points, repeated = unique_points(sc, points, (fields or {}).get("verify", "point"))
    check_monotone(points)
    if not points and baseline_tok_s is None and not cycles:
        raise SpecsimError("point", None, "give at least one --point K=MS, --baseline-tok-s or a log with timings")
    p0 = scenario_params(sc)
    widths = {pt.tokens > 1 for pt in points}
    names = names or free_parameters(sc, len(points), baseline_tok_s is not None, bool(cycles),
                                     mixes_paths=len(widths) == 2 and len(points) >= 3, points=points)
    prior = {n: _get(p0, n) for n in names}
    for n in names:
        if prior[n] <= 0:
            prior[n] = MULTI_TOKEN_PRIOR_US if n == "multi_token_extra_us_per_layer" else PARAMETERS[n][3] * 2
    meas = [pt.ms for pt in points]
    base_ms = None
    if baseline_tok_s is not None:
        if not baseline_tok_s > 0:
            raise SpecsimError("baseline-tok-s", baseline_tok_s, "must be a positive tokens/s")
        base_ms = float(running(p0, "running_cap")["batch"]) / baseline_tok_s * 1e3  # per step of those running
        meas.append(base_ms)
    meas += [float(c["cycle_ms"]) for c in cycles]
    flag_of = {"verify": "point", "baseline": "baseline_tok_s", "cycle": "cycle", **(fields or {})}  # for error lines
    kinds = ["verify"] * len(points) + ["baseline"] * (base_ms is not None) + ["cycle"] * len(cycles)  # one per meas
    lo_ms, hi_ms = MEASURED_MS_RANGE
    for kind, ms, given in zip(kinds, meas, [pt.ms for pt in points] + [baseline_tok_s] * (base_ms is not None)
                               + [c["cycle_ms"] for c in cycles]):
        if not lo_ms <= ms <= hi_ms:  # the fit works in log time: zero, denormal or absurd times have no answer
            allowed = (f"a tokens/s that gives a decode step of {fmt_bound(lo_ms)} to {fmt_bound(hi_ms)} ms"
                       if kind == "baseline" else f"a time in {fmt_range(lo_ms, hi_ms)} ms")
            raise SpecsimError(flag_of[kind], given, f"allowed: {allowed}")
    meas_arr = np.array(meas)
    x0 = np.log([prior[n] for n in names])
    lo = np.log([PARAMETERS[n][3] for n in names])
    hi = np.log([PARAMETERS[n][4] for n in names])
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
    psig = np.array([PARAMETERS[n][2] for n in names])

    def with_x(x):
        q = dict(p0)
        for n, v in zip(names, np.exp(x)):
            q[n] = v
        return q

    def log_model(X):  # (k, n) log-parameters -> (k, measurements) log model ms, one flat evaluation
        q = dict(p0)
        for j, n in enumerate(names):
            q[n] = np.exp(X[:, j])
        return np.log(np.maximum(_model_values(q, points, base_ms, cycles, tuple(names), sets=len(X)), 1e-9))

    def make_resid(meas_v, centre):
        def resid(x):
            r_data = (log_model(x[None, :])[0] - np.log(meas_v)) / MEAS_REL_SIGMA
            return np.concatenate([r_data, (x - centre) / psig])
        return resid

    def jac(x):
        # forward differences of every parameter in one evaluation (relative step sqrt(eps), as scipy's '2-point'),
        # stepped back from an upper bound; the prior rows are the identity over the prior widths
        h = FD_STEP * np.maximum(1.0, np.abs(x))
        h = np.where(x + h > hi, -h, h)
        h = (x + h) - x  # the step as represented
        f = log_model(np.vstack([x, x + np.diag(h)]))
        return np.vstack([((f[1:] - f[0]) / h[:, None]).T / MEAS_REL_SIGMA, np.diag(1.0 / psig)])

    sol = least_squares(make_resid(meas_arr, x0), x0, jac=jac, bounds=(lo, hi), method="trf", x_scale=1.0)
    J = sol.jac
    try:
        cov = np.linalg.inv(J.T @ J)
    except np.linalg.LinAlgError:
        cov = np.linalg.pinv(J.T @ J)
    if bootstrap:
        if bootstrap > MAX_BOOTSTRAP:
            raise SpecsimError("bootstrap", bootstrap, f"allowed at most {MAX_BOOTSTRAP} resamples")
        if bootstrap < 10:
            raise SpecsimError("bootstrap", bootstrap, "use at least 10 resamples (or 0 for the Jacobian covariance)")
        import sys

        rng = np.random.default_rng(0)  # deterministic bands for the same inputs
        show = progress if progress is not None else True
        draws = []
        for i in range(bootstrap):
            m_b = meas_arr * np.exp(MEAS_REL_SIGMA * rng.standard_normal(meas_arr.shape))
            c_b = x0 + psig * rng.standard_normal(x0.shape)
            sb = least_squares(make_resid(m_b, c_b), sol.x, jac=jac, bounds=(lo, hi), method="trf", x_scale=1.0,
                               ftol=REFIT_TOL, xtol=REFIT_TOL, gtol=REFIT_TOL)
            draws.append(sb.x)
            if show:
                done = (i + 1) / bootstrap
                sys.stderr.write(f"\rbootstrap [{'#' * int(30 * done):<30}] {i + 1}/{bootstrap}")
                sys.stderr.flush()
        if show:
            sys.stderr.write("\n")
        cov = np.atleast_2d(np.cov(np.array(draws).T))
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    values = dict(zip(names, map(float, np.exp(sol.x))))
    fitted_p = with_x(sol.x)
    mv = _model_values(fitted_p, points, base_ms, cycles)
    labels = [f"verify {pt.tokens} tokens" for pt in points] + ["baseline decode step"] * (base_ms is not None)
    labels += [f"cycle steps={c['steps']} topk={c.get('topk') or 1} bs={c.get('batch')}" for c in cycles]
    residuals = [
        {"what": lab, "kind": k, "tokens": (points[i].tokens if i < len(points) else None), "ms": float(m),
         "model_ms": float(v), "error_pct": float(100 * (v / m - 1))}
        for i, (lab, k, m, v) in enumerate(zip(labels, kinds, meas_arr, mv))
    ]
    bound = at_bounds(values)
    warnings = [
        f"{n} ({PARAMETERS[n][1]}) is not pinned down by the data: it stays near its prior {prior[n]:.3g} {PARAMETERS[n][0]}"
        for n, s in zip(names, sd) if s >= PINNED_SD_RATIO * PARAMETERS[n][2] and n not in bound
    ]
    warnings += [
        f"{n} ({PARAMETERS[n].meaning}) ended on its {side} bound {values[n]:.3g} {PARAMETERS[n].unit}: the data push it "
        "past what is physical - check the units, the setup (model, GPU, TP, --graph/--eager) or missing physics"
        for n, side in bound.items()
    ]
    worst = max(residuals, key=lambda r: abs(r["error_pct"]), default=None)
    if worst is not None and abs(worst["error_pct"]) > MAX_RESIDUAL_PCT:
        raise SpecsimError(  # named by where the measurement came from
            flag_of[worst["kind"]],
            f"{worst['what']} = {worst['ms']:g} ms",
            f"the physics cannot reach it (best fit {worst['model_ms']:.3g} ms, {_pct(worst['error_pct'])}): "
            "check the units (milliseconds), the model, GPU, TP and --graph/--eager",
        )
    for r in residuals:
        if abs(r["error_pct"]) > 10:
            warnings.append(f"{r['what']}: model misses the measurement by {_pct(r['error_pct'])} (missing physics?)")
    if repeated:
        warnings.append(f"{repeated} measured point(s) given twice with the same time were fitted once")
    new_sc = apply_parameters(sc, values)
    result = CalibrationResult(
        scenario=new_sc, names=names, values=values, priors=prior, sd_log=dict(zip(names, map(float, sd))),
        prior_sd_log={n: PARAMETERS[n][2] for n in names}, cov_log=cov, residuals=residuals, warnings=warnings,
    )
    data = new_sc.model_dump()
    data["description"], data["provenance"]["calibrated"] = _calibrated_description(
        sc.description, points, base_ms is not None, cycles, data_from, prior, values)
    data["calibration"] = result.to_dict()
    data["calibration"]["points"] = [{"tokens": pt.tokens, "ms": pt.ms, "source": pt.source} for pt in points]
    data["calibration"]["residuals"] = residuals
    result.scenario = Scenario.model_validate(data)
    return result


MOVED_LOG = 0.005  # a fitted parameter more than 0.5 % from its prior is said to have moved
CALIBRATED_MARK = " (calibrated by specsim calibrate"


def _calibrated_description(before: str, points: list[Point], baseline: bool, cycles: list[dict], data_from: str | None,
                            prior: dict[str, float], values: dict[str, float]) -> tuple[str, dict]:
    """The calibrated scenario's description (the one it had, no longer "not calibrated", plus what it was fitted on
    and which parameters moved) and the ``provenance.calibrated`` record of the same."""
    what = []
    if points:
        toks = sorted({pt.tokens for pt in points})
        shown = ", ".join(map(str, toks[:8])) + (f", ... ({len(toks) - 8} more)" if len(toks) > 8 else "")
        what.append(f"{len(points)} verify point(s) at {shown} tokens")
    if baseline:
        what.append("a baseline tok/s")
    if cycles:
        what.append(f"{len(cycles)} logged cycle(s)")
    data = " + ".join(what) + (f" from {data_from}" if data_from else "")
    moved = {n: {"prior": prior[n], "fitted": v} for n, v in values.items()
             if prior.get(n, 0) > 0 and abs(math.log(v / prior[n])) > MOVED_LOG}
    moves = (", ".join(f"{n} {m['prior']:.4g} -> {m['fitted']:.4g}" for n, m in moved.items()) if moved
             else f"no parameter moved more than {100 * MOVED_LOG:g} % from its prior")
    from .build import PRESETS_MARK

    base = before.split(CALIBRATED_MARK, 1)[0].removesuffix(PRESETS_MARK)  # a recalibration replaces the last one's
    text = f"{base}{CALIBRATED_MARK} on {data}; moved: {moves})"
    if len(text) > 2000:  # a description is one readable line; the provenance record keeps everything
        text = text[:1996] + "...)"
    return text, {"by": "specsim calibrate", "data": data, "moved": moved}


def apply_parameters(sc: Scenario, values: dict[str, float]) -> Scenario:
    """A copy of the scenario with flat parameter values written back to their fields."""
    data = sc.model_dump()
    tp = sc.parallel.tp
    for n, v in values.items():
        if n in _PATHS:
            comp, key = _PATHS[n]
            data[comp][key] = v
            data[comp].setdefault("sources", {})[key] = "fitted by specsim calibrate"
        elif n in _AR_LINKS:
            path, link = _AR_LINKS[n]
            key = "allreduce" if path == "graph" else "allreduce_eager"
            if data["parallel"].get(key) is None:  # no eager implementation of its own: the graph path's, copied
                data["parallel"][key] = copy.deepcopy(data["parallel"]["allreduce"])
            ar = data["parallel"][key]
            for _ in range(link):
                ar = ar["fallback"]
            ar["alpha_us"] = {**ar["alpha_us"], tp: v}
            ar["sources"] = {**ar.get("sources", {}), "alpha_us": f"TP{tp} value fitted by specsim calibrate"}
    return Scenario.model_validate(data)


def verify_band(sc: Scenario, tokens: list[int], level: float = 0.9) -> tuple[list[float], list[float]] | None:
    """(low, high) of the verify curve from the calibration covariance (delta method, log space)."""
    cal = sc.calibration or {}
    params = cal.get("parameters")
    cov = cal.get("cov_log")
    if not params or cov is None:
        return None
    names = list(params)
    cov = np.asarray(cov, dtype=float)
    p = scenario_params(sc)
    unknown = [n for n in names if n not in PARAMETERS or n not in p]
    if unknown:
        raise SpecsimError("calibration.parameters", unknown[0], f"allowed: one of the {len(PARAMETERS)} fitted parameters, e.g. {', '.join(list(PARAMETERS)[:3])}")
    toks = np.asarray(tokens, dtype=float)
    base = np.broadcast_to(verify_breakdown(p, num_draft_tokens=toks)["total"], toks.shape)
    grads = []
    h = 1e-3
    for n in names:
        q = dict(p)
        q[n] = p[n] * math.exp(h)
        up = np.broadcast_to(verify_breakdown(q, num_draft_tokens=toks)["total"], toks.shape)
        grads.append((np.log(up) - np.log(base)) / h)
    G = np.array(grads).T  # (tokens, params)
    var = np.einsum("ij,jk,ik->i", G, cov, G)
    # model-form error: the RMS of the fit's log residuals where the data over-determine it
    res = [r for r in cal.get("residuals", []) if r.get("kind") == "verify"]
    dof = max(len(res) - 0, 1)
    model_var = sum(math.log1p(r["error_pct"] / 100) ** 2 for r in res) / dof if res else 0.0
    z = Z90 if abs(level - 0.9) < 1e-9 else _z(level)
    sd = np.sqrt(var + model_var + MEAS_REL_SIGMA**2)
    return (base * np.exp(-z * sd)).tolist(), (base * np.exp(z * sd)).tolist()


def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2))


ALLREDUCE_PATHS = {"custom": None, "nccl": "nccl-nvlink4"}  # custom: the GPU preset's own one-shot kernel


def base_scenario(
    model: str,
    gpu: str,
    tp: int,
    *,
    dtype: str | None = None,
    ctx: int | None = None,
    batch: int | None = None,
    moe_kernel: str | None = None,
    graph: bool | None = None,
    engine: str | None = None,
    engine_overrides: dict | None = None,
    eager_allreduce: str | None = None,
    name: str | None = None,
    allreduce: str | None = None,
) -> Scenario:
    """What calibration starts from: the builder's fresh deployment plus calibration's own switches.

    ``allreduce`` (``custom`` or ``nccl``) is the implementation the verify's all-reduces take:
    an eager verify cannot use a graph-captured custom all-reduce, so it defaults to NCCL there.
    """
    from ..io.presets import get_allreduce, scenario_from_dict
    from .build import fresh_scenario

    if allreduce is not None and allreduce not in ALLREDUCE_PATHS:
        raise SpecsimError("allreduce", allreduce, f"choose one of: {', '.join(ALLREDUCE_PATHS)}")
    sc = fresh_scenario(model, gpu, tp, engine, dtype=dtype, batch=batch, ctx=ctx, name=name or f"{model}-{gpu}-tp{tp}")
    eager = graph is False or (graph is None and not sc.engine.graph_verify)
    if allreduce is None and eager and sc.parallel.tp > 1 and not eager_allreduce:
        allreduce = "nccl"
    if allreduce == "nccl" and not eager_allreduce:
        eager_allreduce = ALLREDUCE_PATHS["nccl"]
    if moe_kernel is None and graph is None and not engine_overrides and not eager_allreduce and allreduce is None:
        return sc
    data = sc.model_dump()
    e = data["engine"]
    if moe_kernel is not None:
        mk = moe_kernel.replace("-", "_")
        if mk not in ("fused", "per_token"):
            raise SpecsimError("moe-kernel", moe_kernel, "choose one of: fused, per-token")
        e["moe_kernel"] = mk
    if graph is not None:
        e["graph_verify"] = graph
    e.update(engine_overrides or {})
    if eager_allreduce:
        data["parallel"]["allreduce_eager"] = get_allreduce(eager_allreduce).model_dump()
        if allreduce == "nccl" and not eager:  # a graph-replayed verify through NCCL
            data["parallel"]["allreduce"] = get_allreduce(eager_allreduce).model_dump()
    return scenario_from_dict(data, "scenario")


def load_dataset(path: str) -> dict:
    """A measured-points dataset (see calibration/README.md for the format)."""

    from ..io.checks import check_dataset
    from ..io.safe_read import loads_bounded, read_json_file

    if not str(path).strip():
        raise SpecsimError("dataset", path, "an empty name; give a dataset file or a built-in name")
    f = Path(path)
    if not f.exists() and not f.is_symlink():
        from ..io.presets import data_root

        cand = data_root("calibration").joinpath("datasets", f"{path}.json")
        if not cand.is_file():
            from ..io.packagedata import unknown_dataset

            raise unknown_dataset(path)
        d = loads_bounded(cand.read_text(encoding="utf-8"), "dataset", path)
    else:
        d = read_json_file(f, "dataset")
    return check_dataset(d, f.name)


def dataset_scenario(d: dict) -> Scenario:
    sc = base_scenario(
        d["model"], d["gpu"], int(d["tp"]), dtype=d.get("dtype"), ctx=d.get("ctx"), batch=d.get("batch"),
        moe_kernel=d.get("moe_kernel"), graph=d.get("graph"), engine=d.get("engine_preset", "sglang"),
        engine_overrides=d.get("engine"), eager_allreduce=d.get("eager_allreduce"), name=d.get("name"),
    )
    skew = dataset_routing_skew(d)
    if skew is None or sc.target.moe is None:  # (None: the model's prior)
        return sc
    from .build import build_scenario

    return build_scenario(sc, routing_skew=skew)


def dataset_routing_skew(d: dict) -> float | None:
    """The routers' skew while the dataset was measured (``target.moe.routing_skew``): its own ``routing_skew``
    field, else 0 for forwards that ``specsim measure`` timed (random weights route about uniformly; files written
    before the field existed), else None (real weights: the model's prior)."""
    if d.get("routing_skew") is not None:
        return d["routing_skew"]
    prov = d.get("provenance")
    hw = prov.get("hardware") if isinstance(prov, dict) else None
    tool = hw.get("tool") if isinstance(hw, dict) else None
    return 0.0 if isinstance(tool, str) and tool.startswith("specsim measure") else None


@dataclass
class Validation:
    """Errors over the held-out points (those not in the fit); over all points if none is held out."""

    dataset: str
    fit_tokens: list[int]
    rows: list[dict]
    mape_pct: float
    median_ape_pct: float
    max_ape_pct: float
    calibration: CalibrationResult
    held_out: int = 0
    mape_all_pct: float = 0.0
    eager_rows: list[dict] = field(default_factory=list)

    def eager_summary(self) -> dict | None:
        """MAPE and worst over the eager points held out (those at the dataset's own batch set the engine preset's
        host time per kernel, ``eager_dispatch_us``), or None without eager points."""
        held = [abs(r["error_pct"]) for r in self.eager_rows if not r["in_fit"]]
        if not held:
            return None
        return {"held_out_points": len(held), "mape_pct": float(np.mean(held)), "max_ape_pct": float(np.max(held))}

    def to_dict(self) -> dict:
        d = {"dataset": self.dataset, "fit_tokens": self.fit_tokens, "points": self.rows, "mape_pct": self.mape_pct,
             "median_ape_pct": self.median_ape_pct, "max_ape_pct": self.max_ape_pct, "held_out_points": self.held_out,
             "mape_all_pct": self.mape_all_pct, "fitted": self.calibration.to_dict()["parameters"]}
        if self.eager_rows:
            d["eager_points"] = self.eager_rows
            d["eager"] = self.eager_summary()
        return d


def validate(path: str, fit_tokens: list[int] | None = None) -> Validation:
    """Calibrate on a subset of a dataset's points and score the prediction of all of them.

    The fit takes the points with ``fit_tokens`` new tokens at the dataset's own batch and
    context (``batch``/``ctx`` at its top level: calibrated at batch 1, as a user would on their
    box); every other point - other widths, batches and contexts - is held out.
    """
    d = load_dataset(path)
    fit_tokens = fit_tokens or [3, 6]
    sc = dataset_scenario(d)
    name = Path(path).name
    pts, _ = unique_points(sc, _dataset_points(d["points"]), f"dataset {name}: points")  # each forward scored once
    eager_pts, _ = unique_points(sc, _dataset_points(d.get("eager_points") or []), f"dataset {name}: eager_points")
    b0, c0 = sc.workload.batch, sc.workload.ctx

    def at_fit_setup(pt: Point) -> bool:  # the dataset's own batch and context, where a user calibrates
        return (pt.batch or b0) == b0 and (pt.ctx if pt.ctx is not None else c0) == c0

    def in_fit(pt: Point) -> bool:
        return pt.tokens in fit_tokens and at_fit_setup(pt)

    chosen = [pt for pt in pts if in_fit(pt)]
    missing = sorted(set(fit_tokens) - {pt.tokens for pt in chosen})
    if chosen and missing:  # a count asked for but not in the data would silently fit on fewer points
        raise SpecsimError("fit", missing[0], f"no dataset point at batch {b0}, ctx {c0} has {missing[0]} tokens; "
                                              f"available: {sorted({pt.tokens for pt in pts if at_fit_setup(pt)})[:20]}")
    if not chosen:
        raise SpecsimError("fit", fit_tokens, f"no dataset point at batch {b0}, ctx {c0} has these token counts; "
                                              f"available: {sorted({pt.tokens for pt in pts})}")
    res = fit(sc, chosen, baseline_tok_s=d.get("baseline_tok_s"),
              fields={"verify": "dataset.points", "baseline": "dataset.baseline_tok_s"}, data_from=f"dataset {name}")
    rows = _scored_rows(scenario_params(res.scenario), pts, b0, c0, in_fit)
    eager_rows = []
    if eager_pts:  # the same forwards launched eagerly: the fitted numbers on the eager path, nothing refitted
        eager_sc = apply_parameters(dataset_scenario({**d, "graph": False}), res.values)
        # points the engine preset's host time per kernel was measured on are marked, not scored: only where the
        # preset's own source names this dataset's file (anyone else's eager forwards are all held out)
        fed_preset = _fed_eager_preset(path, d, sc)
        eager_rows = _scored_rows(scenario_params(eager_sc), eager_pts, b0, c0,
                                  at_fit_setup if fed_preset else (lambda pt: False))
        for r in eager_rows:
            r["graph"] = False
    ape_all = np.array([abs(r["error_pct"]) for r in rows])
    held = np.array([abs(r["error_pct"]) for r in rows if not r["in_fit"]])
    ape = held if held.size else ape_all
    return Validation(str(d.get("name", path)), fit_tokens, rows, float(ape.mean()), float(np.median(ape)), float(ape.max()),
                      res, held_out=int(held.size), mape_all_pct=float(ape_all.mean()), eager_rows=eager_rows)


def _fed_eager_preset(path: str, d: dict, sc: Scenario) -> bool:
    """Whether the engine preset's ``eager_dispatch_us`` was measured on this very dataset: the shipped file its
    source names (``measured: ... calibration/datasets/FILE``), the value not overridden by the dataset."""
    from ..io.presets import data_root

    src = sc.engine.sources.get("eager_dispatch_us", "")
    if not src.startswith("measured") or "eager_dispatch_us" in (d.get("engine") or {}):
        return False
    given = Path(path)
    name = given.name if given.suffix == ".json" else f"{given.name}.json"
    shipped = Path(str(data_root("calibration").joinpath("datasets", name)))
    if f"calibration/datasets/{name}" not in src or not shipped.is_file():
        return False
    if not given.exists():  # by name: the built-in dataset of that name
        return True
    import filecmp

    try:  # by path: the same bytes (a checkout's copy beside an installed package's)
        return filecmp.cmp(given, shipped, shallow=False)
    except OSError:
        return False


def _dataset_points(raw: list) -> list[Point]:
    """A loaded dataset's measured forwards (tokens, ms, optional batch and ctx) as points; ``load_dataset`` has
    checked each one (:func:`specsim.io.checks.check_dataset`)."""
    return [Point(int(x["tokens"]), float(x["ms"]), "dataset", None if x.get("batch") is None else int(x["batch"]),
                  None if x.get("ctx") is None else int(x["ctx"])) for x in raw]


def _scored_rows(p: dict, pts: list[Point], b0: int, c0: int, in_fit) -> list[dict]:
    """Each point's measured and predicted forward (one vectorised evaluation) and its error."""
    toks = np.array([pt.tokens for pt in pts], dtype=float)
    bs = np.array([pt.batch or b0 for pt in pts], dtype=float)
    cs = np.array([c0 if pt.ctx is None else pt.ctx for pt in pts], dtype=float)
    pred = np.broadcast_to(verify_breakdown(p, num_draft_tokens=toks, batch=bs, ctx=cs)["total"], toks.shape)
    return [{"tokens": pt.tokens, "batch": int(b), "ctx": int(c), "measured_ms": pt.ms, "predicted_ms": float(m),
             "error_pct": float(100 * (m / pt.ms - 1)), "in_fit": bool(in_fit(pt))}
            for pt, m, b, c in zip(pts, pred, bs, cs)]
