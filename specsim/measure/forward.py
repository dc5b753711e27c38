"""``specsim measure forward``: engine-like target forwards with random weights, timed as CUDA graphs.

The forward is what a serving engine runs for a decode (k = 1 new token per request) or a verify
(k draft tokens per request) of B requests with ``ctx`` tokens of KV cache each, with the kernels
torch has (no FlashInfer / flash-attn package needed):

    embedding -> per layer: RMSNorm, fused qkv GEMM, [q/k RMSNorm], RoPE, KV-cache write,
    SDPA over each request's KV (flash backend, GQA native), o GEMM + residual, RMSNorm,
    fused gate_up GEMM, SiLU*mul, down GEMM + residual   (MoE: router GEMM, softmax, top-k,
    sort by expert, grouped GEMMs (torch._grouped_mm), weighted scatter-add)
    -> final RMSNorm -> lm_head on every new token (B*k rows).

Weights are random (normal, std 1/sqrt(K)); nothing is downloaded. Each point is captured once
as a CUDA graph and replayed; a few points are also timed eagerly.
"""

from __future__ import annotations

import time

from . import MeasureError
from .bench import gpu_state, start_model_measure
from .common import Deadline, atomic_write_json, dataset_provenance, stats

CONFIGS = {
    "llama-3.1-8b": dict(
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        intermediate=14336,
        vocab=128256,
        layers=32,
        rope_theta=500000.0,
        eps=1e-5,
        qk_norm=False,
        moe=False,
    ),
    "qwen3-30b-a3b": dict(
        hidden=2048,
        heads=32,
        kv_heads=4,
        head_dim=128,
        moe_intermediate=768,
        experts=128,
        topk=8,
        vocab=151936,
        layers=48,
        rope_theta=1000000.0,
        eps=1e-6,
        qk_norm=True,
        moe=True,
    ),
}
TINY = {  # CPU code-path tests only
    "llama-3.1-8b": dict(hidden=128, heads=4, kv_heads=2, head_dim=32, intermediate=256, vocab=512, layers=2),
    "qwen3-30b-a3b": dict(
        hidden=128, heads=4, kv_heads=2, head_dim=32, moe_intermediate=64, experts=8, topk=2, vocab=512, layers=2
    ),
}


def gpu_slug(name: str) -> str:
    n = name.lower()
    for key in ("h200", "h100", "h20", "b200", "a100", "l40s", "gh200"):
        if key in n.replace(" ", "").replace("-", ""):
            return "gh200" if "gh200" in n else key
    return "-".join(n.replace("nvidia", "").split()) or "gpu"


class EngineLikeModel:
    def __init__(self, torch, cfg: dict, device: str, max_pos: int, grouped: str, fold: bool = True):
        self.torch, self.cfg, self.device = torch, cfg, device
        self.fold = fold
        self.grouped = grouped
        H, hq, hkv, d = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
        bf = torch.bfloat16

        def w(*shape):
            t = torch.empty(*shape, dtype=bf, device=device)
            return t.normal_(0.0, shape[-1] ** -0.5)

        def ones(n):
            return torch.ones(n, dtype=bf, device=device)

        self.embed = torch.empty(cfg["vocab"], H, dtype=bf, device=device).normal_(0.0, 1.0)
        self.layers = []
        for _ in range(cfg["layers"]):
            L = {"ln1": ones(H), "ln2": ones(H), "wqkv": w((hq + 2 * hkv) * d, H), "wo": w(H, hq * d)}
            if cfg["qk_norm"]:
                L["qn"], L["kn"] = ones(d), ones(d)
            if cfg["moe"]:
                E, inter = cfg["experts"], cfg["moe_intermediate"]
                L["wr"] = w(E, H)
                L["wgu"] = w(E, 2 * inter, H)  # per expert (N, K) row-major; .transpose(1, 2) is (K, N) col-major
                L["wd"] = w(E, H, inter)
            else:
                inter = cfg["intermediate"]
                L["wgu"] = w(2 * inter, H)
                L["wd"] = w(H, inter)
            self.layers.append(L)
        self.norm = ones(H)
        self.lm_head = w(cfg["vocab"], H)
        half = d // 2
        inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, half, device=device, dtype=torch.float32) / half))
        ang = torch.arange(max_pos, device=device, dtype=torch.float32)[:, None] * inv[None, :]
        self.cos = torch.cat([ang.cos(), ang.cos()], -1).to(bf)
        self.sin = torch.cat([ang.sin(), ang.sin()], -1).to(bf)

    def weight_bytes(self) -> int:
        ts = [self.embed, self.lm_head] + [t for L in self.layers for t in L.values()]
        return sum(t.numel() * t.element_size() for t in ts)

    def _rope(self, x, cos, sin):
        half = x.shape[-1] // 2
        rot = self.torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rot * sin

    def _moe(self, x, L):
        torch, cfg = self.torch, self.cfg
        F = torch.nn.functional
        E, topk, inter = cfg["experts"], cfg["topk"], cfg["moe_intermediate"]
        T = x.shape[0]
        probs = torch.softmax(torch.mm(x, L["wr"].t()).float(), dim=-1)
        tw, ti = torch.topk(probs, topk, dim=-1)
        tw = tw / tw.sum(dim=-1, keepdim=True)
        flat = ti.flatten()
        order = torch.argsort(flat, stable=True)
        tok = order // topk
        xs = x.index_select(0, tok)
        counts = torch.zeros(E, dtype=torch.int32, device=x.device)
        counts.scatter_add_(0, flat, torch.ones_like(flat, dtype=torch.int32))
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        if self.grouped == "torch._grouped_mm":
            gu = torch._grouped_mm(xs, L["wgu"].transpose(1, 2), offs=offs)
            act = F.silu(gu[:, :inter]) * gu[:, inter:]
            y = torch._grouped_mm(act, L["wd"].transpose(1, 2), offs=offs)
        else:  # dense fallback: every expert over all rows, masked (correct, slow; says so in provenance)
            sorted_e = flat.index_select(0, order)
            y = torch.zeros(T * topk, x.shape[1], dtype=x.dtype, device=x.device)
            for e in range(E):
                gu = torch.mm(xs, L["wgu"][e].t())
                act = F.silu(gu[:, :inter]) * gu[:, inter:]
                y += torch.mm(act, L["wd"][e].t()) * (sorted_e == e).unsqueeze(1).to(x.dtype)
        y = y * tw.flatten().index_select(0, order).unsqueeze(1).to(x.dtype)
        return torch.zeros_like(x).index_add_(0, tok, y)

    def forward(self, ids, kv, B: int, q: int, ctx: int, sdpa_ctx):
        torch, cfg = self.torch, self.cfg
        F = torch.nn.functional
        H, hq, hkv, d, eps = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["eps"]
        T = B * q
        cos = self.cos[ctx : ctx + q].view(1, q, 1, d)
        sin = self.sin[ctx : ctx + q].view(1, q, 1, d)
        h = F.embedding(ids, self.embed)
        for li, L in enumerate(self.layers):
            x = F.rms_norm(h, (H,), L["ln1"], eps)
            qkv = torch.mm(x, L["wqkv"].t())
            qh = qkv[:, : hq * d].view(B, q, hq, d)
            kh = qkv[:, hq * d : (hq + hkv) * d].view(B, q, hkv, d)
            vh = qkv[:, (hq + hkv) * d :].view(B, q, hkv, d)
            if cfg["qk_norm"]:
                qh = F.rms_norm(qh, (d,), L["qn"], eps)
                kh = F.rms_norm(kh, (d,), L["kn"], eps)
            qh = self._rope(qh, cos, sin)
            kh = self._rope(kh, cos, sin)
            kc, vc = kv[li, 0], kv[li, 1]
            kc[:, :, ctx : ctx + q].copy_(kh.transpose(1, 2))
            vc[:, :, ctx : ctx + q].copy_(vh.transpose(1, 2))
            if self.fold:  # q heads packed per KV head (FlashInfer / FA3 style): q (B, Hkv, g*k, d)
                qf = qh.transpose(1, 2).contiguous().view(B, hkv, (hq // hkv) * q, d)
                with sdpa_ctx():
                    o = F.scaled_dot_product_attention(qf, kc[:, :, : ctx + q], vc[:, :, : ctx + q])
                o = o.view(B, hq, q, d)
            else:
                with sdpa_ctx():
                    o = F.scaled_dot_product_attention(
                        qh.transpose(1, 2), kc[:, :, : ctx + q], vc[:, :, : ctx + q], enable_gqa=True
                    )
            h = h + torch.mm(o.transpose(1, 2).reshape(T, hq * d), L["wo"].t())
            x = F.rms_norm(h, (H,), L["ln2"], eps)
            if cfg["moe"]:
                h = h + self._moe(x, L)
            else:
                inter = cfg["intermediate"]
                gu = torch.mm(x, L["wgu"].t())
                h = h + torch.mm(F.silu(gu[:, :inter]) * gu[:, inter:], L["wd"].t())
        x = F.rms_norm(h, (H,), self.norm, eps)
        return torch.mm(x, self.lm_head.t())  # every new token (k = 1: the one token per request)


def _grouped_available(torch, device) -> str:
    if not hasattr(torch, "_grouped_mm"):
        return "loop"
    try:
        a = torch.randn(32, 64, device=device, dtype=torch.bfloat16)
        w = torch.randn(4, 48, 64, device=device, dtype=torch.bfloat16)
        offs = torch.tensor([8, 8, 20, 32], dtype=torch.int32, device=device)
        out = torch._grouped_mm(a, w.transpose(1, 2), offs=offs)
        ref = a[8:20].float() @ w[2].float().t()
        if not torch.allclose(out[8:20].float(), ref, atol=0.5, rtol=0.05):
            return "loop"
        return "torch._grouped_mm"
    except Exception:
        return "loop"


def _sdpa_choice(torch, device, cfg, fold: bool = True):
    """The first SDPA backend (flash first) that runs this attention, as a context factory."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    F = torch.nn.functional
    hq = cfg["kv_heads"] if fold else cfg["heads"]
    q = torch.randn(
        2,
        hq,
        3 * (cfg["heads"] // cfg["kv_heads"] if fold else 1),
        cfg["head_dim"],
        device=device,
        dtype=torch.bfloat16,
    )
    k = torch.randn(2, cfg["kv_heads"], 40, cfg["head_dim"], device=device, dtype=torch.bfloat16)
    for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH"):
        be = getattr(SDPBackend, name, None)
        if be is None:
            continue
        try:
            with sdpa_kernel([be]):
                F.scaled_dot_product_attention(q, k, k, enable_gqa=not fold)
            return name.lower().replace("_attention", ""), (lambda be=be: sdpa_kernel([be]))
        except Exception:
            continue
    raise MeasureError("no SDPA backend runs grouped-query attention here")


def _time_graph(torch, run, repeats, flush=None):
    """Capture ``run`` once; time ``repeats`` replays with CUDA events (``flush``, a large buffer,
    is zeroed before each replay so it starts with a cold L2)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = run()
    for _ in range(2):
        g.replay()
    torch.cuda.synchronize()
    evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for a, b in evs:
        if flush is not None:
            flush.zero_()
        a.record()
        g.replay()
        b.record()
    torch.cuda.synchronize()
    ms = [a.elapsed_time(b) for a, b in evs]
    del g, out
    return ms


def _time_eager(torch, run, repeats, cuda: bool):
    for _ in range(2):
        run()
    if cuda:
        torch.cuda.synchronize()
        evs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
        for a, b in evs:
            a.record()
            run()
            b.record()
        torch.cuda.synchronize()
        return [a.elapsed_time(b) for a, b in evs]
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def _ms_stats(samples_ms):
    st = stats([x * 1e3 for x in samples_ms])
    return {
        "ms": round(st["us"] / 1e3, 4),
        "p10_ms": round(st["p10_us"] / 1e3, 4),
        "p90_ms": round(st["p90_us"] / 1e3, 4),
        "n": st["n"],
    }


def measure_forward(
    out: str,
    model: str,
    batches,
    tokens,
    ctxs,
    device: str = "cuda",
    repeats: int = 10,
    budget_s: float = 0,
    eager_points=(),
    kv_margin_gib: float = 12.0,
    quick: bool = False,
    attention: str = "fold",
    argv=None,
) -> dict:
    if attention not in ("fold", "gqa"):
        raise MeasureError(f"--attention: got {attention!r}; expected fold or gqa")
    torch, cuda, cfg, progress, prov = start_model_measure("forward", model, CONFIGS, TINY, device, argv)
    deadline = Deadline(budget_s)
    grouped = _grouped_available(torch, device) if cfg["moe"] else None
    kmax = max(tokens)
    t0 = time.monotonic()
    mdl = EngineLikeModel(torch, cfg, device, max_pos=max(ctxs) + kmax + 1, grouped=grouped, fold=attention == "fold")
    if cuda:
        torch.cuda.synchronize()
    progress.log(
        f"{model}: {mdl.weight_bytes() / 2**30:.1f} GiB of random bf16 weights built in {time.monotonic() - t0:.1f} s"
    )
    fold = attention == "fold"
    sdpa_name, sdpa_ctx = _sdpa_choice(torch, device, cfg, fold)
    hkv, d, nl = cfg["kv_heads"], cfg["head_dim"], cfg["layers"]
    kv_per_token = nl * 2 * hkv * d * 2
    gname = prov.get("gpu_name", "cpu")
    engine_desc = (
        "engine-like torch forward, random bf16 weights: fused qkv, RoPE, KV-cache write, "
        + (
            f"SDPA ({sdpa_name} backend) with the q heads of each KV head packed into the query dimension "
            "(FlashInfer / FA3-style GQA packing; q (B, Hkv, g*k, d))"
            if fold
            else f"SDPA ({sdpa_name} backend) with enable_gqa (torch's flash packs GQA heads only for k = 1)"
        )
        + ", no mask (the causal tail over the k new keys is skipped, < k/(2 ctx) of the attention work) "
        "over each request's contiguous KV cache, o-proj, RMSNorm, "
        + (
            "router + softmax top-k + sort + grouped GEMMs (" + str(grouped) + ") + weighted scatter-add"
            if cfg["moe"]
            else "fused gate_up + SiLU*mul, down"
        )
        + f", final norm, lm_head on all B*k new tokens; {nl} layers; torch {torch.__version__}"
    )
    ds = {
        "name": f"{gpu_slug(gname) if cuda else 'cpu'}-{model}-forwards",
        "description": (
            f"Target forward time of {model} on one {gname} vs requests (batch), new tokens per request "
            f"(tokens: 1 = decode, k > 1 = verify of k draft tokens) and context, measured with "
            f"`specsim measure forward` (CUDA-graph replay; random weights)."
        ),
        "provenance": dataset_provenance(
            "forward", prov, gname, engine_desc,
            f"CUDA graph replay of one forward, CUDA events, median (p10/p90) of {repeats} replays after 2 eager "
            "warm-ups and 2 warm replays", torch.__version__, cuda and not quick,
        ),
        "model": model,
        "gpu": gpu_slug(gname) if cuda else "cpu",
        "tp": 1,
        "batch": 1,
        "ctx": 2048 if 2048 in ctxs else ctxs[0],
        "graph": True,
        "engine_preset": "torch-graph",  # this harness's own engine preset: validate reads the forwards as it runs them
        # random router weights route about uniformly: validate scores these forwards at c = 0 (target.moe.routing_skew)
        "routing_skew": 0.0,
        "points": [],
        "eager_points": [],
        "skipped": [],
        "errors": [],
    }
    eager_all = eager_points == "all"
    eager_set = set() if eager_all else {tuple(p) for p in eager_points}
    # ctx 2048 (the default of the lead's validation) first, so a budget that runs out loses the rest
    order = sorted(ctxs, key=lambda c: (c != 2048, c))
    plan = [(c, B) for c in order for B in batches]
    progress.start("forward", len(plan) * len(tokens))
    ids_all = torch.randint(0, cfg["vocab"], (max(batches) * kmax,), device=device)
    for ctx, B in plan:
        if deadline.passed():
            ds["skipped"].append({"batch": B, "ctx": ctx, "why": "time budget spent"})
            progress.step(len(tokens))
            continue
        kv_bytes = kv_per_token * B * (ctx + kmax)
        if cuda:
            free, _ = torch.cuda.mem_get_info()
            if kv_bytes > free - kv_margin_gib * 2**30:
                ds["skipped"].append(
                    {
                        "batch": B,
                        "ctx": ctx,
                        "why": f"KV cache {kv_bytes / 2**30:.0f} GiB does not fit "
                        f"({free / 2**30:.0f} GiB free, {kv_margin_gib:.0f} GiB kept for activations)",
                    }
                )
                progress.step(len(tokens))
                continue
        try:
            kv = torch.empty(nl, 2, B, hkv, ctx + kmax, d, dtype=torch.bfloat16, device=device).normal_()
        except Exception as exc:
            ds["errors"].append(f"B={B} ctx={ctx}: KV allocation: {type(exc).__name__}: {str(exc)[:200]}")
            progress.step(len(tokens))
            continue
        for q in tokens:
            if deadline.passed():
                ds["skipped"].append({"batch": B, "ctx": ctx, "tokens": q, "why": "time budget spent"})
                progress.step()
                continue
            ids = ids_all[: B * q].clone()

            def run(ids=ids, B=B, q=q, ctx=ctx, kv=kv):
                return mdl.forward(ids, kv, B, q, ctx, sdpa_ctx)

            base = {"tokens": q, "batch": B, "ctx": ctx}
            try:
                graph_ok = False
                if cuda:
                    try:
                        st = _ms_stats(_time_graph(torch, run, repeats))
                        ds["points"].append({**base, **st, "graph": True})
                        graph_ok = True
                    except Exception as exc:  # not capturable: time it eagerly, say so
                        ds["errors"].append(
                            f"B={B} k={q} ctx={ctx}: graph capture failed, timed eagerly: "
                            f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                        )
                        torch.cuda.synchronize()
                        est = _ms_stats(_time_eager(torch, run, max(3, repeats // 2), cuda))
                        ds["points"].append({**base, **est, "graph": False})
                if graph_ok and (eager_all or (B, q, ctx) in eager_set) or not cuda:
                    est = _ms_stats(_time_eager(torch, run, max(3, repeats // 2), cuda))
                    (ds["eager_points"] if cuda else ds["points"]).append({**base, **est, "graph": False})
                note = f"B={B} k={q} ctx={ctx}: {(ds['points'][-1]['ms'] if ds['points'] else float('nan')):.3f} ms"
            except Exception as exc:
                ds["errors"].append(
                    f"B={B} k={q} ctx={ctx}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                )
                note = "error"
                if cuda:
                    torch.cuda.synchronize()
            if cuda:
                torch.cuda.empty_cache()
            progress.step(note=note)
        del kv
        if cuda:
            torch.cuda.empty_cache()
        atomic_write_json(out, ds)  # checkpoint after every (ctx, batch)
    progress.finish()
    if cuda:
        ds["provenance"]["hardware"]["gpu_state_end"] = gpu_state()
    ds["provenance"]["seconds"] = round(progress.elapsed(), 1)
    if not cuda:
        ds["graph"] = False
    atomic_write_json(out, ds)
    return ds


def summary_lines(ds: dict) -> list[str]:
    pts = {(p["batch"], p["tokens"], p["ctx"]): p["ms"] for p in ds["points"]}
    ctxs = sorted({p["ctx"] for p in ds["points"]})
    ks = sorted({p["tokens"] for p in ds["points"]})
    bs = sorted({p["batch"] for p in ds["points"]})
    lines = [
        f"{ds['name']}: {len(ds['points'])} graph points, {len(ds['eager_points'])} eager, "
        f"{len(ds['skipped'])} skipped, {len(ds['errors'])} errors"
    ]
    for ctx in ctxs:
        lines.append(f"ctx {ctx}: ms by batch (rows) x tokens (cols) " + " ".join(f"{k:>7}" for k in ks))
        for B in bs:
            lines.append(
                f"  B={B:<3}" + "".join(f" {pts[(B, k, ctx)]:7.2f}" if (B, k, ctx) in pts else "       -" for k in ks)
            )
    for e in ds["errors"][:5]:
        lines.append(f"error: {e}")
    return lines
