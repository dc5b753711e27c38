"""``specsim measure gpu --sections moe``: SGLang v0.5.6's fused MoE Triton kernel on this GPU.

The gate_up and down GEMMs at the six per-rank shapes of ``calibration/datasets/h200-sglang-fused-moe.json``
(Qwen3-30B-A3B TP1/2/4, GLM-4.7-Flash, DeepSeek-V3 and Kimi-K2 TP8; bf16 and fp8 block-wise; SGLang's
tuned tables where it ships one, else ``get_default_config``), each timed in a CUDA graph with the tiles
it ran, by the same code that measured that dataset (``calibration/kernels/sglang_fused_moe.py``, loaded
by path with its verbatim copy of the kernel). ``specsim predict --profile`` then fits the GPU's per-CTA
numbers and the kernel's bandwidth shares to these points (:mod:`specsim.analysis.moe_fit`). Needs
Triton (Linux wheels of torch bring it) and a CUDA GPU.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = "sglang_fused_moe.py"
QUICK_M = [1, 16, 128]


def kernels_dir() -> Path:
    """The folder of the kernel benchmark: a checkout's ``calibration/kernels``, else the installed package's."""
    here = Path(__file__).resolve()
    # a checkout (specsim/measure/ beside calibration/), then an install (specsim/calibration/ is package data)
    for folder in (here.parents[2] / "calibration" / "kernels", here.parents[1] / "calibration" / "kernels"):
        if (folder / SCRIPT).is_file():
            return folder
    raise FileNotFoundError(f"{SCRIPT} (calibration/kernels) is not part of this copy of specsim")


def kernel_script(filename: str, name: str):
    """A benchmark script of :func:`kernels_dir`, loaded by path once per process as module ``name``."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, kernels_dir() / filename)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[name]  # no half-loaded module for the next call
            raise
    return sys.modules[name]


def _script():
    return kernel_script(SCRIPT, "specsim_sglang_fused_moe")


def run_moe(c) -> dict:
    """The moe section: every (shape, GEMM, tokens) point, in the dataset's format."""
    if c.cpu:
        raise RuntimeError("the fused MoE kernel needs a CUDA GPU (Triton); skipped on the CPU")
    try:
        import triton  # noqa: F401
    except ImportError as exc:
        raise RuntimeError("the fused MoE kernel needs Triton (installed with torch's Linux CUDA wheels)") from exc
    mod = _script()
    shapes = mod.SHAPES[:1] + mod.SHAPES[-1:] if c.quick else mod.SHAPES
    ms = QUICK_M if c.quick else mod.M_VALUES
    c.progress.start("moe", len(shapes))
    points = []
    for shape in shapes:
        if c.deadline.passed():
            c.progress.log(f"moe: budget spent before {shape[0]}")
            break
        points += mod.measure([shape], ms, log=c.progress.log)
        c.progress.step(note=shape[0])
        c.free()
    c.progress.finish()
    if not points:  # every point failed or the budget ran out: no section (a profile may not hold an empty one)
        raise RuntimeError("no fused-MoE point was measured")
    return {"kernel": mod.KERNEL, "points": points}
