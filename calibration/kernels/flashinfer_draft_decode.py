"""The draft steps' decode kernel as SGLang's FlashInfer tree path sets it up: CUDA-graph wrappers, fast_decode_plan.

SGLang 0.5.9 (``layers/attention/flashinfer_backend.py``) decodes a tree's draft steps with
``BatchDecodeWithPagedKVCacheWrapper(use_cuda_graph=True, use_tensor_cores=should_use_tensor_core(...))`` -- tensor
cores for a bf16 KV cache with a GQA group >= 4 -- and re-plans it each step with ``fast_decode_plan`` given one host
indptr. This times that kernel (a CUDA graph of repeated runs) with tensor cores on and off over B x topk branches
sharing each request's prefix pages (page size 1), so it tells whether the 3-4x gap
``h200-flashinfer-plan-profile.json`` saw between the two outside graph-mode wrappers is what SGLang runs.

    python calibration/kernels/flashinfer_draft_decode.py OUT.json [--batch 16,64] [--topk 1,4] [--ctx 512,2048]
        [--capacity-rows N] [--backend fa2]

``--capacity-rows``: the rows the graph-mode wrapper's index buffers are sized for (SGLang sizes them once, for its
largest captured batch x topk); by default each point's own rows.
"""

# ruff: noqa: B023  (every closure here is timed at once, inside the iteration that binds it)
from __future__ import annotations

import json
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from flashinfer_tree import HEAD_DIM, _gpu_ms, _host_us  # noqa: E402

HQ, HKV = 32, 8


def main(path: str, batches=(16, 64), topks=(1, 4), ctxs=(512, 2048), capacity_rows: int | None = None,
         backend: str | None = None) -> None:
    import flashinfer
    from flashinfer.decode import fast_decode_plan

    doc = {"name": "h200-flashinfer-draft-decode", "kind": "measured", "flashinfer": flashinfer.__version__,
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": " ".join(["python", "calibration/kernels/flashinfer_draft_decode.py"] + sys.argv[1:]), "rows": []}
    for ctx in ctxs:
        for batch in batches:
            for topk in topks:
                n = batch * topk
                cap = max(n, capacity_rows or n)
                kv_len = ctx + 2
                prefix = torch.arange(batch * ctx, dtype=torch.int32, device="cuda").view(batch, 1, ctx)
                own = batch * ctx + torch.arange(n * 2, dtype=torch.int32, device="cuda").view(batch, topk, 2)
                kv_indices = torch.cat([prefix.expand(batch, topk, ctx), own], dim=2).reshape(-1).contiguous()
                pages = batch * ctx + n * 2
                kv_indptr = torch.arange(0, n + 1, dtype=torch.int32, device="cuda") * kv_len
                last = torch.ones(n, dtype=torch.int32, device="cuda")
                kv = torch.randn(pages, 2, 1, HKV, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
                q = torch.randn(n, HQ, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
                row = {"batch": batch, "topk": topk, "rows": n, "ctx": ctx, "shared_prefix_pages": True, "capacity_rows": cap,
                       "backend": backend or "default"}
                indptr_buf = torch.zeros(cap + 1, dtype=torch.int32, device="cuda")
                indices_buf = torch.zeros(max(kv_indices.numel(), cap * kv_len), dtype=torch.int32, device="cuda")
                last_buf = torch.ones(cap, dtype=torch.int32, device="cuda")
                for tc in (True, False):
                    try:
                        ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
                        extra = {} if backend is None else {"backend": backend}  # SGLang 0.5.9 passes "fa2"
                        w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
                            ws, "NHD", use_cuda_graph=True, use_tensor_cores=tc, **extra,
                            paged_kv_indptr_buffer=indptr_buf.clone(), paged_kv_indices_buffer=indices_buf.clone(),
                            paged_kv_last_page_len_buffer=last_buf.clone())
                        host_indptr = kv_indptr.cpu()
                        kw = dict(q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16, non_blocking=True,
                                  global_override_indptr_cpu=host_indptr)
                        # the stock plan once (it builds the kernel module; SGLang's capture does the same), then
                        # fast_decode_plan as every replay calls it
                        w.plan(kv_indptr, kv_indices, last, HQ, HKV, HEAD_DIM, 1, q_data_type=torch.bfloat16,
                               kv_data_type=torch.bfloat16)
                        fast_decode_plan(w, kv_indptr, kv_indices, last, HQ, HKV, HEAD_DIM, 1, **kw)
                        row[f"tc_{tc}_fast_plan_host_us"] = _host_us(
                            lambda w=w, kw=kw: fast_decode_plan(w, kv_indptr, kv_indices, last, HQ, HKV, HEAD_DIM, 1, **kw))
                        row[f"tc_{tc}_graph_gpu_ms"] = _gpu_ms(lambda w=w: w.run(q, kv))
                    except Exception as exc:  # noqa: BLE001 - recorded
                        row[f"tc_{tc}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                doc["rows"].append(row)
                print(row, flush=True)
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(doc, f, indent=1)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--batch", type=_ints, default=(16, 64))
    ap.add_argument("--topk", type=_ints, default=(1, 4))
    ap.add_argument("--ctx", type=_ints, default=(512, 2048))
    ap.add_argument("--capacity-rows", type=int, default=None)
    ap.add_argument("--backend", default=None, help="the wrapper's backend (SGLang 0.5.9: fa2; default: the wrapper's own)")
    a = ap.parse_args()
    main(a.out, a.batch, a.topk, a.ctx, a.capacity_rows, a.backend)
