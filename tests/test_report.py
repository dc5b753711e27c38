"""Reports and figures: sections, offline self-containment, determinism, atomic writes, Markdown."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import plotly.graph_objects as go
import plotly.offline
import pytest

import specsim
import specsim.output.report as report
from specsim.errors import SpecsimError
from specsim.output import figures as F

FIGS = ("cycle", "steps", "verify", "training", "tornado")
PLOTLY_JS = plotly.offline.get_plotlyjs()


def _page(html_text: str) -> str:
    """The report without the embedded plotly.js bundle (whose text would match anything)."""
    return html_text.replace(PLOTLY_JS, "")


@pytest.fixture(scope="module")
def html_built() -> str:
    return report.build_report()


@pytest.fixture(scope="module")
def data() -> report.ReportData:
    return report.collect_report()


@pytest.fixture(scope="module")
def md(data) -> str:
    return data.to_markdown(svg=False)


# --- HTML ------------------------------------------------------------------------------------


def test_html_has_every_section_and_figure(html_built):
    assert html_built.startswith("<!DOCTYPE html>")
    for sid, title in report.SECTIONS:
        assert f"<section id='{sid}'>" in html_built
        assert f"<h2>{title}</h2>" in html_built
    for name in FIGS:  # training and sensitivity modules are present: their figures must be too
        assert html_built.count(f'id="{report.figure_div_id(name)}"') == 1, name
    assert "not available" not in _page(html_built)


def test_html_embeds_plotly_once_and_loads_nothing(html_built):
    js = PLOTLY_JS
    assert html_built.count(js[:200]) == 1
    assert html_built.count(js[-200:]) == 1
    assert not re.search(r"<script[^>]*\bsrc\s*=", html_built, re.I)
    assert not re.search(r"<(link|img|iframe|script|source)\b[^>]*\b(src|href)\s*=\s*[\"']?(https?:)?//", html_built, re.I)
    assert "cdn.plot.ly" not in html_built.replace(js, "")


def test_html_labels_modeled_and_measured(html_built):
    assert "modeled (specsim)" in html_built
    assert "measured (recorded in scenario)" in html_built
    assert "<td>94.0</td>" in html_built  # the seed's measured 94.0 tok/s, shown as recorded
    assert "NVIDIA H200 datasheet" in html_built  # an input's source
    assert "GPU type not stated" in html_built  # a provenance assumption


def test_html_is_deterministic(html_built, data):
    # two independent computations (build_report and collect_report) render byte-identical pages
    assert data.to_html() == html_built
    assert not re.search(r"\b20\d\d-\d\d-\d\d[T ]\d\d:\d\d", _page(html_built))  # no timestamps


def test_repr_html_is_light(data):
    frag = data._repr_html_()
    assert "<table" in frag and "Summary" in frag
    assert len(frag) < 200_000


# --- Markdown --------------------------------------------------------------------------------


def test_markdown_has_tables_and_sections(md):
    for _, title in report.SECTIONS:
        assert f"## {title}" in md
    assert "| quantity | modeled (specsim) | measured (recorded in scenario) | note |" in md
    assert re.search(r"^\|---\|---:\|", md, re.M)
    assert "| steps | tok/s, scenario profile" in md
    assert "| input | value | source |" in md
    assert "<script" not in md
    for name in FIGS:
        assert report.figure_div_id(name) in md


def test_markdown_figures_note_without_exporter(md):
    if report.static_export_available():
        pytest.skip("kaleido installed: figures are inline SVG")
    assert "static SVG export needs the optional kaleido package" in md


def test_build_report_md_dispatch(monkeypatch, data, md):
    monkeypatch.setattr(report, "collect_report", lambda *a, **k: data)
    assert report.build_report(fmt="markdown") == report.build_report(fmt="md")
    assert report.build_report(fmt="md").startswith("# specsim report: kimi-k2.5-seed")
    with pytest.raises(SpecsimError):
        report.build_report(fmt="pdf")


# --- atomic writes ---------------------------------------------------------------------------


def test_write_report_formats_from_suffix(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(report, "build_report", lambda fmt="html", **kw: seen.append((fmt, kw)) or f"<{fmt}>")
    assert report.write_report(tmp_path / "a.md", scenario="kimi-k2.5-seed") == "md"
    (tmp_path / "sub").mkdir(exist_ok=True)
    assert report.write_report(tmp_path / "sub" / "a.html") == "html"
    assert (tmp_path / "a.md").read_text() == "<md>"
    assert (tmp_path / "sub" / "a.html").read_text() == "<html>"
    assert seen[0] == ("md", {"scenario": "kimi-k2.5-seed"})


def test_write_report_failure_leaves_no_file(monkeypatch, tmp_path):
    def boom(**kw):
        raise RuntimeError("model failed half way")

    monkeypatch.setattr(report, "build_report", boom)
    with pytest.raises(RuntimeError):
        report.write_report(tmp_path / "r.html")
    assert list(tmp_path.iterdir()) == []


def test_write_report_failed_rename_keeps_old_file(monkeypatch, tmp_path):
    import specsim.io.files

    out = tmp_path / "r.html"
    out.write_text("old report")
    monkeypatch.setattr(report, "build_report", lambda **kw: "new report")

    def no_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(specsim.io.files.os, "replace", no_replace)
    from specsim.errors import SpecsimError

    with pytest.raises((OSError, SpecsimError)):  # io.files may turn the OSError into a one-line SpecsimError
        report.write_report(out)
    assert out.read_text() == "old report"
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


# --- optional modules ------------------------------------------------------------------------


def test_sections_degrade_without_optional_modules(monkeypatch):
    monkeypatch.setitem(sys.modules, "specsim.analysis.training", None)  # import -> ImportError
    monkeypatch.setitem(sys.modules, "specsim.analysis.symbolic", None)
    d = report.collect_report(sweep_steps=range(1, 4), verify_tokens=[1, 3, 6])
    assert d.whatif is None and d.elasticities is None
    assert "not available" in d.whatif_error and "specsim.analysis.training" in d.whatif_error
    page = _page(d.to_html())
    assert page.count("not available") >= 2
    assert 'id="specsim-fig-training"' not in page and 'id="specsim-fig-tornado"' not in page
    assert 'id="specsim-fig-steps"' in page
    assert "## Sensitivity (tornado)" in d.to_markdown(svg=False)


# --- figures ---------------------------------------------------------------------------------


def test_cycle_breakdown_figure():
    p = specsim.predict()
    fig = F.cycle_breakdown_figure(p)
    assert isinstance(fig, go.Figure)
    assert fig.layout.barmode == "stack"
    assert len(fig.data) == len(p.phases_ms) + len(p.verify_breakdown_ms) + 1
    total = sum(t.x[0] for t in fig.data if t.legendgroup == "phases")
    assert total == pytest.approx(p.cycle_ms)


def test_steps_sweep_and_figure_mark_best():
    sw = F.steps_sweep(accept_lengths=[2.5], steps=range(1, 7))
    assert [c.scenario_profile for c in sw.curves] == [True, False]
    own = sw.curves[0]
    assert own.best_tok_s == max(own.tok_s)
    assert own.tok_s[own.steps.index(2)] == pytest.approx(specsim.predict(steps=2).tok_s)
    assert sw.curves[1].accept[sw.curves[1].steps.index(2)] == pytest.approx(2.5, abs=1e-6)
    fig = F.steps_figure(sweep=sw)
    stars = [t for t in fig.data if t.marker.symbol == "star" and t.x[0] is not None]
    assert [(s.x[0], s.y[0]) for s in stars] == [(c.best_steps, c.best_tok_s) for c in sw.curves]
    assert any(t.name.startswith("no speculation") for t in fig.data)
    assert any(t.name == "measured (recorded)" for t in fig.data)  # the seed's 94 tok/s at 2 steps
    with pytest.raises(SpecsimError):
        F.steps_sweep(accept_lengths=[3.5])  # tau above steps+1 at the scenario's 2 steps


def test_verify_figure_band_and_points():
    vc = specsim.VerifyCurve(scenario="t", tokens=[1, 2, 4], verify_ms=[10.0, 11.0, 13.0],
                             verify_ms_low=[9.0, 10.0, 12.0], verify_ms_high=[11.0, 12.0, 14.0],
                             breakdown_ms={"launch": [1.0, 1.0, 1.0]}, measured=[{"tokens": 2, "ms": 11.5}])
    fig = F.verify_figure(curve=vc, current_tokens=2)
    band = [t for t in fig.data if t.fill == "toself"]
    assert len(band) == 1 and list(band[0].y) == [11.0, 12.0, 14.0, 12.0, 10.0, 9.0]
    pts = [t for t in fig.data if t.name == "measured"]
    assert list(pts[0].x) == [2] and list(pts[0].y) == [11.5]
    default = F.verify_figure(tokens=range(1, 9))
    assert any(t.name == "measured" for t in default.data)  # provenance verify point of the seed


def test_training_figure_fake_whatif():
    w = SimpleNamespace(
        curve={"samples": [1e4, 1e5, 1e6], "tau": [2.0, 2.5, 3.0], "tau_low": [1.8, 2.2, 2.6],
               "tau_high": [2.2, 2.8, 3.3], "tok_s": [90.0, 110.0, 130.0]},
        tau_now=2.1, tau_target=3.0, gpu_hours_invested=1500.0, gpu_hours_saved_per_day=300.0, payback_days=5.0,
        samples_now=2e4, samples_target=1e6,
    )
    fig = F.training_figure(w)
    assert fig.layout.xaxis.type == "log"
    assert any(t.fill == "toself" for t in fig.data)
    assert any(t.yaxis == "y2" for t in fig.data)
    text = fig.layout.annotations[0].text
    assert "payback: 5.0 days" in text and "1,500 GPU-h invested" in text
    w.payback_days = float("inf")
    assert "payback: never" in F.training_figure(w).layout.annotations[0].text


def test_tornado_sorted_by_magnitude():
    fig = F.tornado_figure({"host": -0.1, "tau": 1.0, "allreduce": -0.3, "compute": 0.0})
    assert list(fig.data[0].x) == [1.0, -0.3, -0.1, 0.0]
    assert fig.data[0].y[0] == "accept length (tau)"


def test_figures_are_deterministic():
    a = F.steps_figure(steps=range(1, 4)).to_json()
    b = F.steps_figure(steps=range(1, 4)).to_json()
    assert a == b


def test_committed_founding_case_plan_is_what_the_script_writes(tmp_path):
    """examples/founding_case_plan.{md,html} are regenerated, never hand-kept: a physics change that moves
    a number must come with `python examples/make_founding_case_plan.py`."""
    root = Path(__file__).resolve().parents[1]
    script = root / "examples" / "make_founding_case_plan.py"
    subprocess.run([sys.executable, str(script), "--out-dir", str(tmp_path)], check=True, capture_output=True)
    for name in ("founding_case_plan.md", "founding_case_plan.html"):
        committed = (root / "examples" / name).read_bytes()
        assert (tmp_path / name).read_bytes() == committed, (
            f"examples/{name} is stale: run python examples/make_founding_case_plan.py")


def test_measurements_from_other_conditions_are_not_compared(monkeypatch):
    monkeypatch.setitem(sys.modules, "specsim.analysis.training", None)  # keep it fast: these sections are not under test
    monkeypatch.setitem(sys.modules, "specsim.analysis.symbolic", None)
    assert report.measurement_mismatch(specsim.build_scenario()) == ""
    assert report.measurement_mismatch(specsim.build_scenario(steps=3)) == ""  # steps: matched key by key
    # an override of the setup drops the recorded measurements (build_scenario), so nothing is compared
    d = report.collect_report(specsim.build_scenario(batch=4), sweep_steps=range(1, 4), verify_tokens=[1, 3])
    assert d.sweep.measured == [] and d.verify.measured == []
    assert all(row[2] == "—" for row in d.summary)
    assert "| spec_tok_s_at_2_steps | 94.0 |" not in d.to_markdown(svg=False)
    # a hand-edited scenario that keeps them but changes the setup is flagged as not comparable
    base = specsim.build_scenario()
    edited = base.model_copy(update={"workload": base.workload.model_copy(update={"batch": 4})})
    assert "workload" in report.measurement_mismatch(edited)
