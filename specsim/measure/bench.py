"""Timing with torch (imported by the measure commands only, never at package import).

``Bench.time(fn)`` warms ``fn`` up, estimates one call, then captures ``iters`` calls into one CUDA
graph and times ``repeats`` replays with CUDA events: launch overhead disappears and each sample
is the mean of ``iters`` back-to-back calls. ``fn(i)`` receives the call index so it can rotate
over several copies of its operands (``rotation_count``) and stay out of the 60 MB L2. On the CPU
(``--device cpu``, for testing the code paths only) the same loop runs on the wall clock.
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
import time

from . import MeasureError
from .common import Progress, command_line, stats, utc_now

# Bytes of operand copies to rotate over so that repeated calls miss the L2 (H200: 60 MB).
DEFAULT_ROTATE_BYTES = 4 * 60 * 2**20
MAX_ROTATE = 1024


def import_torch(device: str = "cuda"):
    """torch, or MeasureError with one line (no torch, or no CUDA GPU for a GPU measurement)."""
    try:
        import torch
    except ImportError:
        raise MeasureError(
            "torch is not installed; the measure commands need PyTorch with CUDA "
            "(pip install 'specsim[measure]', or run them where torch is installed)"
        ) from None
    if device == "cuda":
        if not torch.cuda.is_available():
            raise MeasureError(
                "no CUDA GPU is visible to torch (torch.cuda.is_available() is False); these benchmarks time a GPU"
            )
    elif device != "cpu":
        raise MeasureError(f"--device: got {device!r}; expected cuda (or cpu, only to test the code paths)")
    return torch


def rotation_count(nbytes: int, rotate_bytes: int = DEFAULT_ROTATE_BYTES) -> int:
    """Copies of an operand of ``nbytes`` to cycle through so the working set exceeds the L2."""
    if nbytes <= 0:
        return 1
    return int(min(MAX_ROTATE, max(1, math.ceil(rotate_bytes / nbytes))))


class Bench:
    def __init__(
        self,
        torch,
        device: str,
        repeats: int = 15,
        target_us: float = 2000.0,
        warmup: int = 2,
        max_iters: int = 2048,
        graph: bool = True,
    ):
        self.torch = torch
        self.device = device
        self.cuda = device == "cuda"
        self.repeats = max(3, int(repeats))
        self.target_us = float(target_us)
        self.warmup = max(1, int(warmup))
        self.max_iters = int(max_iters)
        self.graph = graph and self.cuda

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    # -- one estimate of a call, eager ------------------------------------------------------
    def _estimate_us(self, fn, n: int = 3) -> float:
        torch = self.torch
        if self.cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for i in range(n):
                fn(i)
            e1.record()
            e1.synchronize()
            return e0.elapsed_time(e1) * 1e3 / n
        t0 = time.perf_counter()
        for i in range(n):
            fn(i)
        return (time.perf_counter() - t0) * 1e6 / n

    def _iters(self, est_us: float, rotate: int) -> int:
        it = int(max(1, min(self.max_iters, math.ceil(self.target_us / max(est_us, 0.5)))))
        if rotate > 1 and it < rotate and est_us * rotate <= 20000:
            it = min(rotate, self.max_iters)
        return it

    def time(self, fn, rotate: int = 1, graph: bool | None = None, iters: int | None = None) -> dict:
        """Stats of one call of ``fn`` in microseconds (median, p10, p90 over repeats)."""
        torch = self.torch
        use_graph = self.graph if graph is None else (graph and self.cuda)
        if self.cuda:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for i in range(self.warmup):
                    fn(i)
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
        else:
            for i in range(self.warmup):
                fn(i)
        est = self._estimate_us(fn)
        n = iters or self._iters(est, rotate)
        method = "eager"
        samples = None
        if use_graph:
            try:
                samples = self._graph_samples(fn, n)
                method = "cuda-graph"
            except Exception as exc:  # not capturable: fall back to eager events, say so
                method = f"eager (graph capture failed: {type(exc).__name__})"
                torch.cuda.synchronize()
        if samples is None:
            samples = self._eager_samples(fn, n)
        out = stats(samples)
        out["iters"] = n
        out["method"] = method
        return out

    def _graph_samples(self, fn, n: int) -> list[float]:
        torch = self.torch
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(g):
                for i in range(n):
                    fn(i)
            g.replay()
            torch.cuda.synchronize()
            evs = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                for _ in range(self.repeats)
            ]
            for a, b in evs:
                a.record()
                g.replay()
                b.record()
            torch.cuda.synchronize()
            return [a.elapsed_time(b) * 1e3 / n for a, b in evs]
        finally:
            del g

    def _eager_samples(self, fn, n: int) -> list[float]:
        torch = self.torch
        out = []
        if self.cuda:
            evs = [
                (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                for _ in range(self.repeats)
            ]
            for a, b in evs:
                a.record()
                for i in range(n):
                    fn(i)
                b.record()
            torch.cuda.synchronize()
            return [a.elapsed_time(b) * 1e3 / n for a, b in evs]
        for _ in range(self.repeats):
            t0 = time.perf_counter()
            for i in range(n):
                fn(i)
            out.append((time.perf_counter() - t0) * 1e6 / n)
        return out


def _nvidia_smi(fields: list[str]) -> dict:
    try:
        r = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=15,
        )
        if r.returncode != 0:
            return {}
        vals = [v.strip() for v in r.stdout.strip().splitlines()[0].split(",")]
        return dict(zip(fields, vals))
    except Exception:
        return {}


def gpu_state() -> dict:
    """Clocks, power limit, temperature and performance state, read (never set) via nvidia-smi."""
    return _nvidia_smi(
        ["clocks.sm", "clocks.max.sm", "clocks.mem", "power.draw", "power.limit", "temperature.gpu", "pstate"]
    )


def provenance(torch, device: str, tool: str, argv: list[str] | None = None) -> dict:
    """What ran, where (GPU, driver, CUDA, torch), when and how: no host or user names."""
    p = {
        "tool": tool,
        "command": command_line(argv),
        "date_utc": utc_now(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device,
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        smi = _nvidia_smi(["driver_version", "name", "memory.total"])
        p.update(
            {
                "gpu_name": props.name,
                "sm_count": int(props.multi_processor_count),
                "compute_capability": f"{props.major}.{props.minor}",
                "memory_bytes": int(props.total_memory),
                "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0) or None,
                "driver": smi.get("driver_version", "unknown"),
                "cuda_runtime": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                "visible_gpus": torch.cuda.device_count(),
                "gpu_state_start": gpu_state(),
            }
        )
    else:
        p.update(
            {
                "gpu_name": "cpu (code-path test only; numbers are not a GPU profile)",
                "sm_count": 0,
                "driver": "none",
                "cuda_runtime": None,
                "cpu_threads": os.cpu_count(),
            }
        )
    return p


def start_model_measure(what: str, model: str, configs: dict, tiny: dict, device: str, argv=None):
    """The common start of ``measure forward`` / ``measure draft``: the preset model checked, torch
    imported, its config (toy sizes off CUDA), TF32 off, a progress line and the run's provenance.
    Returns ``(torch, cuda, cfg, progress, provenance)``."""
    if model not in configs:
        raise MeasureError(f"--model: got {model!r}; expected one of {', '.join(configs)}")
    torch = import_torch(device)
    cuda = device == "cuda"
    cfg = dict(configs[model])
    if not cuda:
        cfg.update(tiny[model])
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
    return torch, cuda, cfg, Progress(f"measure {what}"), provenance(torch, device, f"specsim measure {what}", argv)
