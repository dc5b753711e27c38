"""Plain-text, Markdown and HTML tables for results (no heavy imports)."""

from __future__ import annotations

import html
from collections.abc import Sequence

COMPONENT_LABELS = {
    "launch": "graph replay / kernel launch",
    "kernel_fixed": "per-kernel fixed GPU time",
    "allreduce": "TP all-reduce / gather",
    "weights": "weights / memory",
    "attention": "attention (KV cache)",
    "compute": "compute-bound GEMM",
}


def table_text(headers: Sequence[str], rows: Sequence[Sequence[object]], title: str = "") -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = "  ".join("-" * w for w in widths)
    out = [title] if title else []
    for i, r in enumerate(cells):
        out.append("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(r, widths))))
        if i == 0:
            out.append(line)
    return "\n".join(out)


def table_markdown(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    out = ["| " + " | ".join(str(h) for h in headers) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(headers))) + "|"]
    out += ["| " + " | ".join(_fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def table_html(headers: Sequence[str], rows: Sequence[Sequence[object]], caption: str = "") -> str:
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class='specsim'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(x: object) -> str:
    if isinstance(x, float):
        if x != x:
            return "n/a"
        return f"{x:,.3f}" if abs(x) < 10 else f"{x:,.1f}" if abs(x) < 1e5 else f"{x:,.0f}"
    return str(x)


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
    phases = [[k, v, 100.0 * v / p.cycle_ms] for k, v in p.phases_ms.items()]
    comps = [[COMPONENT_LABELS.get(k, k), v, 100.0 * v / p.verify_ms] for k, v in p.verify_breakdown_ms.items()]
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


def prediction_text(p) -> str:
    out = "\n\n".join(table_text(h, r, t) for t, h, r in _prediction_tables(p))
    return out + "".join(f"\nwarning: {w}" for w in getattr(p, "warnings", []))


def prediction_markdown(p) -> str:
    return "\n\n".join(f"**{t}**\n\n" + table_markdown(h, r) for t, h, r in _prediction_tables(p))


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
    out = table_text(h, r, f"{v.scenario}: target verify forward")
    if v.measured:
        out += "\n\n" + table_text(["tokens", "measured ms"], [[m.get("tokens"), m.get("ms")] for m in v.measured], "measured points")
    return out


def verify_markdown(v) -> str:
    h, r = _verify_rows(v)
    return table_markdown(h, r)


def verify_html(v) -> str:
    h, r = _verify_rows(v)
    return table_html(h, r, f"{v.scenario}: target verify forward")
