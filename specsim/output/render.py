"""Plain-text, Markdown and HTML tables for results (no heavy imports)."""

from __future__ import annotations

import html
from collections.abc import Sequence

COMPONENT_LABELS = {
    "launch": "graph replay / kernel launch",
    "kernel_fixed": "per-kernel fixed GPU time",
    "activations": "activation traffic (norms, rotary, activations)",
    "allreduce": "TP all-reduce / gather",
    "weights": "weights / memory",
    "attention": "attention (KV cache)",
    "compute": "compute-bound GEMM",
}


#: Text output fits a terminal of this many columns (long cells of the last column wrap).
MAX_WIDTH = 100


def table_text(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "",
               max_width: int = MAX_WIDTH) -> str:
    """Aligned plain-text table; the last column wraps so lines stay within ``max_width``."""
    import textwrap

    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    n = len(headers)
    widths = [max(len(r[i]) for r in cells) for i in range(n)]
    room = max_width - sum(widths[:-1]) - 2 * (n - 1)
    wrap_last = n > 1 and widths[-1] > room and room >= 20
    if wrap_last:
        widths[-1] = room
    line = "  ".join("-" * w for w in widths)
    out = [fit_width(printable(title), max_width)] if title else []  # one line: a name from a file cannot break it
    for i, r in enumerate(cells):
        parts = textwrap.wrap(r[-1], room) if wrap_last and len(r[-1]) > room else [r[-1]]
        parts = parts or [""]
        for k, last in enumerate(parts):
            row = (r[:-1] if k == 0 else [""] * (n - 1)) + [last]
            text = "  ".join(c.ljust(w) if (j == 0 or (wrap_last and j == n - 1)) else c.rjust(w)
                             for j, (c, w) in enumerate(zip(row, widths)))
            out.append(text.rstrip())
        if i == 0:
            out.append(line)
    return "\n".join(out)


def fit_width(text: str, width: int = MAX_WIDTH) -> str:
    """Wrap every line longer than ``width`` (titles, warnings, formulas), continuation indented."""
    import textwrap

    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        lead = len(line) - len(line.lstrip())
        out.extend(textwrap.wrap(line, width, subsequent_indent=" " * (lead + 2), break_on_hyphens=False,
                                 break_long_words=True) or [""])
    return "\n".join(out)


def printable(text: str) -> str:
    """``text`` with every character a terminal or a Markdown table would act on (newlines, NUL, escape sequences,
    bidi overrides: not ``str.isprintable``) written as its Python escape: names from user files stay one cell."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _md_cell(c: object) -> object:
    if isinstance(c, str):
        return printable(c).replace("|", "\\|")
    return c


def table_markdown(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """The one Markdown table: numeric columns right-aligned, text left-aligned, cells escaped."""
    import re

    def numeric(c: object) -> bool:
        if isinstance(c, (int, float)):
            return True
        return isinstance(c, str) and bool(re.fullmatch(r"[-+]?[\d,.]+%?( \(best\))?", c))

    cols = range(len(headers))
    right = [i > 0 and bool(rows) and all(numeric(r[i]) or r[i] in ("—", "") for r in rows) for i in cols]
    out = ["| " + " | ".join(str(_md_cell(h)) for h in headers) + " |",
           "|" + "|".join("---:" if right[i] else "---" for i in cols) + "|"]
    out += ["| " + " | ".join(str(_md_cell(_fmt(c))) for c in r) + " |" for r in rows]
    return "\n".join(out)


def table_html(headers: Sequence[str], rows: Sequence[Sequence[object]], caption: str = "") -> str:
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class='specsim'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(x: object) -> str:
    """One number format everywhere: integers as integers, 3 significant decimals below 10,
    1 decimal below 100,000, thousands separators above."""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        if x != x:
            return "n/a"
        if x in (float("inf"), float("-inf")):
            return "inf" if x > 0 else "-inf"
        return f"{x:,.3f}" if abs(x) < 10 else f"{x:,.1f}" if abs(x) < 1e5 else f"{x:,.0f}"
    return printable(str(x))


def pct(x: float) -> str:
    """Percentages always with one decimal (85.7, 0.9, -4.2)."""
    return "n/a" if x != x else f"{x:,.1f}"


def _prediction_tables(p) -> list[tuple[str, list[str], list[list[object]]]]:
    head = [
        ["speculative tok/s (modeled)", p.tok_s],
        ["baseline tok/s (modeled)", p.baseline_tok_s],
        ["speedup", p.speedup],
        ["accept length (tokens/cycle)", p.accept_length],
        ["cycle time (ms)", p.cycle_ms],
        ["verify forward (ms)", p.verify_ms],
        ["baseline decode step (ms)", p.baseline_step_ms],
    ]
    if p.running_requests is not None and (p.running_requests, p.baseline_running_requests) != (p.batch, p.batch):
        head += [["requests running at once, speculative", p.running_requests],
                 ["requests running at once, baseline", p.baseline_running_requests]]
    phases = [[k, v, pct(100.0 * v / p.cycle_ms)] for k, v in p.phases_ms.items()]
    comps = [[COMPONENT_LABELS.get(k, k), v, pct(100.0 * v / p.verify_ms)] for k, v in p.verify_breakdown_ms.items()]
    tables = [
        (
            f"{p.scenario}: {p.model} on {p.tp}x {p.gpu}, steps={p.steps} topk={p.topk} "
            f"draft_tokens={p.num_draft_tokens} batch={p.batch} ctx={p.ctx}",
            ["quantity", "value"],
            head,
        ),
        ("cycle phases", ["phase", "ms", "%"], phases),
        ("verify forward by component", ["component", "ms", "%"], comps),
    ]
    if p.measured:
        tables.append(("measured (recorded in the scenario, not modeled)", ["measurement", "value"],
                       [[k, v] for k, v in p.measured.items()]))
    return tables


def json_safe(obj):
    """A result as strict JSON takes it: NaN/inf -> null (so jq and browsers read it), numpy scalars -> Python
    numbers, tuples -> lists, keys -> strings."""
    import math

    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        return json_safe(obj.item())
    return obj


def warning_lines(warnings, fmt: str = "text") -> str:
    """The warnings a result carries (memory fit, the engine's cap, extrapolations, notes), one line each after it:
    ``warning: ...`` (text), ``> **warning:** ...`` (Markdown), ``% warning: ...`` (LaTeX). predict, verify and
    explain all print them this way."""
    ws = [" ".join(str(w).split()) for w in warnings or ()]
    if fmt == "markdown":
        return "".join(f"\n\n> **warning:** {w}" for w in ws)
    return "".join(f"\n{'% ' if fmt == 'latex' else ''}warning: {w}" for w in ws)


def prediction_text(p) -> str:
    out = "\n\n".join(table_text(h, r, t) for t, h, r in _prediction_tables(p))
    return fit_width(out + warning_lines(getattr(p, "warnings", [])))


def prediction_markdown(p) -> str:
    out = "\n\n".join(f"**{t}**\n\n" + table_markdown(h, r) for t, h, r in _prediction_tables(p))
    return out + warning_lines(getattr(p, "warnings", []), "markdown")


def prediction_html(p) -> str:
    return "".join(table_html(h, r, t) for t, h, r in _prediction_tables(p))


def _verify_rows(v) -> tuple[list[str], list[list[object]]]:
    headers = ["tokens", "verify ms (modeled)"]
    if v.verify_ms_low is not None:
        headers += ["90% low", "90% high"]
    rows = []
    for i, t in enumerate(v.tokens):
        r: list[object] = [t, v.verify_ms[i]]
        if v.verify_ms_low is not None:
            r += [v.verify_ms_low[i], v.verify_ms_high[i]]
        rows.append(r)
    return headers, rows


def verify_text(v) -> str:
    h, r = _verify_rows(v)
    out = table_text(h, r, f"{v.scenario}: target verify forward (modeled)")
    if v.measured:
        out += "\n\n" + table_text(["tokens", "measured ms"], [[m.get("tokens"), m.get("ms")] for m in v.measured], "measured points")
    return fit_width(out + warning_lines(getattr(v, "warnings", [])))


def verify_markdown(v) -> str:
    h, r = _verify_rows(v)
    return table_markdown(h, r) + warning_lines(getattr(v, "warnings", []), "markdown")


def verify_html(v) -> str:
    h, r = _verify_rows(v)
    return table_html(h, r, f"{v.scenario}: target verify forward")


# ---- sweeps -------------------------------------------------------------------------------------

_SWEEP_HEAD = {"steps": "steps", "topk": "topk", "draft_tokens": "draft tok", "accept_length": "accept",
               "tp": "tp", "batch": "batch", "ctx": "ctx", "gpu": "gpu", "allreduce_scale": "ar scale",
               "routing_locality": "rho", "fits_memory": "fits HBM", "tok_s": "tok/s", "speedup": "speedup", "cycle_ms": "cycle ms",
               "verify_ms": "verify ms", "baseline_fits_memory": "baseline fits", "routing_skew": "c"}
_SWEEP_RESULTS = ("tok_s", "speedup", "cycle_ms", "verify_ms")
_SWEEP_FLAGS = ("fits_memory", "baseline_fits_memory")  # yes / no in the tables; shown only where one is false


def _best_row(res) -> dict:
    b = res.best
    return b() if callable(b) else b


def _sweep_parts(res, top: int):
    """Ranked rows, with the configuration columns that vary; constant ones go into the header."""
    ranked = res.ranked(top)
    best = _best_row(res)
    keys = [k for k in _SWEEP_HEAD if k not in _SWEEP_RESULTS]
    varying = [k for k in keys if len({str(r[k]) for r in ranked}) > 1 or k in ("steps",)]
    def cell(c: str, v):
        return ("yes" if v else "no") if c in _SWEEP_FLAGS else v

    fixed = {k: cell(k, best[k]) for k in keys if k not in varying and k != "accept_length"
             and not (k in _SWEEP_FLAGS and best.get(k, True))  # "fits" goes without saying
             and not (k == "routing_locality" and best.get(k, 1.0) == 1.0)  # so does independent routing
             and k != "routing_skew"}  # the router's own c, unless swept
    cols = varying + [k for k in _SWEEP_RESULTS]
    if "accept_length" not in cols:
        cols.insert(len(varying), "accept_length")
    rows = [[cell(c, r[c]) for c in cols] for r in ranked]
    return best, fixed, cols, rows


def _best_line(res, best: dict) -> str:
    return (f"best of {res.n:,} configurations ({res.scenario}, modeled): steps={best['steps']} "
            f"topk={best['topk']} draft tokens={best['draft_tokens']} tp={best['tp']} batch={best['batch']} "
            f"gpu={best['gpu']} -> {_fmt(float(best['tok_s']))} tok/s, speedup {best['speedup']:.3f}x")


def sweep_text(res, top: int = 15) -> str:
    """Best configuration and the ``top`` ranked rows, within 100 columns."""
    import textwrap

    best, fixed, cols, rows = _sweep_parts(res, top)
    head = textwrap.fill(_best_line(res, best), MAX_WIDTH)
    same = ", ".join(f"{_SWEEP_HEAD[k]} {v}" for k, v in fixed.items())
    title = f"ranked (top {min(top, res.n)} of {res.n:,})" + (f"; all rows: {same}" if same else "")
    notes = "".join(f"\nnote: {n}" for n in getattr(res, "notes", []))
    return fit_width(head + "\n\n" + table_text([_SWEEP_HEAD[c] for c in cols], rows, title) + notes)


def sweep_markdown(res, top: int = 15) -> str:
    best, fixed, cols, rows = _sweep_parts(res, top)
    same = ", ".join(f"{_SWEEP_HEAD[k]} {v}" for k, v in fixed.items())
    line = _best_line(res, best)
    return (f"**B{line[1:]}**\n\n" + (f"All rows: {same}.\n\n" if same else "")
            + table_markdown([_SWEEP_HEAD[c] for c in cols], rows))


# ---- scenarios ----------------------------------------------------------------------------------

def scenario_rows(sc) -> list[list[object]]:
    """The inputs of a scenario as (field, value) rows."""
    rows: list[list[object]] = [
        ["scenario", sc.name], ["description", sc.description],
        ["GPU", f"{sc.gpu.name}: {sc.gpu.hbm_bytes_per_s / 1e12:.2f} TB/s, "
                f"{sc.gpu.peak_flops['bf16'] / 1e12:.0f} TFLOP/s bf16"],
        ["TP", sc.parallel.tp],
        ["all-reduce (graph)", f"{sc.parallel.allreduce.name}, alpha {sc.parallel.allreduce.alpha_at(sc.parallel.tp):.1f} us"],
    ]
    if sc.parallel.allreduce_eager:
        ae = sc.parallel.allreduce_eager
        rows.append(["all-reduce (eager)", f"{ae.name}, alpha {ae.alpha_at(sc.parallel.tp):.1f} us"])
    t, d, e = sc.target, sc.draft, sc.engine
    moe = f", MoE {t.moe.num_experts}x top-{t.moe.experts_per_token}" if t.moe else ", dense"
    trained = (f"; trained on {d.training_samples:,.0f} samples" if d.training_samples else "; training samples unknown")
    if d.training_data:
        trained += f" ({d.training_data})"
    acc = sc.acceptance
    if acc.rates is not None:
        acc_text = "rates " + ", ".join(f"{r:.3f}" for r in acc.rates)
    elif acc.pmf is not None:
        acc_text = "PMF " + ", ".join(f"{r:.3f}" for r in acc.pmf)
    else:
        acc_text = f"accept length {acc.accept_length:.3f}"
    if acc.source:
        acc_text += f" ({acc.source})"
    rows += [
        ["target", f"{t.name}: {t.num_layers} layers, hidden {t.hidden}, {t.attention.kind.upper()}{moe}"],
        ["draft", f"{d.name}: hidden {d.hidden}, vocab {d.draft_vocab}{trained}"],
        ["engine", f"{e.name}; graphs decode={e.graph_decode} verify={e.graph_verify} draft={e.graph_draft} "
                   f"extend={e.graph_draft_extend}; overlap={e.overlap_scheduler}"],
        ["speculation", f"steps={sc.speculation.steps} topk={sc.speculation.topk} "
                        f"draft_tokens={sc.speculation.num_draft_tokens}"],
        ["acceptance", acc_text],
        ["workload", f"batch={sc.workload.batch} ctx={sc.workload.ctx}"],
        ["calibrated", "yes (fitted parameters in 'calibration'/'provenance')" if sc.calibration or
         sc.provenance.get("fitted_parameters") else "no (presets only)"],
    ]
    return rows


def scenario_text(sc) -> str:
    """Readable summary of a scenario's inputs with their sources, within 100 columns."""
    out = [table_text(["field", "value"], scenario_rows(sc))]
    srcs = [[f"{comp}.{k}", v] for comp in ("gpu", "target", "draft", "engine") for k, v in getattr(sc, comp).sources.items()]
    if srcs:
        out.append(table_text(["number", "source"], srcs, "sources"))
    tail = [f"assumption: {a}" for a in sc.provenance.get("assumptions", []) or []]
    tail += [f"note: {n}" for n in sc.notes]
    import textwrap

    if tail:
        out.append("\n".join(textwrap.fill(x, MAX_WIDTH, subsequent_indent="  ") for x in tail))
    return "\n\n".join(out)


# ---- ingest -------------------------------------------------------------------------------------

_INGEST_HEAD = {"source": "source", "steps": "steps", "topk": "topk", "num_draft_tokens": "draft tok", "batch": "batch",
                "n": "n", "baseline": "base", "accept_length_mean": "accept", "tok_s_mean": "tok/s",
                "tok_s_per_req_mean": "tok/s/req", "cycle_ms_mean": "cycle ms", "cycle_ms_median": "median ms",
                "per_position_rates": "per-position rates"}


def ingest_summary_text(summary: list[dict]) -> str:
    """The ingest summary (one row per source/configuration) within 100 columns: short headers,
    the median column only where it differs from the mean, and empty columns left out."""
    if not summary:
        return ""
    keys = list(summary[0].keys())
    keys = [k for k in keys if any(r.get(k) not in (None, "", [], ()) for r in summary)]
    if "cycle_ms_median" in keys and all(r.get("cycle_ms_median") == r.get("cycle_ms_mean") for r in summary):
        keys.remove("cycle_ms_median")

    def cell(r, k):
        v = r.get(k)
        if v is None:
            return ""
        if k == "baseline":
            return "yes" if v else ""
        if isinstance(v, (list, tuple)):
            return ", ".join(f"{x:.2f}" for x in v)
        return v

    rates = [(r, cell(r, "per_position_rates")) for r in summary if r.get("per_position_rates")]
    keys = [k for k in keys if k != "per_position_rates"]  # listed below the table: they do not fit a column
    rows = [[cell(r, k) for k in keys] for r in summary]
    out = table_text([_INGEST_HEAD.get(k, k) for k in keys], rows, "summary")
    for r, text in rates:
        out += f"\nper-position rates ({r.get('source')}, steps {r.get('steps')}): {text}"
    return fit_width(out)


def routing_text(fit, markdown: bool = False) -> str:
    """``specsim routing``: the router's skew read from expert counts, the distinct-experts curve behind it."""
    rows = [[c["tokens"], f"{c['from_counts']:.1f}", f"{c['uniform']:.1f}", f"{c['modeled']:.1f}",
             f"{100 * (c['modeled'] / c['from_counts'] - 1) + 0.0:+.1f}".replace("-0.0", "+0.0")
             if c["used_in_fit"] else "-"] for c in fit.curve]
    headers = ["tokens", "distinct experts (counts)", "uniform routing", f"modeled at c = {fit.routing_skew:.2f}",
               "error %"]
    head = (f"router of {fit.num_experts} experts, top-{fit.experts_per_token} (measured): {fit.layers} MoE layers, "
            f"{fit.tokens_per_layer:,.0f} tokens counted a layer ({fit.mean_count_per_expert:,.0f} per expert, "
            f"counting noise CV {fit.noise_cv:.3f})")
    body = (f"per-layer CV of an expert's share (noise removed): median {fit.cv_median:.3f}, "
            f"{fit.cv_min:.3f}-{fit.cv_max:.3f}\n"
            f"routing skew c = {fit.routing_skew:.3f} (the prior is {fit.prior:g}): fits the curve within "
            f"{fit.fit_max_error_pct:.1f} %; use --routing-skew {fit.routing_skew:.2f}")
    table = table_markdown(headers, rows) if markdown else table_text(headers, rows)
    tail = f"files: {len(fit.files)}; rows: {fit.rows_read} read, {fit.rows_skipped} skipped (malformed)"
    return "\n".join([head, table, body, *[f"warning: {w}" for w in fit.warnings], tail])
