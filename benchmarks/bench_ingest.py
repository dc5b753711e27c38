"""Ingest throughput and memory on a synthetic SGLang server log.

    python benchmarks/bench_ingest.py [--mb 200] [--keep]

Writes a ~200 MB log in a temporary directory (a server-args line, then mostly ``Decode batch``
lines of three SGLang versions, with prefill lines, HTTP access lines, an idle gap and a
warm-up line every few thousand lines), ingests it in a fresh subprocess and reports MB/s and
the peak resident memory of that subprocess. Target (issue 11): >= 50 MB/s on the 2-core
development machine, memory independent of the log's length.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

HEADER = ("[2025-10-22 10:20:01] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=2, "
          "speculative_algorithm='EAGLE3', speculative_num_steps=3, speculative_eagle_topk=1, "
          "speculative_num_draft_tokens=4, disable_overlap_schedule=True)\n")


def _lines(rng: random.Random):
    t = 0
    while True:
        t += 1
        hh, mm, ss = (t // 3600) % 24, (t // 60) % 60, t % 60
        ts = f"2025-10-22 {hh:02d}:{mm:02d}:{ss:02d}"
        batch = rng.choice((1, 4, 8, 16, 32))
        acc = 1.8 + rng.random()
        gen = batch * acc / 0.022 * (0.95 + 0.1 * rng.random())
        if t % 5000 == 0:  # first line after an idle gap: throughput averaged over the idle time
            gen = 0.39
        k = t % 10
        if k < 6:
            yield (f"[{ts} TP0] Decode batch. #running-req: {batch}, #token: {batch * 900 + t % 700}, "
                   f"token usage: 0.{t % 90 + 10:02d}, accept len: {acc:.2f}, accept rate: {acc / 4:.2f}, "
                   f"cuda graph: True, gen throughput (token/s): {gen:.2f}, #queue-req: 0, \n")
        elif k < 8:
            yield (f"[{ts} DP0 TP0] Decode batch [{t}], #running-req: {batch}, #token: {batch * 900}, "
                   f"token usage: 0.12, accept len: {acc:.2f}, accept rate: {acc / 4:.2f}, cuda graph: True, "
                   f"gen throughput (token/s): {gen:.2f}, #queue-req: 0, \n")
        elif k == 8:
            yield (f"[{ts} TP0] Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 0, "
                   f"token usage: 0.01, #running-req: {batch}, #queue-req: 0, \n")
        else:
            yield f"[{ts}] INFO:     127.0.0.1:51234 - \"POST /generate HTTP/1.1\" 200 OK\n"


def make_log(path: str, mb: float) -> int:
    rng = random.Random(0)
    target = int(mb * 1e6)
    size = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(HEADER)
        buf: list[str] = []
        gen = _lines(rng)
        while size < target:
            buf.clear()
            for _ in range(20000):
                buf.append(next(gen))
            chunk = "".join(buf)
            fh.write(chunk)
            size += len(chunk)
    return os.path.getsize(path)


CHILD = r"""
import resource, sys, time, json
from specsim.io.ingest import ingest_files
t = time.perf_counter()
r = ingest_files([sys.argv[1]])
dt = time.perf_counter() - t
s = r.summary()
print(json.dumps({"seconds": dt, "lines": r.lines_total, "idle": r.lines_idle, "groups": len(s),
                  "decode_records": r.formats.get("sglang_decode", 0),
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(path: str) -> dict:
    import json

    out = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=200.0)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        small, big = os.path.join(d, "small.log"), os.path.join(d, "server.log")
        t = time.perf_counter()
        size = make_log(big, args.mb)
        make_log(small, args.mb / 10)
        print(f"generated {size / 1e6:.0f} MB in {time.perf_counter() - t:.1f} s")
        rs, rb = run(small), run(big)
        mbps = size / 1e6 / rb["seconds"]
        print(f"ingest {size / 1e6:.0f} MB: {rb['seconds']:.2f} s = {mbps:.1f} MB/s; {rb['lines']:,} lines, "
              f"{rb['decode_records']:,} decode records, {rb['idle']:,} idle/warm-up dropped, {rb['groups']} groups")
        print(f"peak RSS: {rs['maxrss_mb']:.0f} MB for {args.mb / 10:.0f} MB, {rb['maxrss_mb']:.0f} MB for "
              f"{args.mb:.0f} MB (memory independent of length: {rb['maxrss_mb'] - rs['maxrss_mb']:+.0f} MB)")
        print("target: >= 50 MB/s", "OK" if mbps >= 50 else "MISSED")
        if args.keep:
            import shutil

            shutil.copy(big, "server-synthetic.log")


if __name__ == "__main__":
    main()
