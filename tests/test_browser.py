"""The HTML report renders offline in a real browser (headless Chromium): figures, console, pixels.

Skipped only when no Chromium is found AND the CI environment variable is unset; under CI a
missing browser is a failure, so the check cannot silently stop running.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

import specsim.output.report as report

_spec = importlib.util.spec_from_file_location("browser_check", Path(__file__).with_name("browser_check.py"))
browser_check = sys.modules.setdefault("browser_check", importlib.util.module_from_spec(_spec))
if not hasattr(browser_check, "check_report"):
    _spec.loader.exec_module(browser_check)


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = browser_check.find_chromium()
    if binary is None:
        if _in_ci():
            pytest.fail("CI is set but no Chromium was found (install Debian's chromium or set SPECSIM_CHROMIUM)")
        pytest.skip("no Chromium (set SPECSIM_CHROMIUM or install chromium); CI is not set")
    return binary


def test_report_renders_offline_in_chromium(chromium, tmp_path):
    out = tmp_path / "report.html"
    report.write_report(out)
    shot = tmp_path / "report.png"
    res = browser_check.check_report(out, chromium=chromium, screenshot=shot)
    assert res.ok, res.summary()
    assert set(res.figures) == {report.figure_div_id(n) for n in ("cycle", "steps", "verify", "training", "tornado")}
    assert all(res.figures.values())
    assert res.console_errors == []
    assert shot.stat().st_size > 20_000
    assert res.png["distinct_colors"] >= 16 and res.png["non_background_fraction"] > 0.02


def test_checker_catches_broken_pages(chromium, tmp_path):
    # a figure div that never renders and a script error must both be reported
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><h1>x</h1><div id="specsim-fig-x"></div>'
                    "<script>undefinedFunction();</script></body></html>", encoding="utf-8")
    res = browser_check.check_report(page, chromium=chromium, min_png_bytes=0)
    assert not res.ok
    assert res.figures == {"specsim-fig-x": False}
    assert any("Uncaught" in e for e in res.console_errors), res.summary()
    assert any("blank" in p for p in res.problems)  # near-white page


def test_png_decoder_roundtrip(tmp_path):
    import struct
    import zlib

    w, h = 3, 2
    rows = [bytes([255, 0, 0, 0, 255, 0, 0, 0, 255]), bytes([9, 9, 9, 9, 9, 9, 9, 9, 9])]
    raw = b"\x00" + rows[0] + b"\x02" + bytes((b - a) & 0xFF for a, b in zip(rows[0], rows[1], strict=True))

    def chunk(k, d):
        return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d) & 0xFFFFFFFF)

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    path = tmp_path / "t.png"
    path.write_bytes(png)
    assert browser_check.read_png(path) == (3, 2, 3, rows)
    stats = browser_check.png_stats(path, step=1)
    assert stats["distinct_colors"] == 4 and stats["non_background_fraction"] == pytest.approx(0.5)
