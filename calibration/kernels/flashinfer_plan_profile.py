"""Where FlashInfer's ``plan()`` host time goes, and the faster draft-decode plan SGLang calls.

Run on the GPU box with ``flashinfer-python`` importable, after ``flashinfer_tree.py`` (same shapes):

    python calibration/kernels/flashinfer_plan_profile.py OUT.json

- ``sync``: host us of ``x.item()`` on an idle GPU (this box's GPU->CPU round trip, the unit of the plan's syncs).
- ``decode_plan``: the tensor-core decode wrapper over B x topk rows, stock ``plan()`` against
  ``flashinfer.decode.fast_decode_plan`` given the host indptr (as SGLang's ``FlashInferMultiStepDraftBackend``
  passes one ``kv_indptr.cpu()`` to every step), and the C++ ``plan`` call alone.
- ``prefill_plan``: the custom-mask prefill ``plan()`` split into ``segment_packbits`` (mask packing), the
  host copies and the C++ ``plan``; cProfile's top entries at batch 1 and 64.
- ``decode_kernel``: the draft steps' decode kernel with tensor cores on and off, each request's topk branches on
  pages of their own or sharing the request's prefix pages, against the FA2 prefill wrapper over the same pages.
- ``fa3``: FlashInfer's FA3 causal prefill kernel (the family SGLang's FA3 chain path runs) at the same shapes.
"""

# ruff: noqa: B023  (every closure here is timed at once, inside the iteration that binds it)
from __future__ import annotations

import cProfile
import io
import json
import pstats
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from flashinfer_tree import HEAD_DIM, _gpu_ms, _host_us, _tree_mask  # noqa: E402

HQ, HKV = 32, 8


def _paged(rows: int, kv_len: int):
    pages = rows * kv_len
    kv_indptr = torch.arange(0, rows + 1, dtype=torch.int32, device="cuda") * kv_len
    kv_indices = torch.arange(0, pages, dtype=torch.int32, device="cuda")
    last = torch.ones(rows, dtype=torch.int32, device="cuda")
    return pages, kv_indptr, kv_indices, last


def main(path: str, budget_s: float = 400.0) -> None:
    import flashinfer
    from flashinfer.decode import fast_decode_plan
    from flashinfer.quantization import segment_packbits

    t0 = time.time()
    doc = {"name": "h200-flashinfer-plan-profile", "kind": "measured", "flashinfer": flashinfer.__version__,
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "command": "python calibration/kernels/flashinfer_plan_profile.py OUT.json", "rows": []}
    rows = doc["rows"]

    def save():
        doc["elapsed_s"] = round(time.time() - t0, 1)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)

    x = torch.ones(1, device="cuda")
    rows.append({"kind": "sync", "item_host_us": _host_us(lambda: x.item(), 200),
                 "small_cpu_copy_host_us": _host_us(lambda: torch.arange(65, device="cuda", dtype=torch.int32).cpu(), 200)})
    print(rows[-1], flush=True)

    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for ctx in (512, 2048):
        for n in (1, 4, 16, 64, 128, 256):
            kv_len = ctx + 2
            pages, kv_indptr, kv_indices, last = _paged(n, kv_len)
            w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=True)
            kw = dict(q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16, non_blocking=True)
            stock = _host_us(lambda: w.plan(kv_indptr, kv_indices, last, HQ, HKV, HEAD_DIM, 1, **kw))
            host_indptr = kv_indptr.cpu()
            fast = _host_us(lambda: fast_decode_plan(w, kv_indptr, kv_indices, last, HQ, HKV, HEAD_DIM, 1,
                                                     global_override_indptr_cpu=host_indptr, **kw))
            fast_sync = _host_us(lambda: fast_decode_plan(w, kv_indptr, kv_indices, last, HQ, HKV, HEAD_DIM, 1, **kw))
            rows.append({"kind": "decode_plan", "rows": n, "ctx": ctx, "stock_plan_host_us": stock,
                         "fast_decode_plan_host_us": fast, "fast_decode_plan_with_indptr_cpu_host_us": fast_sync})
            print(rows[-1], flush=True)
    save()

    for ctx in (512,):
        for batch in (1, 4, 16, 64):
            for qo in (7, 22):
                kv_len = ctx + qo
                pages, kv_indptr, kv_indices, last = _paged(batch, kv_len)
                qo_indptr = torch.arange(0, batch + 1, dtype=torch.int32, device="cuda") * qo
                mask = _tree_mask(batch, qo, kv_len)
                mask_indptr = torch.arange(0, batch + 1, dtype=torch.int32, device="cuda") * (qo * kv_len)
                w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend="fa2")

                def plan():
                    w.plan(qo_indptr, kv_indptr, kv_indices, last, HQ, HKV, HEAD_DIM, 1, custom_mask=mask,
                           q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16, non_blocking=True)

                full = _host_us(plan)
                pack = _host_us(lambda: segment_packbits(mask, mask_indptr, bitorder="little"))
                copies = _host_us(lambda: (qo_indptr.to("cpu"), kv_indptr.to("cpu"), last.to("cpu")))
                row = {"kind": "prefill_plan", "batch": batch, "ctx": ctx, "qo_len": qo, "custom_mask_plan_host_us": full,
                       "segment_packbits_host_us": pack, "three_cpu_copies_host_us": copies}
                if batch in (1, 64) and qo == 22:
                    pr = cProfile.Profile()
                    pr.enable()
                    for _ in range(20):
                        torch.cuda.synchronize()
                        plan()
                    pr.disable()
                    s = io.StringIO()
                    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(14)
                    row["cprofile_top_tottime_20_calls"] = s.getvalue()[-4000:]
                rows.append(row)
                print({k: v for k, v in row.items() if k != "cprofile_top_tottime_20_calls"}, flush=True)
    save()

    # the draft steps' decode kernel: tensor cores on / off, and each request's topk branches on distinct pages or
    # sharing the request's prefix pages (SGLang's draft: every branch reads the same prefix, then its own tokens)
    for ctx in (512, 2048):
        for batch in (16, 64):
            for topk in (1, 4):
                for shared in ((False, True) if topk > 1 else (False,)):
                    n = batch * topk
                    kv_len = ctx + 2
                    if shared:
                        prefix = torch.arange(batch * ctx, dtype=torch.int32, device="cuda").view(batch, 1, ctx)
                        own = batch * ctx + torch.arange(n * 2, dtype=torch.int32, device="cuda").view(batch, topk, 2)
                        kv_indices = torch.cat([prefix.expand(batch, topk, ctx), own], dim=2).reshape(-1)
                        pages = batch * ctx + n * 2
                    else:
                        pages = n * kv_len
                        kv_indices = torch.arange(pages, dtype=torch.int32, device="cuda")
                    kv_indptr = torch.arange(0, n + 1, dtype=torch.int32, device="cuda") * kv_len
                    last = torch.ones(n, dtype=torch.int32, device="cuda")
                    kv = torch.randn(pages, 2, 1, HKV, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
                    q = torch.randn(n, HQ, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
                    row = {"kind": "decode_kernel", "batch": batch, "topk": topk, "rows": n, "ctx": ctx,
                           "shared_prefix_pages": shared}
                    for tc in (True, False):
                        try:
                            w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=tc)
                            w.plan(kv_indptr, kv_indices, last, HQ, HKV, HEAD_DIM, 1, q_data_type=torch.bfloat16,
                                   kv_data_type=torch.bfloat16)
                            row[f"tensor_cores_{tc}_gpu_ms"] = _gpu_ms(lambda: w.run(q, kv))
                        except Exception as exc:  # noqa: BLE001
                            row[f"tensor_cores_{tc}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    # the prefill wrapper over the same pages, one query per row (what the tree verify's kernel does)
                    try:
                        w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend="fa2")
                        qo = torch.arange(0, n + 1, dtype=torch.int32, device="cuda")
                        w.plan(qo, kv_indptr, kv_indices, last, HQ, HKV, HEAD_DIM, 1, causal=True,
                               q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
                        row["prefill_wrapper_gpu_ms"] = _gpu_ms(lambda: w.run(q, kv))
                    except Exception as exc:  # noqa: BLE001
                        row["prefill_wrapper_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    rows.append(row)
                    print(row, flush=True)
    save()

    q_cache = {}
    for ctx in (512, 2048):
        for batch in (1, 16, 64):
            for qo in (4, 7, 22):
                if time.time() - t0 > budget_s:
                    save()
                    return
                kv_len = ctx + qo
                pages, kv_indptr, kv_indices, last = _paged(batch, kv_len)
                qo_indptr = torch.arange(0, batch + 1, dtype=torch.int32, device="cuda") * qo
                kv = torch.randn(pages, 2, 1, HKV, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
                q = q_cache.setdefault((batch, qo), torch.randn(batch * qo, HQ, HEAD_DIM, dtype=torch.bfloat16, device="cuda"))
                row = {"kind": "fa3", "batch": batch, "ctx": ctx, "qo_len": qo}
                try:
                    w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD", backend="fa3")
                    w.plan(qo_indptr, kv_indptr, kv_indices, last, HQ, HKV, HEAD_DIM, 1, causal=True,
                           q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
                    row["causal_fa3_gpu_ms"] = _gpu_ms(lambda: w.run(q, kv))
                except Exception as exc:  # noqa: BLE001
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                rows.append(row)
                print(row, flush=True)
                if "error" in row:
                    save()
                    return
    save()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 400.0)
