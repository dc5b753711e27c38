"""Open a specsim HTML report in headless Chromium, offline, and check that it really renders.

    python tests/browser_check.py report.html [--screenshot shot.png]

Checks (one Chromium run, networking disabled):

* every ``specsim-fig-*`` figure div of the report holds a rendered ``<svg class="main-svg">``
  in the DOM dumped after ``--virtual-time-budget`` (plotly.js ran, offline);
* the browser log (``--enable-logging=stderr``) has no console errors (``Uncaught ...``,
  ``Failed to load resource``, ``net::ERR_...``): nothing failed and nothing was fetched;
* the ``--screenshot`` PNG is not blank: decoded with the standard library (zlib), it has
  enough distinct colours and enough non-background pixels.

Chromium comes from ``$SPECSIM_CHROMIUM``, ``/usr/bin/chromium`` or ``chromium`` on PATH.
Exit status: 0 all checks pass, 1 a check failed, 2 no Chromium / bad usage.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

FIG_PREFIX = "specsim-fig-"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
    # networking off: every proxied request fails fast, every host name fails to resolve
    "--proxy-server=127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=10000",
    "--window-size=1280,2000",
)
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
_CONSOLE = re.compile(r":CONSOLE[:(\]]")
_CONSOLE_ERROR = re.compile(r"Uncaught|\bError\b|\berror\b|Failed to load|net::ERR_|Refused to", re.I)


def find_chromium() -> str | None:
    """The Chromium binary: $SPECSIM_CHROMIUM, /usr/bin/chromium, or chromium on PATH (None if absent)."""
    env = os.environ.get("SPECSIM_CHROMIUM")
    if env:
        return env if (Path(env).exists() or shutil.which(env)) else None
    if Path("/usr/bin/chromium").exists():
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


# ---------------------------------------------------------------------------------------------
# DOM


class _FigureScan(HTMLParser):
    """Which figure divs (id prefix ``specsim-fig-``) contain an ``<svg class="main-svg">``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, str | None]] = []  # (tag, figure id opened by this tag)
        self.found: dict[str, bool] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        fid = a.get("id") or ""
        opened = fid if fid.startswith(FIG_PREFIX) else None
        if opened:
            self.found.setdefault(opened, False)
        if tag == "svg" and "main-svg" in (a.get("class") or "").split():
            for _, f in self.stack:
                if f:
                    self.found[f] = True
        if tag not in _VOID:
            self.stack.append((tag, opened))

    def handle_startendtag(self, tag, attrs):
        if tag not in _VOID:
            self.handle_starttag(tag, attrs)
            self.handle_endtag(tag)
        else:
            self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return


def rendered_figures(dom: str) -> dict[str, bool]:
    """figure div id -> whether a rendered plotly ``<svg class="main-svg">`` is inside it."""
    p = _FigureScan()
    p.feed(dom)
    p.close()
    return p.found


def figure_ids(html_text: str) -> list[str]:
    """The figure div ids a report declares (``<div id="specsim-fig-...">``), in order."""
    return list(dict.fromkeys(re.findall(r'<div id="(' + FIG_PREFIX + r'[\w-]+)"', html_text)))


# ---------------------------------------------------------------------------------------------
# PNG (standard library only)


def read_png(path: str | os.PathLike) -> tuple[int, int, int, list[bytes]]:
    """Decode an 8-bit, non-interlaced greyscale/RGB/RGBA PNG: (width, height, channels, rows)."""
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    if ihdr is None:
        raise ValueError(f"{path}: no IHDR chunk")
    width, height, depth, color, _, _, interlace = ihdr
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"{path}: unsupported PNG (bit depth {depth}, colour type {color}, interlace {interlace})")
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        off = y * (stride + 1)
        ftype = raw[off]
        line = bytearray(raw[off + 1:off + 1 + stride])
        if ftype == 1:  # Sub
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif ftype == 2:  # Up
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev, strict=True))
        elif ftype == 3:  # Average
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:  # Paeth
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = prev[i]
                c = prev[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        elif ftype != 0:
            raise ValueError(f"{path}: bad PNG filter {ftype} on row {y}")
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def png_stats(path: str | os.PathLike, step: int = 2) -> dict:
    """Size, distinct colours and the share of pixels unlike the background (most common colour)."""
    width, height, ch, rows = read_png(path)
    counts: dict[bytes, int] = {}
    for row in rows[::step]:
        for x in range(0, width, step):
            px = row[x * ch:(x + 1) * ch]
            counts[px] = counts.get(px, 0) + 1
    total = sum(counts.values())
    background = max(counts.values()) if counts else 0
    return {
        "width": width, "height": height, "bytes": Path(path).stat().st_size, "distinct_colors": len(counts),
        "non_background_fraction": (total - background) / total if total else 0.0,
    }


# ---------------------------------------------------------------------------------------------
# the check


@dataclass
class BrowserCheck:
    html: str
    chromium: str
    figures: dict[str, bool] = field(default_factory=dict)
    console: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    png: dict = field(default_factory=dict)
    screenshot: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        lines = [f"{'OK' if self.ok else 'FAIL'}: {self.html} in {self.chromium}"]
        lines += [f"  figure {k}: {'rendered' if v else 'NOT rendered'}" for k, v in self.figures.items()]
        lines.append(f"  console messages: {len(self.console)} ({len(self.console_errors)} errors)")
        if self.png:
            lines.append(f"  screenshot {self.screenshot}: {self.png}")
        lines += [f"  problem: {p}" for p in self.problems]
        return "\n".join(lines)


def run_chromium(binary: str, html_path: str | os.PathLike, png_path: str | os.PathLike,
                 timeout: float = 120.0) -> tuple[str, str]:
    """One headless run: (DOM after the virtual-time budget, browser log). Screenshot to png_path."""
    url = Path(html_path).resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="specsim-chromium-") as profile:
        cmd = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={png_path}", "--dump-dom", url]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              env={**os.environ, "LANG": "C.UTF-8"})
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout, proc.stderr


def check_report(html_path: str | os.PathLike, chromium: str | None = None, screenshot: str | os.PathLike | None = None,
                 min_colors: int = 16, min_non_background: float = 0.02, min_png_bytes: int = 20_000,
                 timeout: float = 120.0) -> BrowserCheck:
    """Render ``html_path`` offline in headless Chromium and run every check (see module doc)."""
    binary = chromium or find_chromium()
    if not binary:
        raise FileNotFoundError("no Chromium: set SPECSIM_CHROMIUM or install chromium")
    html_text = Path(html_path).read_text(encoding="utf-8")
    expected = figure_ids(html_text)
    res = BrowserCheck(html=str(html_path), chromium=binary)
    with tempfile.TemporaryDirectory(prefix="specsim-shot-") as tmp:
        png = Path(screenshot) if screenshot else Path(tmp) / "report.png"
        dom, log = run_chromium(binary, html_path, png, timeout=timeout)
        res.screenshot = str(png)
        if not expected:
            res.problems.append("the report declares no specsim-fig-* figure divs")
        found = rendered_figures(dom)
        res.figures = {fid: found.get(fid, False) for fid in expected}
        res.problems += [f"figure {fid} has no rendered <svg class=\"main-svg\">" for fid, ok in res.figures.items()
                         if not ok]
        res.console = [ln for ln in log.splitlines() if _CONSOLE.search(ln)]
        res.console_errors = [ln for ln in res.console if _CONSOLE_ERROR.search(ln)]
        res.console_errors += [ln for ln in log.splitlines() if "net::ERR_" in ln and ln not in res.console_errors]
        res.problems += [f"console error: {ln}" for ln in res.console_errors]
        if not png.exists():
            res.problems.append("no screenshot written")
        else:
            res.png = png_stats(png)
            if res.png["bytes"] < min_png_bytes:
                res.problems.append(f"screenshot only {res.png['bytes']} bytes (< {min_png_bytes}): blank page?")
            if res.png["distinct_colors"] < min_colors:
                res.problems.append(f"screenshot has {res.png['distinct_colors']} colours (< {min_colors}): blank?")
            if res.png["non_background_fraction"] < min_non_background:
                res.problems.append(f"screenshot {res.png['non_background_fraction']:.1%} non-background "
                                    f"(< {min_non_background:.0%}): blank?")
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html", help="report HTML file")
    ap.add_argument("--screenshot", help="keep the screenshot here (PNG)")
    ap.add_argument("--chromium", help="Chromium binary (default: $SPECSIM_CHROMIUM, /usr/bin/chromium, PATH)")
    args = ap.parse_args(argv)
    if not Path(args.html).is_file():
        print(f"error: {args.html}: no such file", file=sys.stderr)
        return 2
    try:
        res = check_report(args.html, chromium=args.chromium, screenshot=args.screenshot)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(res.summary())
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
