"""Host cost of vLLM V0's batch-expansion scorer per verify row and context token (CPU only).

vLLM 0.7.x (the V0 engine, its default) scores draft tokens with ``BatchExpansionTop1Scorer`` whenever
CUDA graphs are on (``spec_decode/spec_decode_worker.py``: "Disabling MQA scorer as the target model is
not running in eager mode"). ``_expand_batch`` turns each request into ``k + 1`` single-token sequences,
copying the request's whole token list into a new ``SequenceData`` per row (``batch_expansion.py``
``_create_single_target_seq_group_metadata``), so its host time grows with rows x context. This script
times that call (and the two ``.tolist()`` of ``score_proposals``) on the released code and takes the
median over points of us per row x context token: the ``vllm-v0`` engine preset's
``host_expansion_us_per_row_token``.

    pip download vllm==0.7.3 --no-deps -d /tmp/w && mkdir /tmp/vllm073 && \\
        unzip -q /tmp/w/vllm-0.7.3-cp38-abi3-manylinux1_x86_64.whl 'vllm/*' -d /tmp/vllm073
    pip install torch --index-url https://download.pytorch.org/whl/cpu   # plus vllm's pure-Python needs
    python calibration/host/bench_vllm_v0_batch_expansion.py --vllm-src /tmp/vllm073 [--out FILE.json]

The timings are this machine's CPU; the one that ran a published benchmark may be faster or slower.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import platform
import random
import statistics
import sys
import time

K_DRAFT = 2  # draft tokens per request: rows per request = K_DRAFT + 1 (the EAGLE-3 paper's vLLM chain of 2)
PROMPT_LEN = 150
CONTEXTS = (200, 400, 650)  # prompt + output tokens so far (MT-Bench-like conversations)
BATCHES = (8, 16, 32, 56)


def _batch(vl, torch, batch: int, ctx: int):
    sp = vl["SamplingParams"](temperature=0.0, max_tokens=512)
    groups = []
    for i in range(batch):
        out_len = ctx - PROMPT_LEN
        sd = vl["SequenceData"].from_seqs([random.randrange(128000) for _ in range(PROMPT_LEN)],
                                          [random.randrange(128000) for _ in range(out_len)])
        sd.update_num_computed_tokens(ctx - 1)
        groups.append(vl["SequenceGroupMetadata"](request_id=str(i), is_prompt=False, seq_data={i: sd}, sampling_params=sp,
                                                  block_tables={i: list(range(ctx // 16 + 1))}, token_chunk_size=1))
    return groups, torch.randint(0, 128000, (batch, K_DRAFT)), torch.full((batch,), K_DRAFT)


def time_expansion(vl, torch, batch: int, ctx: int, reps: int) -> tuple[float, float]:
    """(min, median) us of one score_proposals host step: .tolist() x 2 + _expand_batch."""
    scorer = vl["BatchExpansionTop1Scorer"](scorer_worker=None, device="cpu", vocab_size=128256)
    groups, props, lens = _batch(vl, torch, batch, ctx)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        scorer._expand_batch(seq_group_metadata_list=groups, proposal_token_ids_list=props.tolist(),
                             proposal_lens_list=lens.tolist())
        ts.append(time.perf_counter() - t0)
    return min(ts) * 1e6, statistics.median(ts) * 1e6


def _sha256(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-src", required=True, help="folder holding the vllm 0.7.3 package (unzipped wheel)")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sys.path.insert(0, args.vllm_src)
    try:
        import torch
        import vllm
        from vllm.sampling_params import SamplingParams
        from vllm.sequence import SequenceData, SequenceGroupMetadata
        from vllm.spec_decode.batch_expansion import BatchExpansionTop1Scorer
    except ImportError as exc:
        print(f"error: vllm-src: cannot import vLLM 0.7.3's scorer from {args.vllm_src} ({exc})", file=sys.stderr)
        raise SystemExit(2) from None
    vl = {"SamplingParams": SamplingParams, "SequenceData": SequenceData,
          "SequenceGroupMetadata": SequenceGroupMetadata, "BatchExpansionTop1Scorer": BatchExpansionTop1Scorer}
    random.seed(0)
    points = []
    for ctx in CONTEXTS:
        for b in BATCHES:
            lo, med = time_expansion(vl, torch, b, ctx, args.reps)
            rows = b * (K_DRAFT + 1)
            points.append({"batch": b, "rows": rows, "ctx": ctx, "min_us": round(lo, 1), "median_us": round(med, 1),
                           "min_us_per_row_token": round(lo / (rows * ctx), 5)})
            print(f"ctx {ctx:4d} batch {b:3d}: min {lo:8.1f} us, median {med:8.1f} us, "
                  f"{lo / (rows * ctx) * 1e3:.1f} ns per row x context token", file=sys.stderr)
    # the median over points of each point's minimum per row x context token (minima: the machine's other load only
    # ever adds time; the median: the per-token cost rises from ~60 to ~100 ns as the copies outgrow the caches)
    ratios = [pt["min_us"] / (pt["rows"] * pt["ctx"]) for pt in points]
    slope = statistics.median(ratios)
    resid = [abs(r - slope) / r * 100 for r in ratios]
    out = {
        "kind": "host_microbenchmark",
        "what": "vLLM 0.7.3 V0 BatchExpansionTop1Scorer: _expand_batch + the two .tolist() of score_proposals, one "
                "verify step, CPU only (us)",
        "fit": {"host_expansion_us_per_row_token": round(slope, 5),
                "form": "min_us = slope x rows x ctx (rows = batch x (k + 1), k = 2); slope: the median of the points' ratios",
                "range_us_per_row_token": [round(min(ratios), 5), round(max(ratios), 5)],
                "mape_pct": round(statistics.mean(resid), 1)},
        "points": points,
        "provenance": {
            "script": "calibration/host/bench_vllm_v0_batch_expansion.py",
            "vllm": getattr(vllm, "__version__", "0.7.3"),
            "vllm_source": "PyPI wheel vllm-0.7.3-cp38-abi3-manylinux1_x86_64.whl (its Python files; no GPU)",
            "batch_expansion_py_sha256": _sha256(sys.modules[BatchExpansionTop1Scorer.__module__].__file__),
            "torch": torch.__version__, "python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
            "machine": "specsim development VM (2 vCPUs, shared: noisy)", "reps": args.reps,
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": " ".join(["python"] + sys.argv),
        },
    }
    text = json.dumps(out, indent=1) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
