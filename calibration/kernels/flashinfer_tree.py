"""FlashInfer's tree path as SGLang runs it on Hopper (topk > 1 on a model without MLA): host time of each
``plan()`` and GPU time of the kernels, against the causal kernels a chain runs.

Run on the GPU box with ``flashinfer-python`` importable (JIT; it compiles its kernels with the box's nvcc):

    python calibration/kernels/flashinfer_tree.py OUT.json [BUDGET_S]
    python calibration/kernels/flashinfer_tree.py OUT.json --heads 20x20 --head-dim 256 --batch 1,32 --ctx 512,2048 \
        --qo 1,6 --decode-topk 1 --no-decode-tensor-cores   # another shape (here GLM-4.7-Flash run as MHA)

What it times, for the GQA shapes of the presets' 8B and 70B-TP4 targets (32/8 and 16/2 heads, head dim 128,
bf16, page size 1 as SGLang allocates):

- ``prefill``: ``BatchPrefillWithPagedKVCacheWrapper(backend="fa2")`` over B requests x k queries on
  ``ctx`` cached tokens each: ``plan()`` host time (GPU idle, median of repeats) with the packed custom
  (tree) mask as SGLang's TARGET_VERIFY passes it, and the kernel's GPU time from a CUDA graph of repeated
  runs, with the custom mask and with ``causal=True`` (the same FA2 kernel family), and FA3 causal where
  it compiles.
- ``decode``: ``BatchDecodeWithPagedKVCacheWrapper`` (tensor cores, as SGLang picks for a GQA group >= 4)
  over B x topk rows: ``plan()`` host time and kernel GPU time (the draft steps' attention).

Nothing here is modeled; each row is a measurement on the box the provenance block names.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch

HEADS = {"32q8kv": (32, 8), "16q2kv": (16, 2)}  # Llama-3.1-8B / Qwen3-8B; Llama-3-70B at TP4
HEAD_DIM = 128
BATCHES = (1, 4, 16, 32, 64)
CTXS = (512, 2048)
QO_LENS = (4, 7, 22)  # chain of 3 (+ root), tree k = 6, tree k = 21 (SpecDecode-Bench's shapes)
TOPKS = (1, 2, 4)
MODES = tuple(os.environ.get("FI_MODES", "custom_mask,causal").split(","))  # add causal_fa3 for FA3's causal kernel
PLAN_REPEATS = 30
GRAPH_RUNS = 20


def _gpu_ms(fn, runs: int = GRAPH_RUNS, replays: int = 10) -> float:
    """GPU ms of one ``fn()``: a CUDA graph of ``runs`` calls replayed ``replays`` times, timed by events
    (where capture fails: 100 back-to-back calls, negative to mark that host launch time may be in it)."""
    try:
        return _graph_ms(fn, runs, replays)
    except Exception:  # noqa: BLE001
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(100):
            fn()
        b.record()
        torch.cuda.synchronize()
        return -a.elapsed_time(b) / 100


def _graph_ms(fn, runs: int, replays: int) -> float:
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(runs):
            fn()
    g.replay()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays):
        g.replay()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / (runs * replays)


def _host_us(fn, repeats: int = PLAN_REPEATS) -> float:
    """Median host us of ``fn()`` with the GPU idle before each call."""
    ts = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


def _tree_mask(batch: int, qo_len: int, kv_len: int) -> torch.Tensor:
    """A flat boolean mask (SGLang's layout: per request qo_len x kv_len, row-major): every query sees the whole
    prefix and, inside the draft block, itself and the earlier tokens (a chain-shaped tree: the values do not
    change the FA2 custom-mask kernel's work)."""
    prefix = kv_len - qo_len
    one = torch.ones(qo_len, kv_len, dtype=torch.bool)
    one[:, prefix:] = torch.tril(torch.ones(qo_len, qo_len, dtype=torch.bool))
    return one.flatten().repeat(batch).cuda()


def prefill_rows(flashinfer, out: list, deadline: float, batches=BATCHES, ctxs=CTXS, qo_lens=QO_LENS,
                 log=print, heads=None, head_dim: int = HEAD_DIM) -> None:
    """Append one row per (shape, ctx, batch, k) to ``out`` until ``deadline`` (time.time())."""
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for hname, (hq, hkv) in (heads or HEADS).items():
        for ctx in ctxs:
            for batch in batches:
                for qo in qo_lens:
                    if time.time() > deadline:
                        return
                    kv_len = ctx + qo
                    pages = batch * kv_len
                    kv = torch.randn(pages, 2, 1, hkv, head_dim, dtype=torch.bfloat16, device="cuda")
                    q = torch.randn(batch * qo, hq, head_dim, dtype=torch.bfloat16, device="cuda")
                    qo_indptr = torch.arange(0, batch + 1, dtype=torch.int32, device="cuda") * qo
                    kv_indptr = torch.arange(0, batch + 1, dtype=torch.int32, device="cuda") * kv_len
                    kv_indices = torch.arange(0, pages, dtype=torch.int32, device="cuda")
                    last = torch.ones(batch, dtype=torch.int32, device="cuda")
                    mask = _tree_mask(batch, qo, kv_len)
                    row = {"kernel": "prefill_paged", "heads": hname, "num_qo_heads": hq, "num_kv_heads": hkv,
                           "head_dim": head_dim, "batch": batch, "ctx": ctx, "qo_len": qo, "page_size": 1}
                    for mode in MODES:
                        backend = "fa3" if mode == "causal_fa3" else "fa2"
                        try:
                            w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend=backend)
                            kw = dict(custom_mask=mask) if mode == "custom_mask" else dict(causal=True)

                            plan = functools.partial(w.plan, qo_indptr, kv_indptr, kv_indices, last, hq, hkv, head_dim, 1,
                                                     q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16,
                                                     non_blocking=True, **kw)
                            row[f"{mode}_plan_host_us"] = _host_us(plan)
                            plan()
                            row[f"{mode}_gpu_ms"] = _gpu_ms(functools.partial(w.run, q, kv))
                        except Exception as exc:  # noqa: BLE001 - a backend that does not build is recorded
                            row[f"{mode}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    out.append(row)
                    log(json.dumps(row))
                    del kv, q, mask


def decode_rows(flashinfer, out: list, deadline: float, batches=BATCHES, ctxs=CTXS, topks=TOPKS, heads=None,
                head_dim: int = HEAD_DIM, tensor_cores: bool = True) -> None:
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    hname, (hq, hkv) = next(iter((heads or {"32q8kv": HEADS["32q8kv"]}).items()))
    for ctx in ctxs:
        for batch in batches:
            for topk in topks:
                if time.time() > deadline:
                    return
                rows_n = batch * topk
                kv_len = ctx + 2
                pages = rows_n * kv_len
                kv = torch.randn(pages, 2, 1, hkv, head_dim, dtype=torch.bfloat16, device="cuda")
                q = torch.randn(rows_n, hq, head_dim, dtype=torch.bfloat16, device="cuda")
                kv_indptr = torch.arange(0, rows_n + 1, dtype=torch.int32, device="cuda") * kv_len
                kv_indices = torch.arange(0, pages, dtype=torch.int32, device="cuda")
                last = torch.ones(rows_n, dtype=torch.int32, device="cuda")
                row = {"kernel": "decode_paged", "heads": hname, "num_qo_heads": hq, "num_kv_heads": hkv,
                       "head_dim": head_dim, "batch": batch, "topk": topk, "rows": rows_n, "ctx": ctx, "page_size": 1,
                       "use_tensor_cores": tensor_cores}
                try:
                    w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=tensor_cores)

                    plan = functools.partial(w.plan, kv_indptr, kv_indices, last, hq, hkv, head_dim, 1,
                                             q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16, non_blocking=True)
                    row["plan_host_us"] = _host_us(plan)
                    plan()
                    row["gpu_ms"] = _gpu_ms(functools.partial(w.run, q, kv))
                except Exception as exc:  # noqa: BLE001
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                out.append(row)
                print(json.dumps(row), flush=True)
                del kv, q


def _cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main(path: str, budget_s: float = 480.0, heads=None, head_dim: int = HEAD_DIM, batches=BATCHES, ctxs=CTXS,
         qo_lens=QO_LENS, decode_topks=TOPKS, decode_tensor_cores: bool = True) -> None:
    """Time the prefill (tree verify) calls, then the decode calls; ``heads`` ({name: (query, KV heads)}) and
    ``head_dim``: another head shape in place of the presets' (:data:`HEADS`)."""
    t0 = time.time()
    import flashinfer

    out: list = []
    doc = {
        "name": "h200-flashinfer-tree",
        "kind": "measured",
        "description": __doc__.strip().splitlines()[0],
        "provenance": {
            "gpu": torch.cuda.get_device_name(0),
            "driver": subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                     capture_output=True, text=True).stdout.strip(),
            "torch": torch.__version__, "cuda": torch.version.cuda, "flashinfer": flashinfer.__version__,
            "python": platform.python_version(), "host_cpu": _cpu_model(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": "python calibration/kernels/flashinfer_tree.py " + " ".join([os.path.basename(path)] + sys.argv[2:]),
            "method": "plan(): median host us of 30 calls, torch.cuda.synchronize() before each (GPU idle); "
                      "kernels: CUDA graph of 20 run() calls replayed 10 times, CUDA events",
        },
        "rows": out,
    }

    def save():
        doc["elapsed_s"] = round(time.time() - t0, 1)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)

    try:
        prefill_rows(flashinfer, out, t0 + budget_s * 0.7, batches=batches, ctxs=ctxs, qo_lens=qo_lens, heads=heads,
                     head_dim=head_dim)
        save()
        decode_rows(flashinfer, out, t0 + budget_s, batches=batches, ctxs=ctxs, topks=decode_topks, heads=heads,
                    head_dim=head_dim, tensor_cores=decode_tensor_cores)
    finally:
        save()


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("budget_s", nargs="?", type=float, default=480.0)
    ap.add_argument("--heads", default=None, help="query x KV heads per GPU, e.g. 20x20 (default: the presets' 32x8, 16x2)")
    ap.add_argument("--head-dim", type=int, default=HEAD_DIM)
    ap.add_argument("--batch", type=_ints, default=BATCHES)
    ap.add_argument("--ctx", type=_ints, default=CTXS)
    ap.add_argument("--qo", type=_ints, default=QO_LENS, help="query tokens per request of the prefill calls")
    ap.add_argument("--decode-topk", type=_ints, default=TOPKS)
    ap.add_argument("--no-decode-tensor-cores", action="store_true",
                    help="the decode wrapper without tensor cores (SGLang's pick for a GQA group below 4)")
    a = ap.parse_args()
    heads = None
    if a.heads:
        hq, hkv = (int(x) for x in a.heads.lower().split("x"))
        heads = {f"{hq}q{hkv}kv": (hq, hkv)}
    main(a.out, a.budget_s, heads=heads, head_dim=a.head_dim, batches=a.batch, ctxs=a.ctx, qo_lens=a.qo,
         decode_topks=a.decode_topk, decode_tensor_cores=not a.no_decode_tensor_cores)
