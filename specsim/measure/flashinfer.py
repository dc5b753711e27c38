"""``specsim measure gpu --sections flashinfer``: FlashInfer's tree verify kernel on this GPU, when installed.

SGLang verifies a tree (topk > 1) of a model without MLA with FlashInfer's FA2 prefill and a bit-packed custom mask.
This section times that kernel and the causal one (and each ``plan()`` on this host) over B requests x k query
tokens on ctx cached tokens for two GQA shapes, by the code that measured
``calibration/datasets/h200-flashinfer-tree.json`` (``calibration/kernels/flashinfer_tree.py``, loaded by path).
``specsim predict --profile`` then fits the engine's three tree-kernel numbers to these points
(:mod:`specsim.analysis.tree_fit`). Needs ``flashinfer-python`` (it JIT-compiles its kernels on first use: minutes)
and a CUDA GPU.
"""

from __future__ import annotations

import time

from .moe import kernel_script

SCRIPT = "flashinfer_tree.py"
QUICK = dict(batches=(1, 16, 64), ctxs=(512,), qo_lens=(4, 22))


def _script():
    return kernel_script(SCRIPT, "specsim_flashinfer_tree")


def run_flashinfer(c) -> dict:
    """The flashinfer section: every (shape, ctx, batch, k) point, in the dataset's row format."""
    if c.cpu:
        raise RuntimeError("FlashInfer's kernels need a CUDA GPU; skipped on the CPU")
    try:
        import flashinfer
    except ImportError as exc:
        raise RuntimeError("FlashInfer is not installed (pip install flashinfer-python, the release your engine "
                           "pins); the tree verify kernel was not measured") from exc
    mod = _script()
    kw = QUICK if c.quick else {}
    rows: list = []
    left = c.deadline.left()
    deadline = time.time() + (left if left != float("inf") else 3600.0)
    c.progress.start("flashinfer", 1)
    mod.prefill_rows(flashinfer, rows, deadline, log=c.progress.log, **kw)
    c.progress.finish(note=f"{len(rows)} points")
    if not rows:
        raise RuntimeError("no FlashInfer point was measured")
    return {"kernel": "flashinfer BatchPrefillWithPagedKVCacheWrapper fa2, custom mask and causal",
            "flashinfer": getattr(flashinfer, "__version__", "?"), "points": rows}
