"""Plotly figures of predictions, sweeps and what-ifs (each returns a ``plotly.graph_objects.Figure``).

The figures are plain ``go.Figure`` objects, so a notebook can restyle them
(``fig.update_layout(template="plotly_dark")``) or write them out. Everything here is
deterministic: no random ids, no timestamps; the same inputs give the same figure JSON.

The data behind the sweep figures is computed by :func:`steps_sweep` and :func:`verify_curve`,
which the report also renders as tables.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import plotly.graph_objects as go

from .render import COMPONENT_LABELS

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
PHASE_LABELS = {
    "draft": "draft (head forwards)",
    "verify": "target verify forward",
    "accept": "accept / sample",
    "draft_extend": "draft-extend",
    "host": "host (exposed)",
}
ELASTICITY_LABELS = {
    **COMPONENT_LABELS,
    "draft": "draft phase",
    "accept": "accept / sample phase",
    "draft_extend": "draft-extend phase",
    "host": "host (exposed)",
    "accept_length": "accept length (tau)",
    "tau": "accept length (tau)",
}
MEASURED_STYLE = dict(symbol="diamond-open", size=13, color="#111111", line=dict(color="#111111", width=2.5))
_LAYOUT = dict(
    template="plotly_white",
    margin=dict(l=70, r=30, t=60, b=150),
    legend=dict(orientation="h", yanchor="top", y=-0.2, xanchor="left", x=0.0),
    font=dict(size=13),
)

_SPEC_TOK_S = re.compile(r"^spec_tok_s_at_(\d+)_steps?$")


def _layout(fig: go.Figure, title: str, **kw) -> go.Figure:
    fig.update_layout(**{**_LAYOUT, **kw})
    fig.update_layout(title=dict(text=title, x=0.0, xanchor="left", y=0.98, yanchor="top"))
    return fig


def _measured(scenario_or_pred) -> dict:
    m = getattr(scenario_or_pred, "measured", None)
    if m is None:
        prov = getattr(scenario_or_pred, "provenance", {}) or {}
        m = prov.get("measured") or {}
    return dict(m)


# ---------------------------------------------------------------------------------------------
# cycle breakdown


def cycle_breakdown_figure(pred) -> go.Figure:
    """Stacked horizontal bars: the speculative cycle by phase, the verify forward by component.

    A third bar shows the plain decode step it competes with (same ms axis). ``pred`` is a
    :class:`specsim.Prediction`.
    """
    rows = ["speculative cycle<br>(by phase)", "verify forward<br>(by component)", "plain decode step<br>(baseline)"]
    fig = go.Figure()
    for i, (k, v) in enumerate(pred.phases_ms.items()):
        fig.add_trace(go.Bar(
            name=PHASE_LABELS.get(k, k), y=[rows[0]], x=[v], orientation="h", legendgroup="phases",
            legendgrouptitle_text="cycle phases" if i == 0 else None, marker_color=PALETTE[i % len(PALETTE)],
            hovertemplate=f"{PHASE_LABELS.get(k, k)}: %{{x:.3f}} ms "
                          f"({100.0 * v / pred.cycle_ms:.1f}% of cycle)<extra></extra>",
        ))
    comp_colors = ("#4c78a8", "#72b7b2", "#e45756", "#f58518", "#54a24b", "#b279a2", "#9d755d", "#bab0ac")
    for i, (k, v) in enumerate(pred.verify_breakdown_ms.items()):
        label = COMPONENT_LABELS.get(k, k)
        fig.add_trace(go.Bar(
            name=label, y=[rows[1]], x=[v], orientation="h", legendgroup="components",
            legendgrouptitle_text="verify components" if i == 0 else None,
            marker_color=comp_colors[i % len(comp_colors)],
            hovertemplate=f"{label}: %{{x:.3f}} ms ({100.0 * v / pred.verify_ms:.1f}% of verify)<extra></extra>",
        ))
    fig.add_trace(go.Bar(
        name="plain decode step", y=[rows[2]], x=[pred.baseline_step_ms], orientation="h", marker_color="#999999",
        hovertemplate="plain decode step: %{x:.3f} ms<extra></extra>",
    ))
    for y, total in zip(rows, (pred.cycle_ms, pred.verify_ms, pred.baseline_step_ms), strict=True):
        fig.add_annotation(x=total, y=y, text=f" {total:.2f} ms", showarrow=False, xanchor="left", font=dict(size=12))
    _layout(
        fig,
        f"Where one cycle goes (modeled): {pred.cycle_ms:.2f} ms for {pred.accept_length:.2f} tokens/request "
        f"-> {pred.tok_s:.1f} tok/s",
        barmode="stack", xaxis_title="ms (modeled)", height=520,
        legend=dict(orientation="v", x=1.02, xanchor="left", y=1.0, yanchor="top", groupclick="toggleitem",
                    traceorder="grouped", font=dict(size=12)),
        margin=dict(l=150, r=30, t=60, b=60),
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(range=[0, 1.15 * max(pred.cycle_ms, pred.baseline_step_ms)])
    return fig


# ---------------------------------------------------------------------------------------------
# tok/s versus draft steps


@dataclass
class StepsCurve:
    """tok/s versus steps for one acceptance profile."""

    label: str
    accept_length: float  # tau at the scenario's own steps
    steps: list[int]
    tok_s: list[float]
    accept: list[float]  # tau at each swept steps value
    scenario_profile: bool = False

    @property
    def best_index(self) -> int:
        return max(range(len(self.tok_s)), key=lambda i: (self.tok_s[i], -i))

    @property
    def best_steps(self) -> int:
        return self.steps[self.best_index]

    @property
    def best_tok_s(self) -> float:
        return self.tok_s[self.best_index]


@dataclass
class StepsSweep:
    """Modeled tok/s versus draft steps for several acceptance levels (plus recorded points)."""

    scenario: str
    base_steps: int
    steps: list[int]
    baseline_tok_s: float
    curves: list[StepsCurve]
    measured: list[dict] = field(default_factory=list)  # {steps, tok_s, label}

    def rows(self) -> tuple[list[str], list[list[object]]]:
        headers = ["steps"] + [f"tok/s, {c.label}" for c in self.curves]
        rows: list[list[object]] = []
        for i, s in enumerate(self.steps):
            cells: list[object] = [s]
            for c in self.curves:
                mark = " (best)" if i == c.best_index else ""
                cells.append(f"{c.tok_s[i]:,.1f}{mark}")
            rows.append(cells)
        return headers, rows


def default_accept_lengths(tau: float, steps: int) -> list[float]:
    """Accept lengths around the scenario's tau, within (1, steps+1], for the steps sweep."""
    hi = steps + 1.0
    out: list[float] = []
    for d in (-0.4, 0.4, 0.8):
        t = round(min(max(tau + d, 1.05), hi), 2)
        if abs(t - tau) > 0.05 and all(abs(t - o) > 0.05 for o in out):
            out.append(t)
    return sorted(out)


def steps_sweep(
    scenario=None, accept_lengths: Iterable[float] | None = None, steps: Iterable[int] = range(1, 11)
) -> StepsSweep:
    """Modeled tok/s versus steps for the scenario's acceptance and other accept lengths.

    The first curve is always the scenario's own acceptance profile. Each further accept length
    is tau *at the scenario's own steps*; the scenario's profile is rescaled to it (its decay with
    depth kept) and the implied per-position rates carry the curve to other steps. With
    ``accept_lengths=None`` a few levels around the scenario's tau are added; pass ``[]`` for the
    scenario's curve alone.
    """
    from ..analysis.predict import build_scenario, expected_accept_length, rates_for
    from ..analysis.sweep import sweep

    sc = build_scenario(scenario)
    st = [int(s) for s in steps]
    if not st:
        from ..errors import SpecsimError

        raise SpecsimError("steps", list(st), "give at least one steps value")
    smax = max(st)
    base_steps = sc.speculation.steps
    tau0 = expected_accept_length(sc)
    own = _rates(rates_for(sc, smax))
    profiles = [(f"scenario profile (tau={tau0:.2f} @ {base_steps} steps)", tau0, own, True)]
    if accept_lengths is None:
        levels = default_accept_lengths(tau0, base_steps)
    else:
        levels = [float(t) for t in accept_lengths]
    for t in levels:
        sc_t = build_scenario(sc, accept=t)
        profiles.append((f"tau={t:.2f} @ {base_steps} steps", t, _rates(rates_for(sc_t, smax)), False))
    # one vectorised sweep: every profile x every step count (rows are step-major, profile-minor)
    res = sweep(sc, steps=st, accept_rates=[rates for _, _, rates, _ in profiles], progress=False)
    n_prof = len(profiles)
    tok = res.columns["tok_s"].reshape(len(st), n_prof)
    acc_len = res.columns["accept_length"].reshape(len(st), n_prof)
    baseline = float(res.columns["baseline_tok_s"][0])
    curves = []
    for j, (label, tau, _rates_j, own) in enumerate(profiles):
        curves.append(StepsCurve(label=label, accept_length=float(tau), steps=st, tok_s=[float(x) for x in tok[:, j]],
                                 accept=[float(x) for x in acc_len[:, j]], scenario_profile=own))
    measured = []
    for k, v in _measured(sc).items():
        m = _SPEC_TOK_S.match(str(k))
        if m and isinstance(v, (int, float)):
            measured.append({"steps": int(m.group(1)), "tok_s": float(v), "label": k})
    return StepsSweep(scenario=sc.name, base_steps=base_steps, steps=st, baseline_tok_s=baseline, curves=curves,
                      measured=measured)


def _rates(r) -> list[float]:
    return [float(min(max(x, 0.0), 1.0)) for x in r]


def steps_figure(scenario=None, accept_lengths: Iterable[float] | None = None, steps: Iterable[int] = range(1, 11),
                 *, sweep: StepsSweep | None = None) -> go.Figure:
    """tok/s versus draft steps, one curve per accept length, best point starred, baseline dashed.

    Pass a precomputed ``sweep`` (from :func:`steps_sweep`) to skip the computation.
    """
    sw = sweep if sweep is not None else steps_sweep(scenario, accept_lengths, steps)
    fig = go.Figure()
    for i, c in enumerate(sw.curves):
        color = PALETTE[i % len(PALETTE)]
        fig.add_trace(go.Scatter(
            x=c.steps, y=c.tok_s, mode="lines+markers", name=c.label, legendgroup=f"c{i}",
            line=dict(color=color, width=3 if c.scenario_profile else 2), marker=dict(size=6),
            customdata=[[a] for a in c.accept],
            hovertemplate="steps %{x}: %{y:.1f} tok/s (tau %{customdata[0]:.2f})<extra>" + c.label + "</extra>",
        ))
        fig.add_trace(go.Scatter(
            x=[c.best_steps], y=[c.best_tok_s], mode="markers", name=f"best: {c.best_steps} steps",
            legendgroup=f"c{i}", showlegend=False,
            marker=dict(symbol="star", size=17, color=color, line=dict(color="#000", width=1)),
            hovertemplate=f"best for {c.label}: %{{x}} steps, %{{y:.1f}} tok/s<extra></extra>",
        ))
    if sw.curves:
        fig.add_trace(go.Scatter(  # legend key for the stars
            x=[None], y=[None], mode="markers", name="best steps of each curve",
            marker=dict(symbol="star", size=14, color="#ffffff", line=dict(color="#000", width=1)),
        ))
    if sw.steps:
        fig.add_trace(go.Scatter(
            x=[min(sw.steps), max(sw.steps)], y=[sw.baseline_tok_s] * 2, mode="lines",
            name=f"no speculation ({sw.baseline_tok_s:.1f} tok/s)", line=dict(color="#555555", dash="dash"),
            hovertemplate="baseline: %{y:.1f} tok/s<extra></extra>",
        ))
    if sw.measured:
        fig.add_trace(go.Scatter(
            x=[m["steps"] for m in sw.measured], y=[m["tok_s"] for m in sw.measured], mode="markers",
            name="measured (recorded)", marker=MEASURED_STYLE,
            hovertemplate="measured: %{x} steps, %{y:.1f} tok/s<extra></extra>",
        ))
    _layout(fig, f"Speculative tok/s versus draft steps (modeled, {sw.scenario})",
            xaxis_title="draft steps (chain depth)", yaxis_title="tok/s (all requests)", height=560)
    fig.update_xaxes(tickmode="array", tickvals=sw.steps, dtick=1)
    return fig


# ---------------------------------------------------------------------------------------------
# verify forward versus draft tokens


def verify_curve(scenario=None, tokens: Iterable[int] = range(1, 65)):
    """:func:`specsim.verify_ms` over ``tokens``, plus points recorded in the scenario's provenance.

    Calibration points (``VerifyCurve.measured``) come first; ``provenance['verify_points']``
    entries not already present are appended with ``"recorded": True``.
    """
    from ..analysis.predict import build_scenario, verify_ms

    sc = build_scenario(scenario)
    toks = [int(t) for t in tokens]
    try:
        curve = verify_ms(toks, sc)
    except ImportError:  # calibration band support not installed: model curve without the band
        curve = verify_ms(toks, sc.model_copy(update={"calibration": None}))
        pts = (sc.calibration or {}).get("points") or []
        curve.measured = [dict(x) for x in pts]  # type: ignore[union-attr]
    seen = {(m.get("tokens"), m.get("ms")) for m in curve.measured}
    for pt in (sc.provenance or {}).get("verify_points") or []:  # type: ignore[union-attr]
        if isinstance(pt, Mapping) and (pt.get("tokens"), pt.get("ms")) not in seen:
            curve.measured.append({**dict(pt), "recorded": True})
    return curve


def verify_figure(scenario=None, tokens: Iterable[int] = range(1, 65), *, curve=None,
                  current_tokens: int | None = None) -> go.Figure:
    """Target verify forward (ms) versus draft tokens per request: model line, band, measured points.

    Pass a precomputed ``curve`` (a :class:`specsim.VerifyCurve`) to skip the computation;
    ``current_tokens`` marks the scenario's verify width (found from the scenario otherwise).
    """
    from ..analysis.predict import build_scenario

    if curve is None:
        sc = build_scenario(scenario)
        vc = verify_curve(sc, tokens)
        if current_tokens is None:
            current_tokens = sc.speculation.num_draft_tokens
    else:
        vc = curve
    fig = go.Figure()
    if vc.verify_ms_low is not None and vc.verify_ms_high is not None:
        fig.add_trace(go.Scatter(
            x=list(vc.tokens) + list(vc.tokens)[::-1], y=list(vc.verify_ms_high) + list(vc.verify_ms_low)[::-1],
            fill="toself", fillcolor="rgba(31,119,180,0.18)", line=dict(width=0), name="90% band (calibration)",
            hoverinfo="skip",
        ))
    fig.add_trace(go.Scatter(
        x=vc.tokens, y=vc.verify_ms, mode="lines", name="verify forward (modeled)",
        line=dict(color=PALETTE[0], width=3),
        hovertemplate="%{x} tokens: %{y:.2f} ms<extra>modeled</extra>",
    ))
    for i, (k, vals) in enumerate(vc.breakdown_ms.items()):
        fig.add_trace(go.Scatter(
            x=vc.tokens, y=vals, mode="lines", name=COMPONENT_LABELS.get(k, k), visible="legendonly",
            line=dict(color=PALETTE[(i + 1) % len(PALETTE)], dash="dot"),
            hovertemplate="%{x} tokens: %{y:.3f} ms<extra>" + COMPONENT_LABELS.get(k, k) + "</extra>",
        ))
    pts = [m for m in vc.measured if m.get("tokens") is not None and m.get("ms") is not None]
    if pts:
        fig.add_trace(go.Scatter(
            x=[m["tokens"] for m in pts], y=[m["ms"] for m in pts], mode="markers", name="measured",
            marker=MEASURED_STYLE, text=[str(m.get("derived") or m.get("source") or "") for m in pts],
            hovertemplate="measured %{x} tokens: %{y:.2f} ms<br>%{text}<extra></extra>",
        ))
    if current_tokens is not None and vc.tokens and min(vc.tokens) <= current_tokens <= max(vc.tokens):
        fig.add_vline(x=current_tokens, line=dict(color="#888888", dash="dot"),
                      annotation_text=f"scenario: {current_tokens} tokens", annotation_position="top right")
    _layout(fig, f"Target verify forward versus draft tokens per request ({vc.scenario})",
            xaxis_title="draft tokens verified per request", yaxis_title="verify forward (ms)", height=560)
    return fig


# ---------------------------------------------------------------------------------------------
# training what-if


def training_figure(whatif) -> go.Figure:
    """Accept length (left axis, with band) and tok/s (right axis) versus training samples, log x.

    ``whatif`` is a ``specsim.training.TrainingWhatIf``: ``.curve`` holds lists ``samples``,
    ``tau``, ``tau_low``, ``tau_high``, ``tok_s``; the payback fields are annotated.
    """
    c = whatif.curve
    x = list(c["samples"])
    fig = go.Figure()
    lo, hi = c.get("tau_low"), c.get("tau_high")
    if lo is not None and hi is not None:
        fig.add_trace(go.Scatter(
            x=x + x[::-1], y=list(hi) + list(lo)[::-1], fill="toself", fillcolor="rgba(44,160,44,0.18)",
            line=dict(width=0), name="accept length band", hoverinfo="skip",
        ))
    fig.add_trace(go.Scatter(x=x, y=list(c["tau"]), mode="lines", name="accept length (tau)",
                             line=dict(color=PALETTE[2], width=3),
                             hovertemplate="%{x:.3s} samples: tau %{y:.3f}<extra></extra>"))
    if c.get("tok_s") is not None:
        fig.add_trace(go.Scatter(x=x, y=list(c["tok_s"]), mode="lines", name="tok/s (right axis)", yaxis="y2",
                                 line=dict(color=PALETTE[1], width=2, dash="dash"),
                                 hovertemplate="%{x:.3s} samples: %{y:.1f} tok/s<extra></extra>"))
    now = _first_attr(whatif, ("samples_now", "current_samples", "samples"))
    target = _first_attr(whatif, ("target_samples", "samples_target"))
    tau_now, tau_target = _first_attr(whatif, ("tau_now",)), _first_attr(whatif, ("tau_target",))
    if now is not None and tau_now is not None:
        fig.add_trace(go.Scatter(x=[now], y=[tau_now], mode="markers", name=f"now ({now:,.0f} samples): tau {tau_now:.2f}",
                                 marker=dict(symbol="circle", size=12, color="#111111")))
    if target is not None and tau_target is not None:
        fig.add_trace(go.Scatter(x=[target], y=[tau_target], mode="markers",
                                 name=f"target ({target:,.0f} samples): tau {tau_target:.2f}",
                                 marker=dict(symbol="star", size=16, color=PALETTE[2],
                                             line=dict(color="#000", width=1))))
    fig.add_annotation(text=payback_text(whatif), xref="paper", yref="paper", x=0.01, y=0.98, xanchor="left",
                       yanchor="top", showarrow=False, align="left", bgcolor="rgba(255,255,255,0.85)",
                       bordercolor="#999999", borderwidth=1, font=dict(size=12))
    _layout(fig, "Draft-head training what-if: more samples -> accept length -> tok/s (modeled)",
            xaxis=dict(type="log", title="training samples"), yaxis=dict(title="accept length (tokens/cycle)"),
            yaxis2=dict(title="tok/s", overlaying="y", side="right", showgrid=False), height=540,
            margin=dict(l=70, r=70, t=60, b=140))
    return fig


def payback_text(whatif) -> str:
    """One-line summary of the training investment and its payback."""
    parts = []
    tn, tt = getattr(whatif, "tau_now", None), getattr(whatif, "tau_target", None)
    if tn is not None and tt is not None:
        parts.append(f"tau {tn:.2f} -> {tt:.2f}")
    keys = ("gpu_hours_invested", "gpu_hours_saved_per_day", "payback_days")
    inv, saved, days = (getattr(whatif, k, None) for k in keys)
    if inv is not None:
        parts.append(f"{inv:,.0f} GPU-h invested")
    if saved is not None:
        parts.append(f"{saved:,.1f} GPU-h saved/day")
    if days is not None:
        parts.append("payback: never" if days != days or days == float("inf") else f"payback: {days:,.1f} days")
    return "<br>".join(parts)


def _first_attr(obj, names: Sequence[str]):
    for n in names:
        v = getattr(obj, n, None)
        if isinstance(v, (int, float)):
            return float(v)
    return None


# ---------------------------------------------------------------------------------------------
# sensitivity


def tornado_figure(elasticities: Mapping[str, float], title: str | None = None) -> go.Figure:
    """Horizontal bars of elasticities (d ln tok/s / d ln component), largest magnitude on top.

    A value of -0.3 means: make that component 10% faster (-10%) and tok/s rises ~3%.
    """
    items = sorted(elasticities.items(), key=lambda kv: (-abs(float(kv[1])), kv[0]))
    labels = [ELASTICITY_LABELS.get(k, k) for k, _ in items]
    vals = [float(v) for _, v in items]
    colors = ["#d62728" if v < 0 else "#2ca02c" for v in vals]
    fig = go.Figure(go.Bar(
        x=vals, y=labels, orientation="h", marker_color=colors, text=[f"{v:+.3f}" for v in vals],
        textposition="outside", cliponaxis=False, name="elasticity",
        hovertemplate="%{y}: %{x:+.3f}<br>10% less of it -> %{customdata:+.1f}% tok/s<extra></extra>",
        customdata=[-10.0 * v for v in vals],
    ))
    m = max([abs(v) for v in vals] + [0.05])
    _layout(fig, title or "Sensitivity: d ln(tok/s) / d ln(component) (modeled)",
            xaxis=dict(title="elasticity of tok/s", range=[-1.3 * m, 1.3 * m], zeroline=True, zerolinecolor="#444"),
            height=max(320, 60 + 34 * len(vals)), showlegend=False, margin=dict(l=200, r=40, t=60, b=60))
    fig.update_yaxes(autorange="reversed")
    return fig
