"""``specsim measure draft``: the EAGLE-3 cycle pieces besides the target verify, timed as CUDA graphs.

Random bf16 weights (nothing is downloaded), torch's own kernels, the shapes of the EAGLE-3 head
of Llama-3.1-8B (one Llama decoder layer whose attention input is [embedding; hidden], 2 x 4096
wide, and a 32000-entry draft vocabulary). Three phases, each captured once as a CUDA graph and
replayed, with the L2 flushed (a 256 MiB write) before every timed replay:

* ``draft_step``: one draft step over B x topk rows, as SGLang's EAGLE worker runs it in its draft
  graph: embedding, RMSNorm of the embedding and of the hidden state, concat, qkv GEMM
  (8192 -> (32 + 2 x 8) x 128), RoPE, KV-cache write, attention of each request's topk queries
  over its draft KV cache of ``ctx`` tokens (GQA heads packed, flash SDPA), o GEMM + residual,
  RMSNorm, gate_up GEMM, SiLU*mul, down GEMM + residual, final RMSNorm, lm_head over the draft
  vocabulary, fp32 softmax, top-k (max for topk = 1), the draft->target vocabulary map, and for
  topk > 1 the tree step (parent scores x child probabilities, top-k over topk^2, gather of the
  chosen tokens and their parents' hidden states).
  ``draft_forward`` times the head forward alone (up to the draft logits), ``draft_topk`` the
  softmax + top-k + tree step alone over B x topk bf16 logit rows.
* ``accept`` (greedy, tree-verify-like): argmax over B x k target logits of 128256 fp32 entries,
  each node's draft token compared with the target's choice at its parent, cumulative product
  along the path, accept length, gather of the accepted tokens and of their 3 x 4096 target hidden
  states (the draft-extend input). ``argmax`` times the argmax alone.
* ``draft_extend``: the head over B x (steps + 1) tokens with the fc 3 x 4096 -> 4096 that fuses
  three target hidden states first, attention of each request's steps + 1 queries over ctx + steps
  + 1 keys, lm_head on every row, then the last row of each request selected (logits and hidden).
  The softmax + top-k of the next cycle's first step is not part of it.
"""

from __future__ import annotations

import time

from .bench import gpu_state, start_model_measure
from .common import Deadline, atomic_write_json, dataset_provenance
from .forward import _ms_stats, _sdpa_choice, _time_eager, _time_graph, gpu_slug

HEADS = {
    "llama-3.1-8b": dict(
        hidden=4096,
        heads=32,
        kv_heads=8,
        head_dim=128,
        intermediate=14336,
        vocab=128256,  # the target's (embedding, verify logits)
        draft_vocab=32000,
        fuse=3,  # target hidden states fused by the fc in draft-extend
        rope_theta=500000.0,
        eps=1e-5,
    ),
}
TINY = {"llama-3.1-8b": dict(hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=512, draft_vocab=256)}

FLUSH_BYTES = 256 * 2**20  # > 4x the H200's 60 MiB L2


class Eagle3Head:
    """One EAGLE-3 head (LlamaForCausalLMEagle3's midlayer, norm, lm_head, fc) with random weights."""

    def __init__(self, torch, cfg: dict, device: str, max_pos: int):
        self.torch, self.cfg = torch, cfg
        H, hq, hkv, d, inter = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["intermediate"]
        bf = torch.bfloat16

        def w(*shape):
            return torch.empty(*shape, dtype=bf, device=device).normal_(0.0, shape[-1] ** -0.5)

        def ones(n):
            return torch.ones(n, dtype=bf, device=device)

        self.embed = torch.empty(cfg["vocab"], H, dtype=bf, device=device).normal_(0.0, 1.0)
        self.fc = w(H, cfg["fuse"] * H)
        self.ln_emb, self.ln_hid, self.ln2, self.norm = ones(H), ones(H), ones(H), ones(H)
        self.wqkv = w((hq + 2 * hkv) * d, 2 * H)
        self.wo = w(H, hq * d)
        self.wgu = w(2 * inter, H)
        self.wd = w(H, inter)
        self.lm_head = w(cfg["draft_vocab"], H)
        # draft id -> target id offset (SGLang's hot_token_id / d2t): target = draft + d2t[draft]
        self.d2t = torch.randint(0, max(cfg["vocab"] - cfg["draft_vocab"], 1), (cfg["draft_vocab"],), device=device)
        half = d // 2
        inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, half, device=device, dtype=torch.float32) / half))
        ang = torch.arange(max_pos, device=device, dtype=torch.float32)[:, None] * inv[None, :]
        self.cos = torch.cat([ang.cos(), ang.cos()], -1).to(bf)
        self.sin = torch.cat([ang.sin(), ang.sin()], -1).to(bf)

    def weight_bytes(self) -> int:
        ts = [self.embed, self.fc, self.wqkv, self.wo, self.wgu, self.wd, self.lm_head]
        return sum(t.numel() * t.element_size() for t in ts)

    @staticmethod
    def _rope(torch, x, cos, sin):
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin

    def layer(self, emb, hidden, kc, vc, B: int, q: int, ctx: int, sdpa_ctx):
        """The decoder layer over B x q rows; attention over each request's ctx + q keys (no mask)."""
        torch, cfg = self.torch, self.cfg
        F = torch.nn.functional
        H, hq, hkv, d, eps, inter = (cfg[k] for k in ("hidden", "heads", "kv_heads", "head_dim", "eps", "intermediate"))
        T = B * q
        x = torch.cat([F.rms_norm(emb, (H,), self.ln_emb, eps), F.rms_norm(hidden, (H,), self.ln_hid, eps)], dim=-1)
        qkv = torch.mm(x, self.wqkv.t())
        cos = self.cos[ctx : ctx + q].view(1, q, 1, d)
        sin = self.sin[ctx : ctx + q].view(1, q, 1, d)
        qh = self._rope(torch, qkv[:, : hq * d].view(B, q, hq, d), cos, sin)
        kh = self._rope(torch, qkv[:, hq * d : (hq + hkv) * d].view(B, q, hkv, d), cos, sin)
        vh = qkv[:, (hq + hkv) * d :].view(B, q, hkv, d)
        kc[:, :, ctx : ctx + q].copy_(kh.transpose(1, 2))
        vc[:, :, ctx : ctx + q].copy_(vh.transpose(1, 2))
        qf = qh.transpose(1, 2).contiguous().view(B, hkv, (hq // hkv) * q, d)  # GQA heads packed
        with sdpa_ctx():
            o = F.scaled_dot_product_attention(qf, kc[:, :, : ctx + q], vc[:, :, : ctx + q])
        h = hidden + torch.mm(o.view(B, hq, q, d).transpose(1, 2).reshape(T, hq * d), self.wo.t())
        gu = torch.mm(F.rms_norm(h, (H,), self.ln2, eps), self.wgu.t())
        return h + torch.mm(F.silu(gu[:, :inter]) * gu[:, inter:], self.wd.t())

    def logits(self, h):
        F = self.torch.nn.functional
        return self.torch.mm(F.rms_norm(h, (self.cfg["hidden"],), self.norm, self.cfg["eps"]), self.lm_head.t())

    def draft_forward(self, st: dict, B: int, topk: int, ctx: int, sdpa_ctx):
        """The head forward of a draft step over B x topk rows, up to the draft logits."""
        torch = self.torch
        h = self.layer(torch.nn.functional.embedding(st["ids"], self.embed), st["hidden"], st["kc"], st["vc"],
                       B, topk, ctx, sdpa_ctx)
        return self.logits(h), h

    def select_topk(self, logits, h, scores, row_base, B: int, topk: int):
        """fp32 softmax + top-k over the draft vocabulary, d2t map, tree step (topk > 1)."""
        torch = self.torch
        probs = torch.softmax(logits.float(), dim=-1)
        if topk == 1:  # SGLang's fast_topk: max for k = 1
            tp, ti = torch.max(probs, dim=-1, keepdim=True)
        else:
            tp, ti = torch.topk(probs, topk, dim=-1)
        ti = ti + self.d2t[ti]  # draft vocabulary -> target ids
        if topk == 1:
            return ti.flatten(), h, scores * tp.view(B, 1)
        expand = scores.unsqueeze(2) * tp.view(B, topk, topk)  # parent score x child prob
        cs_p, cs_i = torch.topk(expand.flatten(start_dim=1), topk, dim=-1)  # best topk of topk^2
        ids = torch.gather(ti.view(B, topk * topk), 1, cs_i).flatten()
        parent = (cs_i // topk).flatten() + row_base
        return ids, h.index_select(0, parent), cs_p

    def draft_step(self, st: dict, B: int, topk: int, ctx: int, sdpa_ctx):
        """One draft step over B x topk rows: head forward, softmax + top-k, tree step."""
        logits, h = self.draft_forward(st, B, topk, ctx, sdpa_ctx)
        return self.select_topk(logits, h, st["scores"], st["row_base"], B, topk)

    def draft_extend(self, st: dict, B: int, q: int, ctx: int, sdpa_ctx):
        """Draft-extend over B x q tokens: fc over 3 target hidden states, the head, last row per request."""
        torch = self.torch
        hidden = torch.mm(st["hid3"], self.fc.t())
        h = self.layer(torch.nn.functional.embedding(st["ids"], self.embed), hidden, st["kc"], st["vc"],
                       B, q, ctx, sdpa_ctx)
        logits = self.logits(h)
        return logits.index_select(0, st["last"]), h.index_select(0, st["last"])


def greedy_accept(torch, st: dict, B: int, k: int):
    """Greedy tree verify: target argmax per node, compare with the node's draft token at its parent."""
    pred = torch.argmax(st["logits"], dim=-1).view(B, k)
    ppred = torch.gather(pred, 1, st["parent"])  # the target's choice after each node's parent
    match = (st["cand"][:, 1:] == ppred[:, 1:]).to(torch.int32)
    acc_len = torch.cumprod(match, dim=1).sum(dim=1)  # accepted draft tokens per request (0 .. k-1)
    pos = st["pos"]  # (1, k): 0 .. k-1
    idx = torch.where(pos <= acc_len.unsqueeze(1), pos, acc_len.unsqueeze(1)) + st["req_base"]
    flat = idx.flatten()
    tokens = pred.flatten().index_select(0, flat)  # accepted tokens + the bonus token
    hid = st["hid3"].index_select(0, flat)  # their target hidden states, for draft-extend
    return tokens, acc_len, hid


def _time_eager_flushed(torch, run, repeats: int, flush, cuda: bool):
    if not cuda:
        return _time_eager(torch, run, repeats, cuda)
    for _ in range(2):
        run()
    torch.cuda.synchronize()
    out = []
    for _ in range(repeats):
        flush.zero_()
        torch.cuda.synchronize()  # host and GPU idle: the eager launches are on the clock
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return out


def plan_points(batches, topks, ctxs, accept_tokens, steps) -> list[dict]:
    """Every point of a run, in the order measured (torch-free; the tests check the grid)."""
    pts = []
    for ctx in ctxs:
        for B in batches:
            for t in topks:
                pts.append({"phase": "draft_step", "batch": B, "topk": t, "tokens": t, "ctx": ctx})
                pts.append({"phase": "draft_forward", "batch": B, "topk": t, "tokens": t, "ctx": ctx})
    for B in batches:
        for t in topks:
            pts.append({"phase": "draft_topk", "batch": B, "topk": t, "tokens": t, "ctx": None})
    for B in batches:
        for k in accept_tokens:
            pts.append({"phase": "accept", "batch": B, "topk": None, "tokens": k, "ctx": None})
            pts.append({"phase": "argmax", "batch": B, "topk": None, "tokens": k, "ctx": None})
    for ctx in ctxs:
        for B in batches:
            for s in steps:
                pts.append({"phase": "draft_extend", "batch": B, "topk": None, "tokens": s + 1, "ctx": ctx, "steps": s})
    return pts


def measure_draft(
    out: str,
    model: str = "llama-3.1-8b",
    batches=(1, 2, 4, 8, 16, 32, 64),
    topks=(1, 4),
    ctxs=(512, 2048),
    accept_tokens=(2, 4, 8),
    steps=(2, 3),
    device: str = "cuda",
    repeats: int = 20,
    eager: bool = True,
    budget_s: float = 0,
    quick: bool = False,
    argv=None,
) -> dict:
    torch, cuda, cfg, progress, prov = start_model_measure("draft", model, HEADS, TINY, device, argv)
    deadline = Deadline(budget_s)
    qmax = max(max(topks), max(steps) + 1)
    t0 = time.monotonic()
    head = Eagle3Head(torch, cfg, device, max_pos=max(ctxs) + qmax + 1)
    flush = torch.empty(FLUSH_BYTES // 4 if cuda else 1, dtype=torch.float32, device=device)
    if cuda:
        torch.cuda.synchronize()
    progress.log(f"{model} EAGLE-3 head: {head.weight_bytes() / 2**30:.2f} GiB of random bf16 weights "
                 f"built in {time.monotonic() - t0:.1f} s")
    sdpa_name, sdpa_ctx = _sdpa_choice(torch, device, cfg, True)
    H, hkv, d, V = cfg["hidden"], cfg["kv_heads"], cfg["head_dim"], cfg["vocab"]
    gname = prov.get("gpu_name", "cpu")
    ds = {
        "name": f"{gpu_slug(gname) if cuda else 'cpu'}-{model}-draft",
        "description": (
            f"EAGLE-3 cycle pieces besides the target verify for {model} on one {gname}: one draft step over "
            "B x topk rows (head forward + softmax + top-k + tree step), greedy accept over B x k target logits "
            "(argmax + tree-verify-like gather; argmax alone too), draft-extend over B x (steps + 1) tokens with "
            "the fc; measured with `specsim measure draft` (CUDA-graph replay; random weights)."
        ),
        "provenance": dataset_provenance(
            "draft", prov, gname,
            (
                "engine-like torch EAGLE-3 head (SGLang LlamaForCausalLMEagle3 shapes), random bf16 weights: "
                "RMSNorm of embedding and hidden, concat to 2 x hidden, fused qkv, RoPE, KV-cache write, "
                f"SDPA ({sdpa_name} backend) with GQA heads packed over each request's contiguous draft KV cache, "
                "no mask, o-proj + residual, RMSNorm, fused gate_up + SiLU*mul, down + residual, final norm, "
                "lm_head over the draft vocabulary on every row; draft step: fp32 softmax, top-k (max for topk 1), "
                "d2t map, tree step for topk > 1; accept: fp32 argmax, parent gather, compare, cumprod, gather "
                "of tokens and 3 x hidden target states; draft-extend: fc over 3 x hidden first, last row per "
                f"request selected; torch {torch.__version__}"
            ),
            (
                f"CUDA graph replay of one phase, CUDA events, median (p10/p90) of {repeats} replays after 2 eager "
                f"warm-ups and 2 warm replays, the L2 flushed by a {FLUSH_BYTES >> 20} MiB write before each replay "
                "(outside the events); eager_points: the same phase launched eagerly from an idle GPU and host"
            ),
            torch.__version__, cuda and not quick,
        ),
        "model": model,
        "gpu": gpu_slug(gname) if cuda else "cpu",
        "tp": 1,
        "graph": cuda,
        "config": cfg,
        "points": [],
        "eager_points": [],
        "skipped": [],
        "errors": [],
    }
    plan = plan_points(batches, topks, ctxs, accept_tokens, steps)
    progress.start("draft", len(plan))
    bf = torch.bfloat16
    kv_cache: dict = {}

    def kv_for(B, ctx):
        if (B, ctx) not in kv_cache:
            kv_cache.clear()
            if cuda:
                torch.cuda.empty_cache()
            kv_cache[(B, ctx)] = torch.empty(2, B, hkv, ctx + qmax, d, dtype=bf, device=device).normal_()
        kv = kv_cache[(B, ctx)]
        return kv[0], kv[1]

    for i, pt in enumerate(plan):
        phase, B, ctx = pt["phase"], pt["batch"], pt["ctx"]
        tag = f"{phase} B={B} tokens={pt['tokens']}" + (f" ctx={ctx}" if ctx else "")
        if deadline.passed():
            ds["skipped"].append({**pt, "why": "time budget spent"})
            progress.step()
            continue
        try:
            if phase in ("draft_step", "draft_forward"):
                t = pt["topk"]
                kc, vc = kv_for(B, ctx)
                st = {
                    "ids": torch.randint(0, V, (B * t,), device=device),
                    "hidden": torch.randn(B * t, H, dtype=bf, device=device),
                    "scores": torch.rand(B, t, device=device),
                    "row_base": torch.arange(0, B * t, t, device=device).repeat_interleave(t),
                    "kc": kc,
                    "vc": vc,
                }

                fn = head.draft_step if phase == "draft_step" else head.draft_forward

                def run(st=st, B=B, t=t, ctx=ctx, fn=fn):
                    return fn(st, B, t, ctx, sdpa_ctx)
            elif phase == "draft_topk":
                t = pt["topk"]
                st = {
                    "logits": torch.randn(B * t, cfg["draft_vocab"], dtype=bf, device=device),
                    "hidden": torch.randn(B * t, H, dtype=bf, device=device),
                    "scores": torch.rand(B, t, device=device),
                    "row_base": torch.arange(0, B * t, t, device=device).repeat_interleave(t),
                }

                def run(st=st, B=B, t=t):
                    return head.select_topk(st["logits"], st["hidden"], st["scores"], st["row_base"], B, t)
            elif phase in ("accept", "argmax"):
                k = pt["tokens"]
                st = {
                    "logits": torch.randn(B * k, V, dtype=torch.float32, device=device),
                    "cand": torch.randint(0, 4, (B, k), device=device),  # small ids: some paths accept
                    # a tree: node j's parent is a random earlier node (node 0 is the root)
                    "parent": (torch.rand(B, k, device=device) * torch.arange(k, device=device)).long(),
                    "pos": torch.arange(k, device=device).view(1, k),
                    "req_base": (torch.arange(B, device=device) * k).view(B, 1),
                    "hid3": torch.randn(B * k, cfg["fuse"] * H, dtype=bf, device=device),
                }
                if phase == "accept":
                    def run(st=st, B=B, k=k):
                        return greedy_accept(torch, st, B, k)
                else:
                    def run(st=st):
                        return torch.argmax(st["logits"], dim=-1)
            else:  # draft_extend
                q = pt["tokens"]
                kc, vc = kv_for(B, ctx)
                st = {
                    "ids": torch.randint(0, V, (B * q,), device=device),
                    "hid3": torch.randn(B * q, cfg["fuse"] * H, dtype=bf, device=device),
                    "last": torch.arange(B, device=device) * q + (q - 1),
                    "kc": kc,
                    "vc": vc,
                }

                def run(st=st, B=B, q=q, ctx=ctx):
                    return head.draft_extend(st, B, q, ctx, sdpa_ctx)

            graph_ok = False
            if cuda:
                try:
                    ds["points"].append({**pt, **_ms_stats(_time_graph(torch, run, repeats, flush)), "graph": True})
                    graph_ok = True
                except Exception as exc:  # not capturable: time it eagerly, say so
                    ds["errors"].append(f"{tag}: graph capture failed, timed eagerly: {type(exc).__name__}: "
                                        f"{str(exc).splitlines()[0][:200] if str(exc) else ''}")
                    torch.cuda.synchronize()
            if not graph_ok or eager:
                est = _ms_stats(_time_eager_flushed(torch, run, max(3, repeats // 2), flush, cuda))
                (ds["eager_points"] if graph_ok else ds["points"]).append({**pt, **est, "graph": False})
            note = f"{tag}: {ds['points'][-1]['ms']:.3f} ms"
        except Exception as exc:
            ds["errors"].append(f"{tag}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
            note = "error"
            if cuda:
                torch.cuda.synchronize()
        progress.step(note=note)
        if i + 1 == len(plan) or plan[i + 1]["phase"] != phase:
            atomic_write_json(out, ds)  # checkpoint after every phase
    kv_cache.clear()
    progress.finish()
    if cuda:
        ds["provenance"]["hardware"]["gpu_state_end"] = gpu_state()
    ds["provenance"]["seconds"] = round(progress.elapsed(), 1)
    atomic_write_json(out, ds)
    return ds


def summary_lines(ds: dict) -> list[str]:
    lines = [f"{ds['name']}: {len(ds['points'])} graph points, {len(ds['eager_points'])} eager, "
             f"{len(ds['skipped'])} skipped, {len(ds['errors'])} errors"]
    eager = {(p["phase"], p["batch"], p["tokens"], p["ctx"]): p["ms"] for p in ds["eager_points"]}
    for phase in ("draft_step", "draft_forward", "draft_topk", "accept", "argmax", "draft_extend"):
        pts = [p for p in ds["points"] if p["phase"] == phase]
        if not pts:
            continue
        lines.append(f"{phase}: ms (graph; eager)")
        for p in pts:
            e = eager.get((phase, p["batch"], p["tokens"], p["ctx"]))
            lines.append(f"  B={p['batch']:<3} tokens={p['tokens']:<2}" + (f" ctx={p['ctx']:<5}" if p["ctx"] else "")
                         + f" {p['ms']:8.4f}" + (f"; {e:8.4f}" if e is not None else ""))
    for e in ds["errors"][:5]:
        lines.append(f"error: {e}")
    return lines
