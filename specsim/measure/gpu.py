"""``specsim measure gpu``: primitives (GEMM, attention, top-k, graph replay and launch, copy) and,
with ``--sections ...,host``, the engine's per-request host work (:mod:`.host`); ``moe``: SGLang's fused
MoE Triton kernel at six shapes (:mod:`.moe`); ``flashinfer``: FlashInfer's tree verify kernel, when installed
(:mod:`.flashinfer`)."""

from __future__ import annotations

import time

import numpy as np

from . import MeasureError, shapes
from .bench import DEFAULT_ROTATE_BYTES, Bench, gpu_state, import_torch, provenance, rotation_count
from .common import Deadline, Progress, atomic_write_json, stats
from .fit import fit_linear
from .flashinfer import run_flashinfer
from .host import run_host
from .moe import run_moe
from .profile import PROFILE_SCHEMA, PROFILE_VERSION, validate_profile

SECTIONS = ("gemm", "attention", "topk", "graph", "copy", "host", "moe", "flashinfer")
SECTION_WEIGHT = {"gemm": 0.55, "attention": 0.2, "topk": 0.1, "graph": 0.08, "copy": 0.07, "host": 0.02, "moe": 0.2,
                  "flashinfer": 0.2}


class Ctx:
    """What every section needs: torch, the device, the timer, progress and the budget."""

    def __init__(self, torch, device, bench: Bench, progress: Progress, deadline: Deadline, quick: bool):
        self.torch = torch
        self.device = device
        self.bench = bench
        self.progress = progress
        self.deadline = deadline
        self.quick = quick
        self.cpu = device == "cpu"
        self.errors: list[str] = []

    def randn(self, *shape, dtype=None, std=1.0):
        t = self.torch.empty(*shape, dtype=dtype or self.torch.bfloat16, device=self.device)
        t.normal_(0.0, std)
        return t

    def error(self, where: str, exc: BaseException) -> None:
        msg = f"{where}: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        self.errors.append(msg)
        self.progress.log(f"skipped {msg}")

    def free(self):
        if not self.cpu:
            self.torch.cuda.empty_cache()


def _round16(x: int) -> int:
    return max(16, (int(x) // 16) * 16)


# ------------------------------------------------------------------------------------------ gemm
def _gemm_plan(c: Ctx):
    rows = shapes.gemm_shapes()
    ms = list(shapes.M_VALUES)
    if c.quick:
        keep = {"llama-3.1-8b/tp1/qkv", "llama-3.1-8b/tp1/gate_up", "qwen3-30b-a3b/tp1/experts_gate_up"}
        rows = [r for r in rows if r["name"] in keep]
        ms = [1, 64, 512]
    if c.cpu:  # code-path test: shrink the shapes so a CPU finishes in seconds
        rows = [
            dict(
                r,
                k=_round16(r["k"] // 16),
                n=_round16(r["n"] // 16),
                experts=min(r.get("experts") or 0, 16) or None,
                topk=min(r.get("topk") or 0, 4) or None,
            )
            for r in rows
        ]
        rows = [{k: v for k, v in r.items() if v is not None} for r in rows]
        ms = [1, 16]
    return rows, ms


def _fp8_ok(c: Ctx) -> str | None:
    torch = c.torch
    if c.cpu or not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return None
    try:
        cap = torch.cuda.get_device_capability(0)
        if cap < (8, 9):
            return None
        a = torch.randn(16, 64, device=c.device).to(torch.float8_e4m3fn)
        b = torch.randn(32, 64, device=c.device).to(torch.float8_e4m3fn)
        one = torch.tensor(1.0, device=c.device)
        torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        return "torch._scaled_mm (per-tensor scales, e4m3 x e4m3 -> bf16)"
    except Exception as exc:
        c.errors.append(f"gemm fp8 probe: {type(exc).__name__}: {exc}"[:300])
        return None


def _grouped_impl(c: Ctx) -> str:
    torch = c.torch
    if not hasattr(torch, "_grouped_mm"):
        return "loop"
    try:
        a = c.randn(32, 64)
        w = c.randn(4, 48, 64)
        offs = torch.tensor([8, 8, 20, 32], dtype=torch.int32, device=c.device)
        out = torch._grouped_mm(a, w.transpose(1, 2), offs=offs)
        ref = a[8:20] @ w[2].t()
        if not torch.allclose(out[8:20].float(), ref.float(), atol=0.5, rtol=0.05):
            raise MeasureError("torch._grouped_mm disagrees with a per-expert matmul")
        return "torch._grouped_mm"
    except Exception as exc:
        c.errors.append(f"gemm grouped probe: {type(exc).__name__}: {exc}"[:300])
        return "loop"


def _routing_sets(m: int, experts: int, topk: int, nsets: int, seed: int) -> list[np.ndarray]:
    """Expert counts of ``nsets`` uniform random top-k routings of m tokens (distinct experts per token)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(nsets):
        ids = np.argsort(rng.random((m, experts)), axis=1)[:, :topk]
        out.append(np.bincount(ids.ravel(), minlength=experts))
    return out


def _gemm_point(m, k, n, us_stats, bytes_moved, flops, extra=None):
    us = us_stats["us"]
    pt = {
        "m": m,
        **{k_: v for k_, v in us_stats.items() if k_ in ("us", "p10_us", "p90_us", "iters")},
        "bytes": int(bytes_moved),
        "flops": int(flops),
        "bytes_per_s": bytes_moved / (us * 1e-6),
        "flop_per_s": flops / (us * 1e-6),
    }
    if extra:
        pt.update(extra)
    return pt


def run_gemm(c: Ctx) -> dict:
    rows, ms = _gemm_plan(c)
    fp8 = _fp8_ok(c)
    grouped = _grouped_impl(c)
    dtypes = ["bf16"] + (["fp8"] if fp8 else [])
    total = sum(len(ms) * (len(dtypes) if r["kind"] == "dense" else 1) for r in rows)
    c.progress.start("gemm", total)
    curves = []
    methods = set()
    # bf16 for every shape first, fp8 after: a budget that runs out loses the fp8 curves first.
    for dtype in dtypes:
        for r in rows:
            if r["kind"] == "grouped" and dtype != "bf16":
                continue
            if c.deadline.passed():
                c.errors.append(f"gemm: budget spent before {r['name']} {dtype}")
                continue
            k, n = r["k"], r["n"]
            curve = {
                kk: r[kk]
                for kk in ("name", "model", "tp", "op", "kind", "k", "n", "experts", "topk", "also")
                if kk in r
            }
            curve["dtype"] = dtype
            pts = []
            try:
                if r["kind"] == "dense":
                    pts = _dense_curve(c, k, n, ms, dtype, methods)
                    curve["impl"] = "torch.mm(a, w.t(), out=)" if dtype == "bf16" else fp8
                else:
                    pts = _grouped_curve(c, r, ms, grouped, methods)
                    curve["impl"] = (
                        grouped
                        if grouped != "loop"
                        else "loop of torch.mm over the active experts (no usable torch._grouped_mm)"
                    )
            except Exception as exc:
                c.error(f"gemm {r['name']} {dtype}", exc)
            finally:
                c.free()
            if pts:
                curve["points"] = pts
                curves.append(curve)
    c.progress.finish()
    return {
        "curves": curves,
        "m_values": ms,
        "timing": sorted(methods),
        "notes": [
            "bytes = A + W + C read/written once (grouped: weights of the experts the routing touches); "
            "flops = 2 M K N; weights rotate over copies totalling > 4x L2 so small-M points read HBM",
            "fp8: per-tensor scales; activation quantisation is not included",
        ],
    }


def _dense_curve(c: Ctx, k, n, ms, dtype, methods):
    torch = c.torch
    isz = 2 if dtype == "bf16" else 1
    r = rotation_count(n * k * isz)
    ws = [c.randn(n, k, std=k**-0.5) for _ in range(r)]
    if dtype == "fp8":
        ws = [w.to(torch.float8_e4m3fn) for w in ws]
        one = torch.tensor(1.0, device=c.device)
    pts = []
    for m in ms:
        if c.deadline.passed():
            break
        a = c.randn(m, k)
        if dtype == "bf16":
            out = torch.empty(m, n, dtype=torch.bfloat16, device=c.device)

            def fn(i, a=a, out=out):
                torch.mm(a, ws[i % r].t(), out=out)
        else:
            a8 = a.to(torch.float8_e4m3fn)

            def fn(i, a8=a8):
                torch._scaled_mm(a8, ws[i % r].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        extra = None
        try:
            st = c.bench.time(fn, rotate=r)
        except Exception as exc:
            if dtype != "fp8" or m % 16 == 0:
                c.error(f"gemm {dtype} k={k} n={n} m={m}", exc)
                c.progress.step()
                continue
            # fp8 kernels may want M % 16 == 0: time the padded product and say so
            mp = (m + 15) // 16 * 16
            a8p = c.randn(mp, k).to(torch.float8_e4m3fn)

            def fnp(i, a8p=a8p):
                torch._scaled_mm(a8p, ws[i % r].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

            try:
                st = c.bench.time(fnp, rotate=r)
                extra = {"padded_m": mp}
            except Exception as exc2:
                c.error(f"gemm {dtype} k={k} n={n} m={m} (also padded to {mp}: {type(exc2).__name__})", exc)
                c.progress.step()
                continue
        methods.add(st["method"])
        pts.append(_gemm_point(m, k, n, st, m * k * isz + n * k * isz + m * n * 2, 2 * m * k * n, extra))
        c.progress.step(note=f"{dtype} {k}x{n} M={m}: {st['us']:.1f} us")
        del a
    return pts


def _grouped_curve(c: Ctx, r, ms, impl, methods):
    torch = c.torch
    k, n, E, topk = r["k"], r["n"], r["experts"], r["topk"]
    w = c.randn(E, n, k, std=k**-0.5)
    wt = w.transpose(1, 2)  # (E, K, N), column-major per expert: the layout torch._grouped_mm wants
    nsets = 8
    pts = []
    for m in ms:
        if c.deadline.passed():
            break
        counts = _routing_sets(m, E, topk, nsets, seed=1000 + m)
        rows = m * topk
        a = c.randn(rows, k)
        offs = [torch.tensor(np.cumsum(cn), dtype=torch.int32, device=c.device) for cn in counts]
        active = float(np.mean([np.count_nonzero(cn) for cn in counts]))
        if impl == "torch._grouped_mm":

            def fn(i, a=a, wt=wt, offs=offs):
                torch._grouped_mm(a, wt, offs=offs[i % nsets])
        else:
            spans = []
            for cn in counts:
                ends = np.cumsum(cn)
                spans.append([(e, int(ends[e] - cn[e]), int(ends[e])) for e in range(E) if cn[e] > 0])

            def fn(i, a=a, w=w, spans=spans):
                for e, s0, s1 in spans[i % nsets]:
                    torch.mm(a[s0:s1], w[e].t())

        try:
            st = c.bench.time(fn, rotate=nsets)
        except Exception as exc:
            c.error(f"gemm grouped {r['name']} m={m}", exc)
            c.progress.step()
            continue
        methods.add(st["method"])
        b = active * n * k * 2 + rows * k * 2 + rows * n * 2
        pts.append(_gemm_point(m, k, n, st, b, 2 * rows * k * n, {"rows": rows, "active_experts": round(active, 2)}))
        c.progress.step(note=f"grouped {r['name']} M={m}: {st['us']:.1f} us")
        del a
    del w, wt
    return pts


# ------------------------------------------------------------------------------------- attention
def _sdpa_backends(torch):
    from torch.nn.attention import SDPBackend

    names = [
        ("flash", "FLASH_ATTENTION"),
        ("cudnn", "CUDNN_ATTENTION"),
        ("efficient", "EFFICIENT_ATTENTION"),
        ("math", "MATH"),
    ]
    return [(nm, getattr(SDPBackend, attr)) for nm, attr in names if hasattr(SDPBackend, attr)]


def _pick_backend(torch, candidates, call):
    """First backend (in order) under which ``call()`` runs; (name, backend) or (None, None)."""
    from torch.nn.attention import sdpa_kernel

    for name, be in candidates:
        try:
            with sdpa_kernel([be]):
                call()
            return name, be
        except Exception:
            continue
    return None, None


def run_attention(c: Ctx) -> dict:
    torch = c.torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    sh = shapes.ATTENTION_SHAPE
    hq, hkv, d = sh["q_heads"], sh["kv_heads"], sh["head_dim"]
    g = hq // hkv
    batches, ctxs, qs = list(shapes.ATTENTION_BATCH), list(shapes.ATTENTION_CTX), list(shapes.ATTENTION_Q)
    if c.quick:
        batches, ctxs, qs = [1, 8], [512, 2048], [1, 4]
    if c.cpu:
        batches, ctxs, qs = [1, 2], [64, 128], [1, 4]
    backends = _sdpa_backends(torch)
    kv_cap = 16 * 2**30
    plan = [(B, ctx) for B in batches for ctx in ctxs if B * (ctx + max(qs)) * hkv * d * 4 <= kv_cap]
    c.progress.start("attention", len(plan) * len(qs) * 3)
    pts = []
    for B, ctx in plan:
        if c.deadline.passed():
            c.errors.append(f"attention: budget spent at B={B} ctx={ctx}")
            break
        kvmax = ctx + max(qs)
        kv_bytes_alloc = B * kvmax * hkv * d * 2 * 2
        r = rotation_count(kv_bytes_alloc)
        try:
            K = [c.randn(B, hkv, kvmax, d) for _ in range(r)]
            V = [c.randn(B, hkv, kvmax, d) for _ in range(r)]
        except Exception as exc:
            c.error(f"attention alloc B={B} ctx={ctx}", exc)
            c.free()
            continue
        for qn in qs:
            kvl = ctx + qn
            kv_bytes = B * kvl * hkv * d * 2 * 2
            q = c.randn(B, hq, qn, d)
            base = {
                "batch": B,
                "ctx": ctx,
                "q_tokens": qn,
                "kv_len": kvl,
                "phase": "decode" if qn == 1 else "verify",
                "kv_bytes": kv_bytes,
            }

            # 1) GQA-native SDPA over each request's KV (no mask: exact for decode; for verify the causal
            #    tail over the k new keys is skipped, < k/(2 ctx) of the work).
            def gqa(i, q=q, kvl=kvl, K=K, V=V, r=r):
                return F.scaled_dot_product_attention(q, K[i % r][:, :, :kvl], V[i % r][:, :, :kvl], enable_gqa=True)

            name, be = _pick_backend(torch, backends, lambda: gqa(0))
            variants = []
            if be is not None:

                def fn_gqa(i, be=be, gqa=gqa):
                    with sdpa_kernel([be]):
                        gqa(i)

                variants.append(
                    ("gqa", name, fn_gqa, "GQA-native, no mask" + (" (causal tail skipped)" if qn > 1 else ""))
                )
            # 2) Query heads folded onto their KV head (flash-decoding / FlashInfer packing):
            #    q (B, Hkv, g*k, d), no mask: exact for decode; for verify the causal tail over the
            #    k new keys is skipped (the engines' kernels skip it too, as masked-out blocks).
            qf = q.view(B, hkv, g * qn, d)

            def fold(i, qf=qf, kvl=kvl, K=K, V=V, r=r):
                return F.scaled_dot_product_attention(qf, K[i % r][:, :, :kvl], V[i % r][:, :, :kvl])

            name2, be2 = _pick_backend(torch, backends, lambda: fold(0))
            if be2 is not None:

                def fn_fold(i, be2=be2, fold=fold):
                    with sdpa_kernel([be2]):
                        fold(i)

                desc = "q heads folded per KV head, no mask" + (" (causal tail skipped)" if qn > 1 else " (exact)")
                variants.append(("fold", name2, fn_fold, desc))
            # 3) verify only: folded, with the exact causal mask over ctx + k as an additive bias.
            if qn > 1:
                width = (kvl + 15) // 16 * 16
                pos = torch.arange(g * qn, device=c.device) % qn
                allowed = torch.arange(width, device=c.device)[None, :] <= (ctx + pos)[:, None]
                bias = torch.zeros(g * qn, width, dtype=torch.bfloat16, device=c.device)
                bias.masked_fill_(~allowed, float("-inf"))
                bias = bias[:, :kvl][None, None]

                def foldm(i, qf=qf, kvl=kvl, bias=bias, K=K, V=V, r=r):
                    return F.scaled_dot_product_attention(
                        qf, K[i % r][:, :, :kvl], V[i % r][:, :, :kvl], attn_mask=bias
                    )

                name3, be3 = _pick_backend(torch, backends, lambda: foldm(0))
                if be3 is not None:

                    def fn_foldm(i, be3=be3, foldm=foldm):
                        with sdpa_kernel([be3]):
                            foldm(i)

                    variants.append(
                        ("fold_causal", name3, fn_foldm, "q heads folded, exact causal mask as additive bias")
                    )
            done = 0
            for vname, bname, fn, vdesc in variants:
                try:
                    st = c.bench.time(fn, rotate=r)
                except Exception as exc:
                    c.error(f"attention {vname} B={B} ctx={ctx} k={qn}", exc)
                    continue
                finally:
                    done += 1
                    c.progress.step()
                pts.append(
                    {
                        **base,
                        "variant": vname,
                        "backend": bname,
                        "mask": vdesc,
                        **{k_: st[k_] for k_ in ("us", "p10_us", "p90_us", "iters", "method")},
                        "kv_bytes_per_s": kv_bytes / (st["us"] * 1e-6),
                    }
                )
            if done < 3:
                c.progress.step(3 - done)
            del q, qf
        del K, V
        c.free()
    c.progress.finish()
    return {
        "shape": dict(sh),
        "points": pts,
        "notes": [
            "kv_len = ctx + q_tokens; kv_bytes = K and V of every request read once (bf16)",
            "variant gqa: SDPA with enable_gqa over q (B, Hq, k, d) (torch's flash packs GQA heads only for k = 1); "
            "fold: q heads packed per KV head, q (B, Hkv, g*k, d), no mask (engine-like: FlashInfer and FA3 pack "
            "GQA heads); fold_causal: the same with the exact causal mask as an additive bias (k > 1)",
        ],
    }


# ------------------------------------------------------------------------------------------ topk
def run_topk(c: Ctx) -> dict:
    torch = c.torch
    vocabs, rows_list, ks = list(shapes.TOPK_VOCABS), list(shapes.TOPK_ROWS), list(shapes.TOPK_K)
    if c.quick:
        rows_list = [1, 64, 1024]
    if c.cpu:
        vocabs, rows_list = [4096], [1, 8]
    c.progress.start("topk", len(vocabs) * len(rows_list) * len(ks))
    pts = []
    for V in vocabs:
        for rows in rows_list:
            if c.deadline.passed():
                c.errors.append(f"topk: budget spent at vocab={V} rows={rows}")
                break
            nb = rows * V * 2
            r = rotation_count(nb)
            L = c.randn(r, rows, V)
            for k in ks:
                if k == 1:  # SGLang's fast_topk takes max for k = 1

                    def fn(i, L=L, r=r):
                        torch.softmax(L[i % r].float(), dim=-1).max(dim=-1)
                else:

                    def fn(i, L=L, k=k, r=r):
                        torch.topk(torch.softmax(L[i % r].float(), dim=-1), k, dim=-1)

                try:
                    st = c.bench.time(fn, rotate=r)
                    pts.append(
                        {
                            "vocab": V,
                            "rows": rows,
                            "k": k,
                            "op": "softmax(fp32)+" + ("max" if k == 1 else "topk"),
                            **{k_: st[k_] for k_ in ("us", "p10_us", "p90_us", "iters", "method")},
                            "bytes_per_s": nb / (st["us"] * 1e-6),
                        }
                    )
                except Exception as exc:
                    c.error(f"topk vocab={V} rows={rows} k={k}", exc)
                c.progress.step()
            del L
            c.free()
    c.progress.finish()
    return {"points": pts, "notes": ["input bf16 logits (rows, vocab); softmax in fp32 then top-k (k=1: max)"]}


# ----------------------------------------------------------------------------------------- graph
def run_graph(c: Ctx) -> dict:
    torch = c.torch
    nodes = list(shapes.GRAPH_NODES)
    if c.quick:
        nodes = [1, 16, 256]
    x = torch.zeros(256, device=c.device)
    out: dict = {"kernel": "x.add_(1.0) on 256 fp32 (one tiny elementwise kernel)"}
    replay = []
    c.progress.start("graph", (0 if c.cpu else len(nodes)) + 2)
    if not c.cpu:
        reps = max(c.bench.repeats, 20)
        for N in nodes:
            if c.deadline.passed():
                c.errors.append(f"graph: budget spent at {N} nodes")
                break
            try:
                g = torch.cuda.CUDAGraph()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    x.add_(1.0)
                torch.cuda.current_stream().wait_stream(s)
                with torch.cuda.graph(g):
                    for _ in range(N):
                        x.add_(1.0)
                for _ in range(3):
                    g.replay()
                torch.cuda.synchronize()
                evs = [
                    (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)
                ]
                host = []
                for a, b in evs:
                    a.record()
                    t0 = time.perf_counter()
                    g.replay()
                    host.append((time.perf_counter() - t0) * 1e6)
                    b.record()
                torch.cuda.synchronize()
                gpu = stats([a.elapsed_time(b) * 1e3 for a, b in evs])
                hs = stats(host)
                # queued: 10 replays back to back between two events (the host stays ahead of the GPU)
                qn = 10
                qevs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(7)]
                for a, b in qevs:
                    a.record()
                    for _ in range(qn):
                        g.replay()
                    b.record()
                torch.cuda.synchronize()
                qs = stats([a.elapsed_time(b) * 1e3 / qn for a, b in qevs])
                replay.append(
                    {
                        "nodes": N,
                        **{k_: gpu[k_] for k_ in ("us", "p10_us", "p90_us")},
                        "queued_us": qs["us"],
                        "queued_p10_us": qs["p10_us"],
                        "queued_p90_us": qs["p90_us"],
                        "host_us": hs["us"],
                        "host_p90_us": hs["p90_us"],
                    }
                )
                del g
            except Exception as exc:
                c.error(f"graph N={N}", exc)
            c.progress.step(note=f"{N} nodes")
        if len(replay) >= 2:
            # steady state (queued replays): what a decode loop that keeps the GPU fed pays per replay
            fixed, per = fit_linear([p["nodes"] for p in replay], [p["queued_us"] for p in replay], relative=True)
            out["fixed_us"], out["per_node_us"] = fixed, per
            small = [p["us"] for p in replay if p["nodes"] <= 4]
            if small:
                out["idle_replay_us"] = float(np.median(small))
            out["fixed_isolated_us"] = fit_linear(
                [p["nodes"] for p in replay], [p["us"] for p in replay], relative=True
            )[0]
            big = [p for p in replay if p["nodes"] >= 64]
            if len(big) >= 2:
                out["per_node_us_large"] = fit_linear([p["nodes"] for p in big], [p["queued_us"] for p in big])[1]
            out["host_replay_us"] = float(np.median([p["host_us"] for p in replay]))
        out["replay"] = replay
    # eager launch cost: host time to issue back-to-back tiny kernels, and wall time until done
    eager = []
    a_small = c.randn(1, 256)
    w_small = c.randn(256, 256)
    for name, fn in (
        ("add_", lambda: x.add_(1.0)),
        ("linear 1x256x256", lambda: torch.nn.functional.linear(a_small, w_small)),
    ):
        try:
            for _ in range(50):
                fn()
            c.bench.sync()
            per_issue, per_wall = [], []
            n = 1000
            for _ in range(7):
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                t1 = time.perf_counter()
                c.bench.sync()
                t2 = time.perf_counter()
                per_issue.append((t1 - t0) * 1e6 / n)
                per_wall.append((t2 - t0) * 1e6 / n)
            si, sw = stats(per_issue), stats(per_wall)
            eager.append(
                {
                    "op": name,
                    "launches": n,
                    "host_issue_us": si["us"],
                    "host_issue_p10_us": si["p10_us"],
                    "host_issue_p90_us": si["p90_us"],
                    "wall_us": sw["us"],
                    "wall_p90_us": sw["p90_us"],
                }
            )
        except Exception as exc:
            c.error(f"eager {name}", exc)
        c.progress.step()
    out["eager"] = eager
    if eager:
        out["eager_launch_us"] = eager[0]["wall_us"]
    c.progress.finish()
    out["notes"] = [
        "replay of a graph of N tiny kernels. us: CUDA events around one replay from an idle GPU (includes the "
        "launch latency; idle_replay_us = N <= 4); queued_us: per replay of 10 back to back; fixed_us + "
        "per_node_us * N fitted to queued_us over all N, relative error (per_node_us_large: N >= 64); host_us: CPU time of "
        "the g.replay() call",
        "eager: 1000 back-to-back launches; host_issue_us = CPU time per launch, wall_us = until the GPU is done",
    ]
    return out


# ------------------------------------------------------------------------------------------ copy
def run_copy(c: Ctx) -> dict:
    torch = c.torch
    sizes = list(shapes.COPY_BYTES)
    if c.quick or c.cpu:
        sizes = [2**20, 2**24] if c.cpu else [2**20, 2**26, 2**30]
    c.progress.start("copy", len(sizes))
    pts = []
    for nb in sizes:
        if c.deadline.passed():
            break
        try:
            r = rotation_count(nb)
            src = torch.empty(r, nb // 2, dtype=torch.bfloat16, device=c.device).normal_()
            dst = torch.empty_like(src)

            def fn(i, src=src, dst=dst, r=r):
                dst[i % r].copy_(src[i % r])

            def fk(i, src=src, dst=dst, r=r):
                torch.mul(src[i % r], 1.0, out=dst[i % r])

            variants = (
                ("copy_ in graph (memcpy node)", fn, None),
                ("copy_ eager (cudaMemcpyAsync)", fn, False),
                ("elementwise kernel mul(src, 1) in graph", fk, None),
            )
            for vname, f, graph in variants:
                st = c.bench.time(f, rotate=r, graph=graph)
                pts.append(
                    {
                        "bytes": nb,
                        "variant": vname,
                        "moved_bytes": 2 * nb,
                        **{k_: st[k_] for k_ in ("us", "p10_us", "p90_us", "iters", "method")},
                        "bytes_per_s": 2 * nb / (st["us"] * 1e-6),
                    }
                )
            del src, dst
        except Exception as exc:
            c.error(f"copy {nb}", exc)
        c.free()
        c.progress.step()
    c.progress.finish()
    big = [p["bytes_per_s"] for p in pts if p["bytes"] >= 2**26] or [p["bytes_per_s"] for p in pts]
    return {
        "points": pts,
        "bytes_per_s": max(big) if big else None,
        "notes": [
            "device to device: dst.copy_(src) captured (memcpy node) and eager, and an elementwise kernel; "
            "bytes_per_s counts bytes read + written (2x size); the top-level bytes_per_s is the best at >= 64 MiB"
        ],
    }


RUNNERS = {"gemm": run_gemm, "attention": run_attention, "topk": run_topk, "graph": run_graph, "copy": run_copy,
           "host": run_host, "moe": run_moe, "flashinfer": run_flashinfer}


def measure_gpu(
    out: str,
    sections: list[str],
    device: str = "cuda",
    quick: bool = False,
    budget_s: float = 0,
    repeats: int = 15,
    argv=None,
) -> dict:
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        raise MeasureError(f"--sections: unknown {', '.join(bad)}; expected some of {', '.join(SECTIONS)}")
    torch = import_torch(device)
    progress = Progress("measure gpu")
    bench = Bench(torch, device, repeats=repeats, target_us=500.0 if device == "cpu" else 2000.0)
    c = Ctx(torch, device, bench, progress, Deadline(budget_s), quick)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    prof = {
        "schema": PROFILE_SCHEMA,
        "version": PROFILE_VERSION,
        "measured": device == "cuda" and not quick,
        "provenance": provenance(torch, device, "specsim measure gpu", argv),
        "timing": {
            "method": "CUDA graph of `iters` back-to-back calls replayed `repeats` times, CUDA events; "
            "median and p10/p90 over replays of the per-call mean"
            if device == "cuda"
            else "wall clock (CPU code-path test)",
            "repeats": bench.repeats,
            "warmup_calls": bench.warmup,
            "target_replay_us": bench.target_us,
            "l2_avoidance": f"operands rotate over copies totalling >= {DEFAULT_ROTATE_BYTES >> 20} MiB",
            "quick": quick,
        },
        "errors": c.errors,
    }
    total = Deadline(budget_s)
    for i, s in enumerate(sections):
        t0 = time.monotonic()
        if budget_s and budget_s > 0:
            # each section gets its share of what is left, so a slow one cannot starve the rest
            rest = sum(SECTION_WEIGHT[x] for x in sections[i:])
            c.deadline = Deadline(max(1.0, total.left() * SECTION_WEIGHT[s] / rest))
        try:
            prof[s] = RUNNERS[s](c)
        except MeasureError:
            raise
        except Exception as exc:  # a whole section failing must not lose the others
            c.error(f"section {s}", exc)
        c.free()
        prof.setdefault("section_seconds", {})[s] = round(time.monotonic() - t0, 1)
        if device == "cuda":
            prof["provenance"]["gpu_state_end"] = gpu_state()
        atomic_write_json(out, prof)  # checkpoint after every section
    problems = validate_profile(prof, strict=False)
    if problems:
        prof["validation_problems"] = problems
        atomic_write_json(out, prof)
    return prof


def summary_lines(prof: dict) -> list[str]:
    """A short table of the headline numbers, for stdout."""
    lines = [f"profile: {prof['provenance'].get('gpu_name')} torch {prof['provenance'].get('torch')}"]
    g = prof.get("gemm")
    if g:
        for cv in g["curves"]:
            if cv["dtype"] != "bf16" or cv.get("model") != "llama-3.1-8b":
                continue
            pts = {p["m"]: p for p in cv["points"]}
            cells = []
            for m in (1, 16, 64, 256, 1024, 4096):
                if m in pts:
                    p = pts[m]
                    cells.append(
                        f"M={m}: {p['us']:.1f}us {p['bytes_per_s'] / 1e12:.2f}TB/s {p['flop_per_s'] / 1e12:.0f}TF"
                    )
            lines.append(f"gemm {cv['name']} ({cv['k']}x{cv['n']}): " + "; ".join(cells))
    gr = prof.get("graph")
    if gr:
        lines.append(
            f"graph: fixed {gr.get('fixed_us', float('nan')):.2f} us, per node {gr.get('per_node_us', float('nan')):.3f} us; "
            f"eager launch {gr.get('eager_launch_us', float('nan')):.2f} us"
        )
    sc = prof.get("host", {}).get("stop_check")
    if sc:
        lines.append(f"host: finish check {sc['check_finished_with_stop_string_us']:.1f} us with a stop string, "
                     f"{sc['check_finished_no_stop_string_us']:.1f} without (transformers {sc.get('transformers')}, "
                     f"{sc.get('cpu')})")
    cp = prof.get("copy")
    if cp and cp.get("bytes_per_s"):
        lines.append(f"copy: {cp['bytes_per_s'] / 1e12:.2f} TB/s (read + write)")
    at = prof.get("attention")
    if at:
        for p in at["points"]:
            if (
                p["variant"] == "fold"
                and p["q_tokens"] in (1, 4)
                and p["batch"] in (1, 8, 32)
                and p["ctx"] in (2048, 8192)
            ):
                lines.append(
                    f"attention k={p['q_tokens']} B={p['batch']} ctx={p['ctx']}: {p['us']:.1f} us "
                    f"{p['kv_bytes_per_s'] / 1e12:.2f} TB/s [{p['backend']}]"
                )
    tk = prof.get("topk")
    if tk:
        for p in tk["points"]:
            if p["rows"] in (1, 64, 1024) and p["k"] == 8:
                lines.append(f"topk vocab={p['vocab']} rows={p['rows']}: {p['us']:.1f} us")
    if prof.get("errors"):
        lines.append(f"{len(prof['errors'])} errors: " + " | ".join(prof["errors"][:5]))
    return lines
