"""Torch-free helpers of the measure commands: atomic JSON output, progress lines, statistics."""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
import tempfile
import time
from datetime import datetime, timezone

import numpy as np

from . import MeasureError


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


PROG: str | None = None  # set by __main__ when run by path ("python specsim/measure/__main__.py")


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed, with the program shown as the module it ran (no host or user names)."""
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return "specsim measure"
    base = os.path.basename(argv[0])
    if PROG is not None:
        head = f"python3 {PROG}"
    elif base == "__main__.py":
        head = "python3 -m specsim.measure"
    elif base.startswith("specsim"):
        head = "specsim"
    else:
        head = base
    return " ".join([head] + [shlex.quote(a) for a in argv[1:]])


def stats(samples_us) -> dict:
    """Median and 10th/90th percentiles of repeated timings (microseconds)."""
    a = np.asarray(list(samples_us), dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        raise MeasureError("no finite timing samples")
    p10, med, p90 = np.percentile(a, [10, 50, 90])
    return {
        "us": round(float(med), 4),
        "p10_us": round(float(p10), 4),
        "p90_us": round(float(p90), 4),
        "n": int(a.size),
    }


def _clean(obj):
    """Make an object strict-JSON safe: numpy scalars to Python, non-finite floats to None."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dataset_provenance(what: str, prov: dict, gname: str, engine: str, timing_method: str, torch_version: str,
                       measured: bool) -> dict:
    """The provenance block of a measured dataset (``specsim measure forward`` / ``draft``): what ran, on which
    GPU, driver, CUDA and torch, how it was timed, the command and date."""
    return {
        "source": f"specsim measure {what} on the device machine, {prov['date_utc'][:10]}",
        "engine": engine,
        "gpu": f"{gname}, {prov.get('sm_count')} SMs, driver {prov.get('driver')}, CUDA {prov.get('cuda_runtime')}",
        "timing_method": timing_method,
        "command": prov["command"],
        "torch": torch_version,
        "date_utc": prov["date_utc"],
        "measured": measured,
        "hardware": prov,
    }


def atomic_write_json(path: str, obj) -> None:
    """Write JSON to a temporary file in the same folder, fsync, then os.replace onto ``path``."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise MeasureError(f"--out: folder {folder} does not exist")
    text = json.dumps(_clean(obj), indent=1, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class Progress:
    """Progress lines on stderr: ``measure gpu: gemm 120/560 (21%) 35 s`` at most every ``every`` s."""

    def __init__(self, title: str, every: float = 3.0, stream=None):
        self.title = title
        self.every = every
        self.stream = stream if stream is not None else sys.stderr
        self.t0 = time.monotonic()
        self._last = 0.0
        self.section = ""
        self.total = 0
        self.done = 0

    def start(self, section: str, total: int) -> None:
        self.section, self.total, self.done = section, max(int(total), 0), 0
        self._print(force=True)

    def step(self, n: int = 1, note: str = "") -> None:
        self.done += n
        self._print(note=note)

    def finish(self, note: str = "") -> None:
        self._print(force=True, note=note or "done")

    def log(self, msg: str) -> None:
        print(f"{self.title}: {msg}", file=self.stream, flush=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def _print(self, force: bool = False, note: str = "") -> None:
        now = time.monotonic()
        if not force and now - self._last < self.every and self.done < self.total:
            return
        self._last = now
        pct = f" ({100 * self.done // self.total}%)" if self.total else ""
        width = 20
        fill = int(width * self.done / self.total) if self.total else 0
        bar = "#" * fill + "." * (width - fill)
        tail = f" {note}" if note else ""
        print(
            f"{self.title}: {self.section} [{bar}] {self.done}/{self.total}{pct} {now - self.t0:.0f} s{tail}",
            file=self.stream,
            flush=True,
        )


class Deadline:
    """A wall-clock budget: sections stop taking new points once it has passed."""

    def __init__(self, seconds: float | None):
        self.t_end = None if not seconds or seconds <= 0 else time.monotonic() + float(seconds)

    def left(self) -> float:
        return math.inf if self.t_end is None else self.t_end - time.monotonic()

    def passed(self) -> bool:
        return self.left() <= 0


def parse_int_list(text: str, field: str) -> list[int]:
    try:
        vals = [int(x) for x in str(text).replace(" ", "").split(",") if x]
    except ValueError:
        raise MeasureError(f"{field}: got {text!r}; expected comma-separated integers, e.g. 1,2,4") from None
    if not vals or any(v <= 0 for v in vals):
        raise MeasureError(f"{field}: got {text!r}; expected positive integers")
    return vals
