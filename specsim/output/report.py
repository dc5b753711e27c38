"""One-file reports: a self-contained HTML page (plotly.js embedded, opens offline), Markdown, or JSON (the numbers).

    >>> import specsim.report as r
    >>> html = r.build_report()                       # default scenario, HTML
    >>> r.write_report("report.md", fmt="md")          # Markdown, written atomically
    >>> data = r.collect_report("kimi-k2.5-seed")      # the numbers and figures behind a report
    >>> data.figures()["steps"].update_layout(template="plotly_dark")

Sections: summary (modeled next to measured), cycle breakdown, tok/s versus steps, verify
curve, training what-if, sensitivity (tornado), scenario inputs with their sources. The output
is deterministic: the same inputs give byte-identical text (fixed div ids, no timestamps).
"""

from __future__ import annotations

import html as _html
import importlib.util
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from pydantic import BaseModel

from ..errors import SpecsimError, one_line
from .render import COMPONENT_LABELS, json_safe, table_html

FIGURE_NAMES = ("cycle", "steps", "verify", "training", "tornado")
SECTIONS = (
    ("summary", "Summary: modeled vs measured"),
    ("cycle", "Cycle breakdown"),
    ("steps", "tok/s versus draft steps"),
    ("verify", "Verify forward versus draft tokens"),
    ("training", "Draft-head training what-if"),
    ("sensitivity", "Sensitivity (tornado)"),
    ("inputs", "Scenario inputs and sources"),
)
FORMATS = ("html", "md", "json")
_VERIFY_TABLE_TOKENS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
_SPEC_TOK_S = re.compile(r"^spec_tok_s_at_(\d+)_steps?$")
_BEST_STEPS = re.compile(r"^best_steps_of_(\d+)_to_(\d+)$")
_VERIFY_MS = re.compile(r"^verify_ms_at_(\d+)_tokens?(?:_(\w+))?$")


def figure_div_id(name: str) -> str:
    """The fixed HTML id of a report figure (``specsim-fig-<name>``)."""
    return f"specsim-fig-{name}"


@dataclass
class ReportData:
    """Everything a report shows, computed once; render with :meth:`to_html` / :meth:`to_markdown`."""

    scenario: Any  # specsim.scenario.Scenario
    prediction: Any  # specsim.Prediction
    sweep: Any  # specsim.figures.StepsSweep
    verify: Any  # specsim.VerifyCurve
    summary: list[list[object]]
    whatif: Any | None = None
    whatif_error: str | None = None
    elasticities: dict[str, float] | None = None
    elasticities_error: str | None = None
    elasticities_note: str | None = None  # the launch-queue wait they hold fixed, where the verify runs eagerly
    training_target_samples: float = 1.4e6
    measured_mismatch: str = ""  # why recorded measurements are not compared ("" = they are)

    # -- figures ------------------------------------------------------------------------------
    def figures(self) -> dict[str, Any]:
        """name -> plotly Figure for every available figure (fresh objects, safe to restyle)."""
        from . import figures as F

        out = {
            "cycle": F.cycle_breakdown_figure(self.prediction),
            "steps": F.steps_figure(sweep=self.sweep),
            "verify": F.verify_figure(curve=self.verify, current_tokens=self.prediction.num_draft_tokens),
        }
        if self.whatif is not None:
            out["training"] = F.training_figure(self.whatif)
        if self.elasticities:
            out["tornado"] = F.tornado_figure(self.elasticities)
        return out

    # -- rendering ----------------------------------------------------------------------------
    def to_html(self, preface_html: str = "") -> str:
        """One self-contained HTML page; ``preface_html`` (trusted HTML) goes first, above the report."""
        return _render_html(self, preface_html)

    def to_markdown(self, svg: bool | None = None, preface_md: str = "") -> str:
        """Markdown; figures inline as SVG when ``svg`` (default: when kaleido is importable).

        ``preface_md`` (Markdown) goes first, above the report.
        """
        return _render_markdown(self, svg=static_export_available() if svg is None else svg, preface=preface_md)

    def to_dict(self) -> dict:
        """The report's numbers as one JSON-ready object (no figures): the prediction, the steps sweep, the verify
        curve, the training what-if, the elasticities and the summary rows."""
        from dataclasses import asdict

        return json_safe({
            "kind": "modeled", "scenario": self.scenario.name, "description": self.scenario.description,
            "summary": [[_json_cell(c) for c in row] for row in self.summary],
            "prediction": self.prediction.to_dict(), "steps_sweep": asdict(self.sweep), "verify": self.verify.to_dict(),
            "training_whatif": self.whatif.to_dict() if self.whatif is not None else None,
            "training_whatif_error": self.whatif_error, "elasticities": self.elasticities,
            "elasticities_error": self.elasticities_error, "elasticities_note": self.elasticities_note,
            "measured_mismatch": self.measured_mismatch, "inputs": self.scenario.model_dump(mode="json"),
        })

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"

    def _repr_html_(self) -> str:
        # tables only (notebooks display the figures from .figures() with their own renderer)
        return "<div class='specsim-report'>" + "".join(
            f"<h3>{_html.escape(title)}</h3>{_tables_html(tables)}" for title, tables in _section_tables(self)
        ) + "</div>"

    def _repr_markdown_(self) -> str:
        return self.to_markdown(svg=False)


# ---------------------------------------------------------------------------------------------
# public API


def _json_cell(c: object) -> object:
    return c if isinstance(c, (int, float, str, bool, type(None))) else str(c)


def collect_report(
    scenario=None,
    sweep_steps: Iterable[int] = range(1, 11),
    accept_lengths: Iterable[float] | None = None,
    training_target_samples: float = 1.4e6,
    verify_tokens: Iterable[int] = range(1, 65),
    training_current_samples: float | None = None,
) -> ReportData:
    """Compute the prediction, sweeps, what-if and sensitivities a report shows."""
    from ..analysis.build import build_scenario
    from ..analysis.predict import evaluate
    from .figures import steps_sweep, verify_curve

    sc = build_scenario(scenario)
    pred = evaluate(sc)
    sweep = steps_sweep(sc, accept_lengths, sweep_steps)
    vc = verify_curve(sc, verify_tokens)
    mismatch = measurement_mismatch(sc)
    if mismatch:  # recorded numbers belong to other conditions: list them, never plot or compare them
        sweep.measured, vc.measured = [], []
    data = ReportData(scenario=sc, prediction=pred, sweep=sweep, verify=vc,
                      summary=_summary_rows(sc, pred, sweep, compare=not mismatch),
                      training_target_samples=float(training_target_samples), measured_mismatch=mismatch)
    whatif_training, err = _optional("specsim.analysis.training", "whatif_training")
    data.whatif_error = err
    if whatif_training is not None:
        try:
            data.whatif = whatif_training(scenario=sc, target_samples=training_target_samples,
                                          current_samples=training_current_samples)
        except SpecsimError as exc:
            data.whatif_error = _unavailable(exc, "specsim.analysis.training")
    elasticities, err = _optional("specsim.analysis.symbolic", "elasticities")
    data.elasticities_error = err
    if elasticities is not None:
        try:
            data.elasticities = {str(k): float(v) for k, v in elasticities(scenario=sc).items()}
            from ..analysis.symbolic import queue_note, verify_eager_wait_ms

            data.elasticities_note = queue_note({"verify_eager_launch_wait_ms": verify_eager_wait_ms(sc),
                                                 "T_cycle_ms": float(pred.cycle_ms)})
        except SpecsimError as exc:
            data.elasticities_error = _unavailable(exc, "specsim.analysis.symbolic")
    return data


def _optional(module: str, name: str):
    """(function, None) from an optional sibling module, or (None, why it is not available)."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name), None
    except (ImportError, SyntaxError, AttributeError) as exc:
        return None, _unavailable(exc, module)


def build_report(
    scenario=None,
    sweep_steps: Iterable[int] = range(1, 11),
    accept_lengths: Iterable[float] | None = None,
    training_target_samples: float = 1.4e6,
    fmt: str = "html",
    **kw,
) -> str:
    """The report as text: ``fmt="html"`` (one self-contained page), ``"md"`` (Markdown) or ``"json"`` (the numbers).

    Extra keywords go to :func:`collect_report` (e.g. ``verify_tokens``).
    """
    fmt = _check_fmt(fmt)
    data = collect_report(scenario, sweep_steps=sweep_steps, accept_lengths=accept_lengths,
                          training_target_samples=training_target_samples, **kw)
    return data.to_html() if fmt == "html" else data.to_markdown() if fmt == "md" else data.to_json()


#: a report file's suffix -> the format it holds
SUFFIX_FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md", ".json": "json"}
_FORMAT_WORDS = {"html": "an HTML", "md": "a Markdown", "json": "a JSON"}


def report_format(path, fmt: str | None = None) -> str:
    """The format a report written to ``path`` takes: ``fmt`` (html, md/markdown, json) where given, else the
    suffix's (:data:`SUFFIX_FORMATS`). A suffix of another format than ``fmt``, an unknown suffix, or no suffix
    and no ``fmt`` (``-``, standard output, included) is a one-line :class:`SpecsimError`."""
    import os

    name = os.fspath(path)
    suffix = "" if name == "-" else os.path.splitext(name)[1].lower()
    known = ", ".join(SUFFIX_FORMATS)
    if suffix and suffix not in SUFFIX_FORMATS:
        raise SpecsimError("out", name, f"allowed: a file name ending in {known} (the suffix picks the format)")
    want = _check_fmt(fmt) if fmt is not None else None
    have = SUFFIX_FORMATS.get(suffix)
    if want is None and have is None:
        where = "standard output has no suffix" if name == "-" else "it has no suffix"
        raise SpecsimError("out", name, f"{where}: give --format html, md or json, or a file name ending in {known}")
    if want is not None and have is not None and want != have:
        raise SpecsimError("format", fmt, f"--out {name!r} names {_FORMAT_WORDS[have]} file: give --format {have}, "
                                          f"leave --format out, or name the file *.{'md' if want == 'md' else want}")
    return want or have  # type: ignore[return-value]


def write_report(path, fmt: str | None = None, **kw) -> str:
    """Build a report and write it atomically (a failure leaves no partial file); returns the format.

    The format is :func:`report_format`'s: ``fmt`` where given, else the suffix's (``.html``/``.htm``, ``.md``/
    ``.markdown``, ``.json``); the two must agree.
    """
    from ..io.files import write_atomic

    fmt = report_format(path, fmt)
    text = build_report(fmt=fmt, **kw)
    write_atomic(path, text)
    return fmt


def static_export_available() -> bool:
    """True when plotly can export static SVG (the optional ``kaleido`` package is importable)."""
    return importlib.util.find_spec("kaleido") is not None


# ---------------------------------------------------------------------------------------------
# content


def _check_fmt(fmt: str) -> str:
    f = {"markdown": "md", "htm": "html"}.get(str(fmt).lower(), str(fmt).lower())
    if f not in FORMATS:
        raise SpecsimError("format", fmt, "allowed: html, md (markdown) or json")
    return f


def _unavailable(exc: BaseException, module: str) -> str:
    if isinstance(exc, (ImportError, SyntaxError, AttributeError)):
        return f"not available: {module} is not importable in this installation ({type(exc).__name__}: {one_line(exc)})"
    return f"not available for this scenario: {one_line(exc)}"


def measurement_mismatch(sc) -> str:
    """Why the scenario's recorded measurements do not apply to it ("" when they do).

    Measurements travel with a scenario through overrides (``--gpu``, ``--batch``, ...). When the
    scenario derives from a built-in one, every performance-relevant component (GPU, parallelism,
    models, engine, workload) is compared with it; any difference means the recorded numbers were
    taken under other conditions.
    """
    from ..io.presets import builtin_scenarios, load_scenario

    prov = sc.provenance or {}
    if not (prov.get("measured") or prov.get("verify_points") or (sc.calibration or {}).get("points")):
        return ""
    base = sc.name.split("+", 1)[0]
    if base not in builtin_scenarios():
        return "" if "+" not in sc.name else f"the scenario was derived ({sc.name}) from the one measured"
    ref = load_scenario(base)
    diff = [k for k in ("gpu", "parallel", "target", "draft", "engine", "workload") if getattr(sc, k) != getattr(ref, k)]
    if not diff:
        return ""
    return f"this scenario differs from '{base}', where they were recorded, in: {', '.join(diff)}"


def _measured_dict(sc) -> dict:
    m = (sc.provenance or {}).get("measured") or {}
    return dict(m) if isinstance(m, Mapping) else {}


def _summary_rows(sc, pred, sweep, compare: bool = True) -> list[list[object]]:
    """[quantity, modeled, measured, note]: modeled from specsim, measured as recorded in the scenario.

    With ``compare=False`` (measurements from other conditions) the measured column stays empty.
    """
    from ..analysis.predict import predict as _predict
    from ..analysis.predict import verify_ms
    from ..analysis.sweep import best_steps

    meas = _measured_dict(sc) if compare else {}
    used: set[str] = set()
    dash = "—"

    def take(key):
        if key in meas:
            used.add(key)
            return meas[key]
        return dash

    spec_key = next((k for k in meas if (m := _SPEC_TOK_S.match(k)) and int(m.group(1)) == pred.steps), None)
    spec_meas = take(spec_key) if spec_key else dash
    base_meas = take("baseline_tok_s")
    rows: list[list[object]] = [
        [f"speculative tok/s (steps={pred.steps})", pred.tok_s, spec_meas,
         f"measured key: {spec_key}" if spec_key else ""],
        ["baseline tok/s (no speculation)", pred.baseline_tok_s, base_meas, ""],
    ]
    if isinstance(spec_meas, (int, float)) and isinstance(base_meas, (int, float)) and base_meas:
        rows.append(["speedup", pred.speedup, spec_meas / base_meas, "measured column derived from the two above"])
    else:
        rows.append(["speedup", pred.speedup, dash, ""])
    rows.append(["accept length (tokens/cycle)", pred.accept_length, take("accept_length"),
                 "a model input (scenario acceptance), not a prediction"])
    best = [c for c in sweep.curves if c.scenario_profile]
    for k in list(meas):
        m = _BEST_STEPS.match(k)
        if not m:
            continue
        lo, hi = int(m.group(1)), int(m.group(2))
        b = best_steps(sc, hi, min_steps=lo)
        rows.append([f"best steps in {lo}..{hi}", b["steps"], take(k), f"modeled {b['tok_s']:,.1f} tok/s there"])
    if best and not any(_BEST_STEPS.match(k) for k in meas):
        c = best[0]
        rows.append([f"best steps in {min(c.steps)}..{max(c.steps)}", c.best_steps, dash,
                     f"modeled {c.best_tok_s:,.1f} tok/s there"])
    rows += [
        ["cycle time (ms)", pred.cycle_ms, dash, ""],
        [f"verify forward at {pred.num_draft_tokens} tokens (ms)", pred.verify_ms, dash, ""],
        ["baseline decode step (ms)", pred.baseline_step_ms, dash, ""],
    ]
    for k in list(meas):
        if k in used:
            continue
        m = _SPEC_TOK_S.match(k)
        if m:
            n = int(m.group(1))
            rows.append([f"speculative tok/s (steps={n})", _predict(sc, steps=n).tok_s, take(k), ""])
            continue
        m = _VERIFY_MS.match(k)
        if m:
            cond = m.group(2)
            n = int(m.group(1))
            if cond and cond.lower() not in sc.name.lower():
                rows.append([f"verify forward at {n} tokens (ms), {cond}", dash, take(k),
                             f"measured under '{cond}' conditions: a different scenario"])
            else:
                rows.append([f"verify forward at {n} tokens (ms)", verify_ms([n], sc).verify_ms[0], take(k), ""])
            continue
        rows.append([k.replace("_", " "), dash, take(k), "recorded measurement (no modeled counterpart)"])
    return rows


def _fmt_value(v: object) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.4g}"
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_fmt_value(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        vals = [_fmt_value(x) for x in v]
        if len(vals) > 10:
            return f"[{', '.join(vals[:4])}, ..., {', '.join(vals[-2:])}] ({len(vals)} values)"
        return "[" + ", ".join(vals) + "]"
    return str(v)


def _flatten(model: BaseModel, prefix: str = "") -> list[tuple[str, str, object, bool]]:
    """(dotted field, top-level field, value, is_schema_default) for every leaf of a component."""
    out = []
    for name, info in type(model).model_fields.items():
        if name == "sources":
            continue
        v = getattr(model, name)
        key = f"{prefix}{name}"
        if isinstance(v, BaseModel):
            out += [(k, prefix.split(".")[0] or name, x, d) for k, _, x, d in _flatten(v, f"{key}.")]
            continue
        try:
            default = info.get_default(call_default_factory=True)
        except Exception:  # required field: no default
            default = object()
        out.append((key, prefix.split(".")[0] or name, v, v == default))
    return out


def _input_rows(sc) -> list[list[object]]:
    """[input, value, source] for every scenario input, sources from each component's ``sources``."""
    fitted = (sc.provenance or {}).get("fitted_parameters") or {}
    rows: list[list[object]] = [["name", sc.name, "scenario"], ["description", sc.description, "scenario"]]
    comps: list[tuple[str, BaseModel | None]] = [
        ("gpu", sc.gpu), ("parallel.allreduce", sc.parallel.allreduce),
        ("parallel.allreduce_eager", sc.parallel.allreduce_eager),
        ("target", sc.target), ("draft", sc.draft), ("engine", sc.engine),
    ]
    for cname, comp in comps:
        if comp is None:
            continue
        srcs = getattr(comp, "sources", {}) or {}
        for key, top, v, is_default in _flatten(comp):
            # the model's ``architecture`` (its HF class name) has its own source; ``sources.architecture`` is the dims'
            src = srcs.get("architecture_name") if (cname, key) == ("target", "architecture") else srcs.get(key) or srcs.get(top)
            if src is None and cname in ("target", "draft") and key not in ("name", "kernels_per_layer"):
                src = srcs.get("architecture")
            if key in fitted and isinstance(fitted[key], Mapping):
                f = fitted[key]
                src = f"fitted to the scenario's measurements (prior {_fmt_value(f.get('prior'))})" + (
                    f"; prior source: {src}" if src else "")
            if src is None:
                src = ("schema default (no source recorded)" if is_default
                       else "set in the scenario (no source recorded)")
            if len(src) > 40 and str(rows[-1][0]).startswith(cname + ".") and _last_full_source(rows) == src:
                src = _SAME  # long source repeated down a component: say it once
            rows.append([f"{cname}.{key}", _fmt_value(v), src])
    p = sc.parallel
    for k in ("tp", "allreduce_scale", "allreduces_per_layer"):
        rows.append([f"parallel.{k}", _fmt_value(getattr(p, k)), "scenario"])
    for k, v in sc.speculation.model_dump().items():
        rows.append([f"speculation.{k}", _fmt_value(v), "scenario (topk=1 forces draft tokens = steps+1)"
                     if k == "num_draft_tokens" else "scenario"])
    a = sc.acceptance
    for k, v in a.model_dump(exclude_none=True).items():
        if k != "source":
            rows.append([f"acceptance.{k}", _fmt_value(v), a.source or "scenario"])
    for k, v in sc.workload.model_dump().items():
        rows.append([f"workload.{k}", _fmt_value(v), "scenario (see assumptions)"])
    return rows


_SAME = "(same source as above)"


def _last_full_source(rows: list[list[object]]) -> object:
    for r in reversed(rows):
        if r[2] != _SAME:
            return r[2]
    return None


def _provenance_rows(sc) -> tuple[list[list[object]], list[list[object]], list[list[object]]]:
    prov = sc.provenance or {}
    meta = [[k, _fmt_value(v)] for k, v in prov.items() if isinstance(v, (str, int, float))]
    meta += [["assumption", a] for a in (prov.get("assumptions") or [])]
    fitted = [[k, _fmt_value(f.get("value")), f.get("unit", ""), _fmt_value(f.get("prior")), f.get("meaning", "")]
              for k, f in (prov.get("fitted_parameters") or {}).items() if isinstance(f, Mapping)]
    checks = [[k, _fmt_value(c.get("modeled")), _fmt_value(c.get("measured_or_derived")),
               _fmt_value(c.get("error_pct"))]
              for k, c in (prov.get("fit_checks") or {}).items() if isinstance(c, Mapping)]
    return meta, fitted, checks


_WHATIF_LABELS = {
    "samples": "training samples", "tau": "accept length (fit)", "best_steps": "best steps",
    "tok_s": "speculative tok/s (modeled)", "speedup": "speedup vs baseline",
}
_COST_LABELS = {
    "gpu_hours_invested": "training GPU-hours invested", "gpu_hours_saved_per_day": "serving GPU-hours saved per day",
    "payback_days": "payback (days)", "gpu_hours_per_100k_samples": "assumed training GPU-hours per 100K samples",
    "fleet_tokens_per_day": "assumed fleet tokens per day", "gpus_per_replica": "GPUs per serving replica",
    "baseline_tok_s": "baseline tok/s (no speculation)",
}
_WHATIF_COST = ("gpu_hours_invested", "gpu_hours_saved_per_day", "payback_days", "gpu_hours_per_100k_samples",
                "fleet_tokens_per_day", "gpus_per_replica", "baseline_tok_s")


def _whatif_rows(w) -> tuple[list[list[object]], list[list[object]]]:
    """([quantity, now, target], [investment, value]) from a TrainingWhatIf (fields read defensively)."""
    names = [f.name for f in fields(w)] if is_dataclass(w) else [
        "tau_now", "tau_target", "gpu_hours_invested", "gpu_hours_saved_per_day", "payback_days"]
    pairs: list[list[object]] = []
    for n in names:
        if not n.endswith("_now"):
            continue
        base = n[: -len("_now")]
        tgt = next((t for t in (f"{base}_target", f"target_{base}") if hasattr(w, t)), None)
        if tgt is None:
            continue
        a, b = getattr(w, n), getattr(w, tgt)
        cell_b: object = _whatif_value(base, b)
        lo, hi = getattr(w, f"{base}_target_low", None), getattr(w, f"{base}_target_high", None)
        if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
            cell_b = f"{b:.3f} [{lo:.2f}, {hi:.2f}]"
        pairs.append([_WHATIF_LABELS.get(base, base.replace("_", " ")), _whatif_value(base, a), cell_b])
    cost = []
    for n in _WHATIF_COST:
        v = getattr(w, n, None)
        if isinstance(v, (int, float)):
            if n == "payback_days" and not math.isfinite(v):
                v = "never (nothing saved)"
            cost.append([_COST_LABELS.get(n, n.replace("_", " ")), _whatif_value(n, v)])
    return pairs, cost


def _whatif_value(name: str, v: object) -> object:
    if isinstance(v, float) and ("samples" in name or "tokens_per_day" in name):
        return f"{v:,.0f}"
    return v


def _whatif_curve_rows(w, max_rows: int = 12) -> tuple[list[str], list[list[object]]]:
    c = w.curve
    keys = [k for k in ("samples", "best_steps", "tau", "tau_low", "tau_high", "tok_s") if c.get(k) is not None]
    n = len(c["samples"])
    idx = sorted({round(i * (n - 1) / (max_rows - 1)) for i in range(max_rows)}) if n > max_rows else list(range(n))
    heads = {"samples": "training samples", "best_steps": "best steps", "tau": "accept length", "tau_low": "low",
             "tau_high": "high", "tok_s": "tok/s"}
    return [heads[k] for k in keys], [[_num(c[k][i], k) for k in keys] for i in idx]


def _num(v, key=""):
    if key == "best_steps":
        return int(v)
    v = float(v)
    if key == "samples":
        return f"{v:,.0f}"
    return v


def _elasticity_rows(e: Mapping[str, float]) -> list[list[object]]:
    from .figures import ELASTICITY_LABELS

    rows = []
    for k, v in sorted(e.items(), key=lambda kv: (-abs(kv[1]), kv[0])):
        faster = (0.9 ** v - 1.0) * 100.0 if v == v else float("nan")
        rows.append([ELASTICITY_LABELS.get(k, k), k, f"{v:+.3f}", f"{faster:+.2f}%"])
    return rows


Table = tuple[str, list[str], list[list[object]]]


def _section_tables(d: ReportData) -> list[tuple[str, list[Table]]]:
    """(section title, [(caption, headers, rows)]) for every section, in report order."""
    p, sw, vc = d.prediction, d.sweep, d.verify
    out: list[tuple[str, list[Table]]] = []
    out.append((SECTIONS[0][1], [(
        f"{p.scenario}: {p.model} on {p.tp}x {p.gpu}, steps={p.steps} topk={p.topk} draft_tokens={p.num_draft_tokens} "
        f"batch={p.batch} ctx={p.ctx}",
        ["quantity", "modeled (specsim)", "measured (recorded in scenario)", "note"], d.summary,
    )]))
    meta, fitted, checks = _provenance_rows(d.scenario)
    if d.measured_mismatch and _measured_dict(d.scenario):
        out[0][1].append((f"recorded measurements, NOT comparable: {d.measured_mismatch}",
                          ["measurement", "value (recorded)"], [[k, v] for k, v in _measured_dict(d.scenario).items()]))
    if checks and not d.measured_mismatch:
        out[0][1].append(("calibration fit checks (from the scenario's provenance)",
                          ["check", "modeled", "measured or derived", "error %"], checks))
    out.append((SECTIONS[1][1], [
        ("cycle phases (modeled)", ["phase", "ms", "% of cycle"],
         [[k, v, 100.0 * v / p.cycle_ms] for k, v in p.phases_ms.items()]),
        (f"verify forward at {p.num_draft_tokens} tokens by component (modeled)", ["component", "ms", "% of verify"],
         [[COMPONENT_LABELS.get(k, k), v, 100.0 * v / p.verify_ms] for k, v in p.verify_breakdown_ms.items()]),
    ]))
    h, r = sw.rows()
    steps_tables: list[Table] = [(f"modeled tok/s (baseline {sw.baseline_tok_s:,.1f} tok/s); accept lengths are tau at "
                                  f"the scenario's {sw.base_steps} steps", h, r)]
    steps_tables.append(("best steps per accept length (modeled)", ["acceptance", "best steps", "tok/s", "speedup"],
                         [[c.label, c.best_steps, c.best_tok_s, c.best_tok_s / sw.baseline_tok_s] for c in sw.curves]))
    if sw.measured:
        steps_tables.append(("measured (recorded in scenario)", ["steps", "tok/s", "key"],
                             [[m["steps"], m["tok_s"], m["label"]] for m in sw.measured]))
    out.append((SECTIONS[2][1], steps_tables))
    sel = [i for i, t in enumerate(vc.tokens) if t in _VERIFY_TABLE_TOKENS or t == p.num_draft_tokens]
    vh = ["tokens", "verify ms (modeled)"] + (["90% low", "90% high"] if vc.verify_ms_low is not None else [])
    vr = [[vc.tokens[i], vc.verify_ms[i]] + ([vc.verify_ms_low[i], vc.verify_ms_high[i]] if vc.verify_ms_low is not None
                                             else []) for i in sel]
    vt: list[Table] = [("target verify forward (modeled)" + ("" if vc.verify_ms_low is not None else
                                                              "; no calibration band in this scenario"), vh, vr)]
    if vc.measured:
        vt.append(("measured verify points", ["tokens", "ms", "origin"],
                   [[m.get("tokens"), m.get("ms"), ("recorded in provenance" if m.get("recorded") else "calibration")
                     + (f": {m['derived']}" if m.get("derived") else "")] for m in vc.measured]))
    out.append((SECTIONS[3][1], vt))
    if d.whatif is not None:
        ch, cr = _whatif_curve_rows(d.whatif)
        w = d.whatif
        wt: list[Table] = []
        title = (f"what-if: train the draft head to {d.training_target_samples:,.0f} samples "
                 "(target accept length with its band)")
        if callable(getattr(w, "rows", None)) and callable(getattr(w, "headers", None)):
            # the what-if's own table: the scenario as configured, best steps now, best steps at the target
            wt.append((title, list(w.headers()), [list(r) for r in w.rows()]))
            wt.append(("investment and payback", ["item", "value"], [list(r) for r in w.cost_rows()]))
        else:
            pairs, cost = _whatif_rows(w)
            if pairs:
                wt.append((title, ["quantity", "now", "target"], pairs))
            if cost:
                wt.append(("investment and payback", ["item", "value"], cost))
        wt.append(("accept length and tok/s versus training samples (modeled)", ch, cr))
        out.append((SECTIONS[4][1], wt))
    else:
        out.append((SECTIONS[4][1], []))
    if d.elasticities:
        out.append((SECTIONS[5][1], [("elasticity d ln(tok/s) / d ln(component), largest first",
                                      ["component", "key", "elasticity", "tok/s change if 10% less"],
                                      _elasticity_rows(d.elasticities))]))
    else:
        out.append((SECTIONS[5][1], []))
    inputs: list[Table] = [("inputs (value and where it comes from)", ["input", "value", "source"],
                            _input_rows(d.scenario))]
    if meta:
        inputs.append(("provenance and assumptions", ["item", "value"], meta))
    if fitted:
        inputs.append(("fitted parameters", ["parameter", "value", "unit", "prior", "meaning"], fitted))
    out.append((SECTIONS[6][1], inputs))
    return out


def _headline(d: ReportData) -> str:
    p, sw = d.prediction, d.sweep
    own = next((c for c in sw.curves if c.scenario_profile), None)
    s = (f"Modeled: {p.tok_s:,.1f} tok/s with speculation (steps={p.steps}, accept length "
         f"{p.accept_length:.2f}) versus "
         f"{p.baseline_tok_s:,.1f} tok/s without: speedup {p.speedup:.3f}x. The target verify forward is "
         f"{100.0 * p.phases_ms['verify'] / p.cycle_ms:.0f}% of the {p.cycle_ms:.2f} ms cycle.")
    if own is not None:
        s += f" Best steps in {min(own.steps)}..{max(own.steps)}: {own.best_steps} ({own.best_tok_s:,.1f} tok/s)."
    return s


def _section_notes(d: ReportData) -> dict[str, str]:
    notes = {
        SECTIONS[0][1]: "Modeled numbers come from specsim's cost model; measured numbers are recorded in the "
                        "scenario's provenance and are shown as-is, never produced by the model.",
        SECTIONS[1][1]: "One speculative cycle by phase, the verify forward by component, and the plain decode step "
                        "it competes with.",
        SECTIONS[2][1]: "Each curve rescales the scenario's per-position acceptance profile to an accept length "
                        "measured at the scenario's steps; stars mark the best steps per curve.",
        SECTIONS[3][1]: "Verify forward time as the number of draft tokens per request grows; measured points as "
                        "markers, the calibration band where the scenario has one.",
        SECTIONS[4][1]: "How accept length and tok/s could grow with more draft-head training data, and when the "
                        "training GPU-hours pay back.",
        SECTIONS[5][1]: "Elasticity of tok/s to each time component: -0.3 means 10% less of that component gives "
                        "about 3% more tok/s.",
        SECTIONS[6][1]: "Every input number of the scenario and where it comes from.",
    }
    if d.measured_mismatch:
        notes[SECTIONS[0][1]] += (f" The recorded measurements are not compared or plotted: {d.measured_mismatch}.")
    for w in getattr(d.prediction, "warnings", None) or []:
        notes[SECTIONS[0][1]] += f" Warning: {w}."
    if d.whatif is None:
        notes[SECTIONS[4][1]] += f" ({d.whatif_error})"
    elif callable(getattr(d.whatif, "source_lines", None)):
        notes[SECTIONS[4][1]] += " " + "; ".join(d.whatif.source_lines()) + "."
        for w in getattr(d.whatif, "warnings", None) or []:
            notes[SECTIONS[4][1]] += f" Warning: {w}."
    if not d.elasticities:
        notes[SECTIONS[5][1]] += f" ({d.elasticities_error or 'not available: no elasticities'})"
    elif d.elasticities_note:
        notes[SECTIONS[5][1]] += " " + d.elasticities_note[0].upper() + d.elasticities_note[1:] + "."
    return notes


# ---------------------------------------------------------------------------------------------
# HTML


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1200px;margin:0 auto;padding:0 24px 48px;
color:#222;line-height:1.45}
h1{margin-bottom:4px}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:40px}
nav a{margin-right:14px}
table.specsim{border-collapse:collapse;margin:12px 0 20px;font-size:14px}
table.specsim caption{text-align:left;font-weight:600;padding:4px 0;caption-side:top}
table.specsim th,table.specsim td{border:1px solid #ddd;padding:4px 8px;vertical-align:top}
table.specsim th{background:#f4f4f4}
table.specsim td:not(:first-child){font-variant-numeric:tabular-nums}
.headline{background:#f0f6ff;border-left:4px solid #1f77b4;padding:10px 14px}
.note{color:#555}.unavailable{color:#a33;font-weight:600}
.figure{margin:8px 0 16px}
details summary{cursor:pointer;font-weight:600;margin:8px 0}
""".strip()


def _tables_html(tables: list[Table]) -> str:
    return "".join(table_html(h, r, cap) for cap, h, r in tables)


def _render_html(d: ReportData, preface_html: str = "") -> str:
    import plotly.offline

    from .. import __version__

    figs = d.figures()
    notes = _section_notes(d)
    section_fig = {"cycle": "cycle", "steps": "steps", "verify": "verify", "training": "training",
                   "sensitivity": "tornado"}
    tables = dict(_section_tables(d))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>specsim report: {_html.escape(d.scenario.name)}</title>",
        f"<style>{_CSS}</style>",
        f'<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script>',
        "</head><body>",
        f"<h1>specsim report: {_html.escape(d.scenario.name)}</h1>",
        f"<p class='note'>{_html.escape(d.scenario.description)} &mdash; specsim {_html.escape(__version__)}, "
        "analytical model of EAGLE-3 speculative decoding. All numbers are modeled unless labelled measured.</p>",
        f"<p class='headline'>{_html.escape(_headline(d))}</p>",
        "<nav>" + "".join(f"<a href='#{sid}'>{_html.escape(title)}</a>" for sid, title in SECTIONS) + "</nav>",
    ]
    if preface_html:
        parts.insert(parts.index("</head><body>") + 1, f"<section id='preface'>{preface_html}</section>")
    for sid, title in SECTIONS:
        parts.append(f"<section id='{sid}'><h2>{_html.escape(title)}</h2>")
        note_cls = "note unavailable" if "not available" in notes[title] else "note"
        parts.append(f"<p class='{note_cls}'>{_html.escape(notes[title])}</p>")
        fname = section_fig.get(sid)
        if fname and fname in figs:
            parts.append("<div class='figure'>" + figs[fname].to_html(
                full_html=False, include_plotlyjs=False, div_id=figure_div_id(fname),
                config={"displaylogo": False, "responsive": True}, default_width="100%", default_height=None,
            ) + "</div>")
        tbls = tables[title]
        if sid == "inputs" or (sid in ("steps", "verify", "training") and tbls):
            parts.append(f"<details{' open' if sid == 'inputs' else ''}><summary>tables</summary>"
                         + _tables_html(tbls) + "</details>")
        else:
            parts.append(_tables_html(tbls))
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# Markdown


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    """Reports use the one Markdown table formatter (output.render.table_markdown)."""
    from .render import table_markdown

    return table_markdown(headers, rows)


def _tables_md(tables: list[Table]) -> str:
    from .render import _md_cell

    return "\n\n".join(f"**{_md_cell(cap)}**\n\n" + markdown_table(h, rows) for cap, h, rows in tables)


def _figure_md(fig, name: str, svg: bool) -> str:
    if svg:
        try:
            img = fig.to_image(format="svg", width=1000, height=int(fig.layout.height or 460))
            text = img.decode("utf-8") if isinstance(img, bytes) else str(img)
            text = re.sub(r"<\?xml[^>]*\?>", "", text).strip()
            return f'<div id="{figure_div_id(name)}">\n{text}\n</div>'
        except Exception as exc:  # exporter present but unusable (e.g. no browser for kaleido)
            return (f"_Figure `{figure_div_id(name)}`: static export failed ({one_line(exc)}); "
                    "see the HTML report for the interactive figure._")
    return (f"_Figure: see `#{figure_div_id(name)}` in the HTML report (`specsim report --format html`); "
            "static SVG export needs the optional kaleido package._")


def _render_markdown(d: ReportData, svg: bool = False, preface: str = "") -> str:
    figs = d.figures()
    notes = _section_notes(d)
    section_fig = {"cycle": "cycle", "steps": "steps", "verify": "verify", "training": "training",
                   "sensitivity": "tornado"}
    tables = dict(_section_tables(d))
    out = [f"# specsim report: {d.scenario.name}", "",
           f"{d.scenario.description} (specsim, analytical model of EAGLE-3 speculative decoding; all numbers are "
           "modeled unless labelled measured)", "", f"> {_headline(d)}", ""]
    if preface:
        out = [preface.strip(), ""] + out
    for sid, title in SECTIONS:
        out += [f"## {title}", "", notes[title], ""]
        fname = section_fig.get(sid)
        if fname and fname in figs:
            out += [_figure_md(figs[fname], fname, svg), ""]
        if tables[title]:
            out += [_tables_md(tables[title]), ""]
    return "\n".join(out).rstrip() + "\n"
