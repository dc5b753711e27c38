"""Closed forms of the speculative cycle (sympy), with the scenario's numbers substituted.

Symbols (all times in ms per cycle)::

    T_cycle(k) = T_fixed + k * t_step         k = steps (chain drafts per cycle)
    tok/s      = 1000 * B * tau / T_cycle     baseline tok/s = 1000 * B_b / T_d
    speedup    = tau * T_d / T_cycle          (B_b = B: both runs run the batch)

``B`` is the requests the speculative run runs at once and ``B_b`` the plain decode's: the batch, or
the engine's cap where smaller (SGLang runs 48 at once with speculation unless the launch says);
only where the caps differ does ``B / B_b`` stay in the speedup and break-even forms.

How the numbers are taken from the model (``specsim.predict``):

* ``T_cycle``, ``T_d``, ``tau``, phases and the verify breakdown: ``predict(scenario)``.
* ``t_step``: the secant ``predict(steps=k+1, accept=tau).cycle_ms - predict(k).cycle_ms`` at the
  *same* tau, so the host's per-committed-token term cancels; it holds one more verified token
  plus one more draft forward (and the slightly wider draft-extend). ``T_fixed = T_cycle - k t_step``
  is the cycle extrapolated to zero drafts (verify at zero width + host + accept + extend).
* ``h = dT_cycle/dtau``: host cost per committed token, from ``predict(accept=tau +- d)``.

The elasticities use the serial cycle ``T = sum of components`` (verify components + the other
phases). With the overlap scheduler on, host work hides behind the GPU and ``T = max(G, H)``
(G = GPU phases, H = raw host work); the sympy form then uses ``Max`` and the numbers follow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..physics.cost import COMPONENTS

OTHER_PHASES = ("draft", "accept", "draft_extend")  # GPU phases other than the verify forward
CYCLE_COMPONENTS = COMPONENTS + OTHER_PHASES + ("host",)


def _iid_sympy():
    import sympy as sp

    alpha, k, T_fixed, t_step = sp.symbols("alpha k T_fixed t_step", positive=True)
    tau_k = (1 - alpha ** (k + 1)) / (1 - alpha)
    rate = tau_k / (T_fixed + k * t_step)
    return (alpha, k, T_fixed, t_step), tau_k, rate, sp.diff(rate, k)


def iid_optimal_steps(alpha: float, t_fixed_ms: float, t_step_ms: float, max_steps: int = 64) -> dict:
    """Optimal chain length under i.i.d. acceptance ``alpha`` and a linear cycle cost.

    Returns ``continuous`` (root of d/dk [(1-alpha^(k+1)) / ((1-alpha)(T_fixed + k t_step))] = 0, 0 if
    the rate falls from k = 0), ``discrete`` (first k where the marginal acceptance alpha^(k+1) stops
    exceeding tau(k) t_step / T_cycle(k)) and ``brute_force`` (argmax over integer k in 1..max_steps).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")
    tf, ts = float(t_fixed_ms), float(t_step_ms)
    k = np.arange(0, max_steps + 1)
    tau = (1 - alpha ** (k + 1)) / (1 - alpha)
    cyc = tf + k * ts
    brute = int(np.argmax((tau / cyc)[1:]) + 1)
    discrete = max_steps
    for kk in range(1, max_steps):
        if not alpha ** (kk + 1) > tau[kk] * ts / cyc[kk]:
            discrete = kk
            break

    # d/dk of the rate has the sign of g(k) = -alpha^(k+1) ln(alpha) (T_fixed + k t_step) - t_step (1 - alpha^(k+1))
    def g(x: float) -> float:
        a = alpha ** (x + 1)
        return -a * math.log(alpha) * (tf + x * ts) - ts * (1 - a)

    if ts <= 0:
        cont = math.inf
    elif g(0.0) <= 0:
        cont = 0.0
    else:
        hi = 1.0
        while g(hi) > 0 and hi < 1e6:
            hi *= 2
        if g(hi) > 0:
            cont = math.inf
        else:  # g > 0 below the single root, < 0 above it
            from ..physics.roots import brentq

            cont = float(brentq(g, 0.0, hi, xtol=1e-12))
    return {"continuous": cont, "discrete": discrete, "brute_force": brute}


def _cycle_time(c: dict[str, float], overlap: bool, host_raw_ms: float) -> float:
    """Cycle time from components: serial sum, or max(GPU, raw host) under the overlap scheduler."""
    gpu = sum(c[k] for k in COMPONENTS + OTHER_PHASES)
    if overlap:
        return max(gpu, host_raw_ms)
    return gpu + c["host"]


def _numbers(sc) -> dict:
    """Everything numeric the closed forms need, from ``specsim.predict`` (see module doc)."""
    from .predict import predict

    pred = predict(sc)
    k, tau = pred.steps, pred.accept_length
    # chains re-derive draft_tokens = steps + 1; trees keep their verify width (one more draft level)
    width = {} if pred.topk == 1 else {"draft_tokens": pred.num_draft_tokens}
    if k < 64:
        lo, hi = pred, predict(sc, steps=k + 1, accept=tau, **width)
    else:  # no steps+1: backward secant (tau clipped to the shorter chain's ceiling)
        lo, hi = predict(sc, steps=k - 1, accept=min(tau, float(k)), **width), pred
    t_step = hi.cycle_ms - lo.cycle_ms
    # host cost per committed token: cycle slope in tau at fixed steps
    d = min(0.25, (k + 1 - tau) / 2) if tau + 0.01 < k + 1 else -min(0.25, (tau - 1) / 2)
    h = (predict(sc, accept=tau + d).cycle_ms - pred.cycle_ms) / d if abs(d) > 1e-9 else 0.0
    tau_next = predict(sc, steps=k + 1, **width).accept_length if k < 64 else math.nan
    comps = {**pred.verify_breakdown_ms, **{p: pred.phases_ms[p] for p in OTHER_PHASES + ("host",)}}
    overlap = bool(sc.engine.overlap_scheduler)
    gpu = sum(comps[c] for c in COMPONENTS + OTHER_PHASES)
    host_raw = comps["host"] + gpu if overlap and comps["host"] > 0 else (0.0 if overlap else comps["host"])
    return {
        "pred": pred, "steps": k, "tau": tau, "batch": pred.running_requests,
        "batch_baseline": pred.baseline_running_requests, "T_cycle_ms": pred.cycle_ms,
        "T_d_ms": pred.baseline_step_ms, "t_step_ms": t_step, "T_fixed_ms": pred.cycle_ms - k * t_step,
        "t_step_verify_ms": hi.verify_ms - lo.verify_ms,
        "t_step_draft_ms": hi.phases_ms["draft"] - lo.phases_ms["draft"], "host_per_token_ms": h,
        "tau_next": tau_next, "components": comps, "overlap": overlap, "host_raw_ms": host_raw,
    }


def _fd_elasticities(num: dict, scale: float = 1.01) -> dict[str, float]:
    """d ln tok/s / d ln c by scaling each component by ``scale`` (tau: through specsim.predict)."""
    from .predict import predict

    comps, overlap, host_raw = num["components"], num["overlap"], num["host_raw_ms"]
    t0 = _cycle_time(comps, overlap, host_raw)
    out = {}
    for c in CYCLE_COMPONENTS:
        scaled = dict(comps)
        scaled[c] *= scale
        h = host_raw * scale if (overlap and c == "host") else host_raw
        out[c] = -math.log(_cycle_time(scaled, overlap, h) / t0) / math.log(scale)
    tau, k, pred = num["tau"], num["steps"], num["pred"]
    f = scale if tau * scale <= k + 1 else 1.0 / scale
    p2 = predict(num["scenario"], accept=tau * f)
    out["tau"] = math.log(p2.tok_s / pred.tok_s) / math.log(f)
    return out


@dataclass
class Explanation:
    """Symbolic cycle model (sympy objects in ``expressions``) and the scenario's numbers."""

    scenario: str
    steps: int
    symbols: dict[str, Any]
    expressions: dict[str, Any]
    values: dict[str, float]
    elasticities: dict[str, float]
    elasticities_finite_difference: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # predict's warnings for the same deployment

    def to_dict(self) -> dict:
        """Numbers only (JSON-safe: non-finite values become null)."""

        def num(x: float) -> float | None:
            return float(x) if math.isfinite(float(x)) else None

        return {"kind": "modeled", "scenario": self.scenario, "steps": self.steps,
                "values": {k: num(v) for k, v in self.values.items()},
                "elasticities": {k: num(v) for k, v in self.elasticities.items()},
                "elasticities_finite_difference": {k: num(v) for k, v in self.elasticities_finite_difference.items()},
                "warnings": self.warnings}

    def render(self, fmt: str = "markdown") -> str:
        return _render(self, fmt)

    def __repr__(self) -> str:
        return _render(self, "text")

    def _repr_markdown_(self) -> str:
        return _render(self, "markdown")


def verify_eager_wait_ms(sc) -> float:
    """The verify forward's launch-queue wait (ms): what an eager share adds while the host issues kernels slower than
    the GPU runs them (the ``eager_launch_wait`` row of ``verify --breakdown``; 0 for a replayed graph)."""
    from .predict import operator_table

    t = operator_table(int(sc.speculation.num_draft_tokens), sc)
    return sum(r["ms"] for r in t.rows if r["name"] == "eager_launch_wait")


QUEUE_NOTE_SHARE = 0.005  # the launch-queue wait is said beside the elasticities past this share of the cycle


def queue_note(v: dict) -> str | None:
    """A line under the elasticities where the verify's launch-queue wait is held fixed in them (an eager forward)."""
    w = v.get("verify_eager_launch_wait_ms", 0.0)
    if not w > QUEUE_NOTE_SHARE * v["T_cycle_ms"]:
        return None
    return (f"note: the verify runs eagerly: 'graph replay / kernel launch' holds {w:.3f} ms of launch-queue wait (the "
            f"host issuing kernels while the GPU runs them); the elasticities hold that wait fixed, but it grows back as "
            f"the GPU side shrinks, so a GPU component's elasticity is an upper bound (the nearer zero, the closer the "
            f"host's issue time is to the GPU's)")


def closed_forms(scenario=None, **overrides) -> Explanation:
    """Break-even accept length, optimal-steps condition and elasticities for a scenario."""
    import sympy as sp

    from ..physics.acceptance import constant_rate_from_tau
    from .predict import build_scenario

    sc = build_scenario(scenario, **overrides)
    num = _numbers(sc)
    num["scenario"] = sc

    T_fixed, t_step, k, T_d, tau, B, a_next, h = sp.symbols("T_fixed t_step k T_d tau B a_next h", positive=True)
    T_cycle = T_fixed + k * t_step
    tok_s = 1000 * B * tau / T_cycle
    B_b = sp.Symbol("B_b", positive=True) if num["batch_baseline"] != num["batch"] else B  # the runs' own counts
    speedup = sp.simplify(tok_s / (1000 * B_b / T_d))
    tau_star = sp.solve(sp.Eq(speedup, 1), tau)[0]
    threshold = sp.simplify((tau * t_step) / T_cycle)
    # tau(k+1)/T(k+1) > tau(k)/T(k)  <=>  a_next * T(k) - tau * t_step > 0
    gain = sp.factor(sp.together((tau + a_next) / (T_cycle + t_step) - tau / T_cycle))
    (alpha, k_c, Tf_c, ts_c), tau_iid, rate_iid, drate = _iid_sympy()

    # elasticities: tok/s = 1000 B tau / T, T = sum of components (or Max(GPU, H) with overlap)
    csyms = {c: sp.Symbol(f"c_{c}", nonnegative=True) for c in CYCLE_COMPONENTS}
    H = sp.Symbol("H_host_raw", nonnegative=True)
    gpu = sum(csyms[c] for c in COMPONENTS + OTHER_PHASES)
    T_sum = sp.Max(gpu, H) if num["overlap"] else gpu + csyms["host"]
    tok_c = 1000 * B * tau / T_sum
    elast_exprs = {c: sp.diff(sp.log(tok_c), csyms[c]) * csyms[c] for c in CYCLE_COMPONENTS}
    if num["overlap"]:
        elast_exprs["host"] = sp.diff(sp.log(tok_c), H) * H
    c_gen, T_rest, T_tau = sp.symbols("c T_rest T_cycle", positive=True)
    elast_generic = sp.diff(sp.log(1000 * B * tau / (c_gen + T_rest)), c_gen) * c_gen
    elast_tau = 1 - tau * h / T_tau  # d ln(tau / T(tau)) / d ln tau with dT/dtau = h

    subs_c = {csyms[c]: num["components"][c] for c in CYCLE_COMPONENTS}
    subs_c[H] = num["host_raw_ms"]
    elast = {c: float(e.subs(subs_c).subs({B: num["batch"], tau: num["tau"]})) for c, e in elast_exprs.items()}
    elast["tau"] = float(elast_tau.subs({tau: num["tau"], h: num["host_per_token_ms"], T_tau: num["T_cycle_ms"]}))

    vals_sub = {T_fixed: num["T_fixed_ms"], t_step: num["t_step_ms"], k: num["steps"], T_d: num["T_d_ms"],
                tau: num["tau"], B: num["batch"], B_b: num["batch_baseline"]}
    alpha_v = float(constant_rate_from_tau(num["tau"], num["steps"])[0])
    alpha_v = min(max(alpha_v, 1e-6), 1 - 1e-9)
    opt = iid_optimal_steps(alpha_v, num["T_fixed_ms"], num["t_step_ms"])
    T_cyc, Td, tau_v, hh = num["T_cycle_ms"], num["T_d_ms"], num["tau"], num["host_per_token_ms"]
    ratio = num["batch"] / num["batch_baseline"]  # speculative over plain running requests (1 unless a cap binds)
    values = {
        "verify_eager_launch_wait_ms": verify_eager_wait_ms(sc),
        "steps": float(num["steps"]), "accept_length": tau_v, "batch": float(num["batch"]),
        "batch_baseline": float(num["batch_baseline"]),
        "T_cycle_ms": T_cyc, "T_d_ms": Td, "T_fixed_ms": num["T_fixed_ms"], "t_step_ms": num["t_step_ms"],
        "t_step_verify_ms": num["t_step_verify_ms"], "t_step_draft_ms": num["t_step_draft_ms"],
        "host_per_token_ms": hh, "tok_s": num["pred"].tok_s, "baseline_tok_s": num["pred"].baseline_tok_s,
        "speedup": float(speedup.subs(vals_sub)),
        "break_even_accept_length": float(tau_star.subs(vals_sub)),
        "break_even_accept_length_self_consistent": ((T_cyc - hh * tau_v) / (Td * ratio - hh) if Td * ratio > hh
                                                      else math.inf),
        "accept_length_next_step": num["tau_next"],
        "marginal_accept_next_step": num["tau_next"] - tau_v,
        "marginal_threshold": float(threshold.subs(vals_sub)),
        "alpha_iid": alpha_v,
        "optimal_steps_iid_continuous": opt["continuous"],
        "optimal_steps_iid_discrete": float(opt["discrete"]),
    }
    exprs = {
        "T_cycle": T_cycle, "tok_s": tok_s, "speedup": speedup, "break_even_accept_length": tau_star,
        "marginal_threshold": threshold, "step_gain": gain,
        "step_condition": sp.StrictGreaterThan(a_next, threshold),
        "tau_iid": tau_iid, "tok_rate_iid": rate_iid, "iid_optimum_condition": sp.Eq(drate, 0),
        "elasticity_component": elast_generic, "elasticity_tau": elast_tau,
        **{f"elasticity_{c}": e for c, e in elast_exprs.items()},
    }
    symbols = {str(s): s for s in (T_fixed, t_step, k, T_d, tau, B, a_next, h, alpha, k_c, Tf_c, ts_c, H, T_tau,
                                   c_gen, T_rest)}
    symbols.update({str(s): s for s in csyms.values()})
    if B_b is not B:
        symbols["B_b"] = B_b
    return Explanation(scenario=sc.name, steps=num["steps"], symbols=symbols, expressions=exprs, values=values,
                       elasticities=elast, elasticities_finite_difference=_fd_elasticities(num),
                       warnings=list(num["pred"].warnings))


def elasticities(scenario=None, **overrides) -> dict[str, float]:
    """d ln(tok/s) / d ln(x) for each cycle component and tau, by scaling each by 1.01 (finite difference).

    Keys: verify components (``launch`` ... ``compute``), phases ``draft``, ``accept``, ``draft_extend``,
    ``host``, and ``tau``. The cycle components sum to about -1 (they partition the cycle).
    """
    from .predict import build_scenario

    sc = build_scenario(scenario, **overrides)
    num = _numbers(sc)
    num["scenario"] = sc
    return _fd_elasticities(num)


def explain(scenario=None, fmt: str = "markdown", **overrides) -> str:
    """Each closed form with the scenario's numbers substituted (``markdown``, ``latex`` or ``text``)."""
    from ..errors import SpecsimError

    if fmt not in ("markdown", "latex", "text"):
        raise SpecsimError("format", fmt, "format must be one of: markdown, latex, text")
    out = closed_forms(scenario, **overrides).render(fmt)
    if fmt == "text":
        from ..output.render import fit_width

        out = fit_width(out)
    return out


_LABELS = {
    "launch": "graph replay / kernel launch", "kernel_fixed": "per-kernel fixed GPU time", "activations": "activation traffic (norms, rotary, act.)",
    "allreduce": "TP all-reduce", "weights": "weights / memory", "attention": "attention (KV)",
    "compute": "compute-bound GEMM", "draft": "draft phase", "accept": "accept/sample phase",
    "draft_extend": "draft-extend phase", "host": "host (exposed)", "tau": "accept length tau",
}


_TEXT_LHS = {
    "T_{cycle}": "T_cycle", "\\tau^*": "tau*", "a_{k+1}^{min}": "a_min(k+1)", "\\epsilon_c": "eps_c",
    "\\frac{d}{dk}\\frac{\\tau(k)}{T_{cycle}(k)}": "d/dk [tau(k) / T_cycle(k)]",
}


def _render(e: Explanation, fmt: str) -> str:
    import sympy as sp

    from ..output.render import warning_lines

    v = e.values
    x = e.expressions
    k, tau = int(v["steps"]), v["accept_length"]
    items: list[tuple[str, str, str, str]] = []  # title, symbolic (latex), symbolic (text), substituted (text)

    def add(title: str, lhs: str, expr: Any, sub: str) -> None:
        lhs_text = _TEXT_LHS.get(lhs, lhs)
        items.append((title, f"{lhs} = {sp.latex(expr)}", f"{lhs_text} = {sp.sstr(expr)}", sub))

    add("Cycle time", "T_{cycle}", x["T_cycle"],
        f"T_cycle = {v['T_fixed_ms']:.3f} + {k} x {v['t_step_ms']:.3f} = {v['T_cycle_ms']:.3f} ms "
        f"(t_step = {v['t_step_verify_ms']:.3f} verify + {v['t_step_draft_ms']:.3f} draft + rest)")
    runs = "" if v["batch"] == v["batch_baseline"] else f" x {v['batch']:g}/{v['batch_baseline']:g}"
    runs_inv = "" if not runs else f" x {v['batch_baseline']:g}/{v['batch']:g}"
    add("Speedup", "S", x["speedup"],
        f"S = {tau:.3f} x {v['T_d_ms']:.3f} / {v['T_cycle_ms']:.3f}{runs} = {v['speedup']:.3f} "
        f"({v['tok_s']:.1f} vs {v['baseline_tok_s']:.1f} tok/s)")
    add("Break-even accept length (speedup > 1)", "\\tau^*", x["break_even_accept_length"],
        f"tau* = {v['T_cycle_ms']:.3f} / {v['T_d_ms']:.3f}{runs_inv} = {v['break_even_accept_length']:.3f} "
        f"(scenario tau = {tau:.3f}; with host {v['host_per_token_ms'] * 1e3:.1f} us/token "
        f"self-consistent tau* = {v['break_even_accept_length_self_consistent']:.3f})")
    a, thr = v["marginal_accept_next_step"], v["marginal_threshold"]
    a = 0.0 if abs(a) < 1e-9 else a  # a tree already saturated at its width: no "-0.000"
    verdict = "pays" if a > thr else "does not pay"
    add("One more step pays iff a(k+1) > tau(k) t_step / T_cycle(k)", "a_{k+1}^{min}", x["marginal_threshold"],
        f"a({k + 1}) = {a:.3f} vs threshold {tau:.3f} x {v['t_step_ms']:.3f} / {v['T_cycle_ms']:.3f} = {thr:.3f}: "
        f"step {k + 1} {verdict}")
    add("i.i.d. optimum: d/dk rate = 0", "\\frac{d}{dk}\\frac{\\tau(k)}{T_{cycle}(k)}",
        x["iid_optimum_condition"].lhs,
        f"alpha = {v['alpha_iid']:.3f} (same tau at k = {k}): k* = {v['optimal_steps_iid_continuous']:.2f} "
        f"continuous, {int(v['optimal_steps_iid_discrete'])} as an integer")
    T = v["T_cycle_ms"]
    lines_el = [(c, s, e.elasticities_finite_difference.get(c, math.nan)) for c, s in e.elasticities.items()]
    add("Elasticity of tok/s to a cycle component c (T_rest: the rest of the cycle)", "\\epsilon_c",
        x["elasticity_component"], f"-c / T_cycle with T_cycle = {T:.3f} ms; w.r.t. tau: "
        f"1 - tau h / T_cycle = {e.elasticities['tau']:.4f}")

    if fmt == "text":
        out = [f"{e.scenario}: closed forms of the speculative cycle (modeled, steps={k})", ""]
        for title, _, sym, sub in items:
            out += [title, f"  {sym}", f"  {sub}", ""]
        out.append("elasticities d ln(tok/s) / d ln(x)     sympy  finite-diff")
        out += [f"  {_LABELS[c]:<34} {s:+.4f}  {f:+.4f}" for c, s, f in lines_el]
        out += [f"  {note}"] if (note := queue_note(v)) else []
        return "\n".join(out) + warning_lines(e.warnings)
    if fmt == "latex":
        out = [f"% {e.scenario}: closed forms (modeled, steps={k})", "\\begin{align*}"]
        out += [f"{sym.replace(' = ', ' &= ', 1)} \\\\  % {sub}" for _, sym, _, sub in items]
        out += ["\\epsilon_{\\mathrm{" + c.replace("_", "\\_") + f"}}}} &= {s:+.4f} \\\\" for c, s, _ in lines_el]
        out.append("\\end{align*}")
        out += [f"% {note}"] if (note := queue_note(v)) else []
        return "\n".join(out) + warning_lines(e.warnings, "latex")
    out = [f"### {e.scenario}: closed forms of the speculative cycle (modeled, steps={k})", ""]
    for title, sym, _, sub in items:
        out += [f"**{title}**", "", f"$${sym}$$", "", f"`{sub}`", ""]
    out += ["| x | elasticity (sympy) | finite difference |", "|---|---:|---:|"]
    out += [f"| {_LABELS[c]} | {s:+.4f} | {f:+.4f} |" for c, s, f in lines_el]
    out += ["", f"*{note}*"] if (note := queue_note(v)) else []
    return "\n".join(out) + warning_lines(e.warnings, "markdown")
