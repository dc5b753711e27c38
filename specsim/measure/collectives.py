"""``specsim measure collectives``: NCCL all-reduce / all-gather vs message size and TP size.

One process per GPU (torch.multiprocessing, spawn), torch.distributed with NCCL. For every TP
size in (2, 4, 8) that fits the visible GPUs, a group of the first TP ranks times each message
size eagerly (CUDA events around back-to-back calls) and captured in a CUDA graph (the way the
engines replay decode), with warm-up and repeats; each sample is the slowest rank's. NVLink
multicast stays off: NCCL_NVLS_ENABLE=0 is set before NCCL starts, always. The fit (alpha and
bus bandwidth per TP size, op and mode) is torch-free: ``specsim.measure.fit``.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time

from . import MeasureError
from .bench import import_torch, provenance
from .common import Progress, atomic_write_json, stats
from .fit import COLLECTIVE_OPS, collective_sizes, fit_collectives_section
from .profile import PROFILE_SCHEMA, PROFILE_VERSION

SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL", "TORCH_SYMM", "NVSHMEM_", "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_VISIBLE_DEVICES")


def _force_safe_env() -> None:
    for k, v in SAFE_ENV.items():
        os.environ[k] = v  # NVLink multicast must stay off on the lent machines: never left to the caller


def recorded_env() -> dict:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _time_series(torch, dist, grp, cuda, call, repeats, target_us, graph):
    """Per-call time samples (us), slowest rank per repeat."""
    for _ in range(5):
        call()
    if cuda:
        torch.cuda.synchronize()
    dist.barrier(group=grp)
    # estimate
    if cuda:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(5):
            call()
        e1.record()
        e1.synchronize()
        est = e0.elapsed_time(e1) * 1e3 / 5
    else:
        t0 = time.perf_counter()
        for _ in range(5):
            call()
        est = (time.perf_counter() - t0) * 1e6 / 5
    # all ranks must agree on the iteration count: take the largest estimate
    t = torch.tensor([est], dtype=torch.float64, device="cuda" if cuda else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=grp)
    n = int(max(1, min(200, round(target_us / max(float(t.item()), 1.0)))))
    samples = []
    if graph:
        g = torch.cuda.CUDAGraph()
        dist.barrier(group=grp)
        with torch.cuda.graph(g):
            for _ in range(n):
                call()
        g.replay()
        torch.cuda.synchronize()
        for _ in range(repeats):
            dist.barrier(group=grp)
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            samples.append(a.elapsed_time(b) * 1e3 / n)
        del g
    else:
        for _ in range(repeats):
            dist.barrier(group=grp)
            if cuda:
                torch.cuda.synchronize()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(n):
                    call()
                b.record()
                b.synchronize()
                samples.append(a.elapsed_time(b) * 1e3 / n)
            else:
                t0 = time.perf_counter()
                for _ in range(n):
                    call()
                samples.append((time.perf_counter() - t0) * 1e6 / n)
    st = torch.tensor(samples, dtype=torch.float64, device="cuda" if cuda else "cpu")
    dist.all_reduce(st, op=dist.ReduceOp.MAX, group=grp)
    return [float(x) for x in st.tolist()], n


def _worker(rank: int, world: int, port: int, cfg: dict, outdir: str) -> None:
    _force_safe_env()
    import torch
    import torch.distributed as dist

    cuda = cfg["device"] == "cuda"
    if cuda:
        torch.cuda.set_device(rank)
    kw = {"device_id": torch.device("cuda", rank)} if cuda else {}
    dist.init_process_group(cfg["backend"], init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, **kw)
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    dtype = torch.bfloat16 if cuda else torch.float32  # gloo (CPU tests) has no bf16 reductions
    isz = 2 if cuda else 4
    result: dict = {"tp": {}, "errors": []}
    for tp in cfg["tp_sizes"]:
        grp = dist.new_group(list(range(tp)))
        if rank < tp:
            per_op: dict = {}
            for op in cfg["ops"]:
                modes = {"eager": {"points": []}}
                if cfg["graph"] and cuda:
                    modes["graph"] = {"points": []}
                for size in cfg["sizes"][op]:
                    numel = max(tp, (size // isz) // tp * tp)
                    nbytes = numel * isz
                    try:
                        if op == "all_reduce":
                            x = torch.randn(numel, device=dev, dtype=dtype)

                            def call(x=x, grp=grp):
                                dist.all_reduce(x, group=grp)
                        else:
                            inp = torch.randn(numel // tp, device=dev, dtype=dtype)
                            outb = torch.empty(numel, device=dev, dtype=dtype)

                            def call(inp=inp, outb=outb, grp=grp):
                                dist.all_gather_into_tensor(outb, inp, group=grp)

                        for mode in modes:
                            samples, n = _time_series(
                                torch, dist, grp, cuda, call, cfg["repeats"], cfg["target_us"], graph=(mode == "graph")
                            )
                            s = stats(samples)
                            modes[mode]["points"].append(
                                {
                                    "bytes": nbytes,
                                    "elements": numel,
                                    "us": s["us"],
                                    "p10_us": s["p10_us"],
                                    "p90_us": s["p90_us"],
                                    "iters": n,
                                    "repeats": s["n"],
                                }
                            )
                    except Exception as exc:
                        result["errors"].append(f"tp={tp} {op} {nbytes} B: {type(exc).__name__}: {str(exc)[:200]}")
                        if cuda:
                            torch.cuda.synchronize()
                    if rank == 0:
                        print(f"measure collectives: tp={tp} {op} {nbytes} B done", flush=True)
                per_op[op] = modes
            result["tp"][str(tp)] = per_op
        dist.barrier()
    if rank == 0:
        result["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version())) if cuda else None
        with open(os.path.join(outdir, "rank0.json"), "w") as fh:
            json.dump(result, fh)
    dist.barrier()
    dist.destroy_process_group()


def measure_collectives(
    out: str,
    tp_sizes=None,
    ops=COLLECTIVE_OPS,
    repeats: int = 20,
    graph: bool = True,
    device: str = "cuda",
    procs: int = 2,
    quick: bool = False,
    timeout_s: float = 540,
    argv=None,
) -> dict:
    _force_safe_env()
    bad = [o for o in ops if o not in COLLECTIVE_OPS]
    if bad:
        raise MeasureError(f"--ops: unknown {', '.join(bad)}; expected some of {', '.join(COLLECTIVE_OPS)}")
    torch = import_torch(device)
    if device == "cuda":
        ngpu = torch.cuda.device_count()
        if ngpu < 2:
            raise MeasureError(f"collectives need at least 2 visible GPUs, found {ngpu}")
        backend = "nccl"
    else:
        ngpu = procs
        backend = "gloo"
    fits = [t for t in (2, 4, 8) if t <= ngpu]
    if tp_sizes:
        missing = [t for t in tp_sizes if t > ngpu or t < 2]
        if missing:
            raise MeasureError(f"--tp: {missing} do not fit the {ngpu} visible GPUs (need 2 <= TP <= {ngpu})")
        fits = sorted(set(tp_sizes))
    if not fits:
        raise MeasureError(f"collectives: no TP size of 2, 4 or 8 fits {ngpu} GPUs")
    sizes = collective_sizes()
    if quick or device == "cpu":
        sizes = {op: [s for i, s in enumerate(v) if i % max(1, len(v) // 6) == 0] for op, v in sizes.items()}
    world = max(fits)
    progress = Progress("measure collectives")
    prov = provenance(torch, device, "specsim measure collectives", argv)
    cfg = {
        "device": device,
        "backend": backend,
        "tp_sizes": fits,
        "ops": list(ops),
        "sizes": sizes,
        "repeats": repeats,
        "graph": graph,
        "target_us": 2000.0,
    }
    progress.log(f"{world} processes, TP sizes {fits}, {sum(len(v) for v in sizes.values())} sizes, NCCL_NVLS_ENABLE=0")
    import torch.multiprocessing as tmp

    with tempfile.TemporaryDirectory() as td:
        ctx = tmp.start_processes(
            _worker, args=(world, _free_port(), cfg, td), nprocs=world, join=False, start_method="spawn"
        )
        t_end = time.monotonic() + timeout_s
        while not ctx.join(timeout=5):
            if time.monotonic() > t_end:
                for p in ctx.processes:
                    if p.is_alive():
                        p.terminate()
                raise MeasureError(f"collectives: workers still running after {timeout_s:.0f} s; stopped them")
        path = os.path.join(td, "rank0.json")
        if not os.path.exists(path):
            raise MeasureError("collectives: rank 0 wrote no result")
        with open(path) as fh:
            res = json.load(fh)
    section = {
        "backend": backend,
        "dtype": "bf16" if device == "cuda" else "float32",
        "env": recorded_env(),
        "nccl_version": res.get("nccl_version"),
        "tp": res["tp"],
        "errors": res.get("errors", []),
        "method": "one process per GPU; each sample = slowest rank's mean over `iters` back-to-back calls; "
        "eager = CUDA events around the calls, graph = one replay of a captured graph of them; "
        "median and p10/p90 over repeats; all-gather bytes = gathered output",
        "fit_model": "t = alpha_us + bus_bytes / bus_bytes_per_s; all_reduce bus_bytes = 2(n-1)/n size, "
        "all_gather (n-1)/n size; relative least squares",
    }
    fit_collectives_section(section)
    prof = {
        "schema": PROFILE_SCHEMA,
        "version": PROFILE_VERSION,
        "measured": device == "cuda" and not quick,
        "provenance": prov,
        "collectives": section,
    }
    atomic_write_json(out, prof)
    progress.log("done")
    return prof


def summary_lines(prof: dict) -> list[str]:
    lines = []
    for tp, ops in prof["collectives"]["tp"].items():
        for op, modes in ops.items():
            for mode, series in modes.items():
                f = series.get("fit")
                if f:
                    lines.append(
                        f"TP{tp} {op} {mode}: alpha {f['alpha_us']:.2f} us, bus {f['bus_bytes_per_s'] / 1e9:.1f} GB/s "
                        f"(median err {f['median_err_pct']:.1f} %)"
                    )
    return lines
