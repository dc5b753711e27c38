"""The GEMM shapes ``measure gpu`` times: each preset model's per-rank projections at its usual TP.

Data, not code: one row per distinct (K, N) per model. Rows are derived from the public configs
(models/models.json names the sources) with the per-rank split of tensor parallelism: column-
parallel layers (qkv, gate_up, lm_head, MLA up-projections) split N, row-parallel ones (o, down)
split K; MLA's down-projections (q_a, kv_a) are replicated. Routed experts at TP are split like a
dense MLP (SGLang's default TP-MoE), each expert's intermediate divided by TP.
"""

from __future__ import annotations

# M (tokens per forward) at which every shape is timed.
M_VALUES = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)

# Model dimensions used below (public configs; see models/models.json for sources).
_DEEPSEEK_V3 = dict(  # MLA + MoE; Kimi-K2 shares it (below)
    hidden=7168,
    heads=128,
    q_lora=1536,
    kv_lora=512,
    qk_nope=128,
    qk_rope=64,
    v_head=128,
    intermediate=18432,
    moe_intermediate=2048,
    experts=256,
    topk=8,
    vocab=129280,
    tp=8,
)

MODELS = {
    "llama-3.1-8b": dict(hidden=4096, heads=32, kv_heads=8, head_dim=128, intermediate=14336, vocab=128256, tp=1),
    "llama-3.1-70b": dict(hidden=8192, heads=64, kv_heads=8, head_dim=128, intermediate=28672, vocab=128256, tp=4),
    "qwen3-30b-a3b": dict(
        hidden=2048, heads=32, kv_heads=4, head_dim=128, moe_intermediate=768, experts=128, topk=8, vocab=151936, tp=1
    ),
    "deepseek-v3": _DEEPSEEK_V3,
    "kimi-k2": dict(_DEEPSEEK_V3, heads=64, experts=384, vocab=163840),  # DeepSeek-V3's architecture, wider MoE
}


def _experts(name: str, c: dict, inter: int) -> list[dict]:
    """The routed experts' two grouped GEMMs, each expert's intermediate ``inter`` per rank."""
    tp, e, k = c["tp"], c["experts"], c["topk"]
    return [
        dict(model=name, tp=tp, op="experts_gate_up", kind="grouped", k=c["hidden"], n=2 * inter, experts=e, topk=k),
        dict(model=name, tp=tp, op="experts_down", kind="grouped", k=inter, n=c["hidden"], experts=e, topk=k),
    ]


def _dense_llama(name: str, c: dict) -> list[dict]:
    tp = c["tp"]
    qkv = (c["heads"] + 2 * c["kv_heads"]) * c["head_dim"] // tp
    return [
        dict(model=name, tp=tp, op="qkv", kind="dense", k=c["hidden"], n=qkv),
        dict(model=name, tp=tp, op="o", kind="dense", k=c["heads"] * c["head_dim"] // tp, n=c["hidden"]),
        dict(model=name, tp=tp, op="gate_up", kind="dense", k=c["hidden"], n=2 * c["intermediate"] // tp),
        dict(model=name, tp=tp, op="down", kind="dense", k=c["intermediate"] // tp, n=c["hidden"]),
        dict(model=name, tp=tp, op="lm_head", kind="dense", k=c["hidden"], n=c["vocab"] // tp),
    ]


def _qwen3_moe(name: str, c: dict) -> list[dict]:
    tp = c["tp"]
    inter = c["moe_intermediate"] // tp
    return [
        dict(
            model=name,
            tp=tp,
            op="qkv",
            kind="dense",
            k=c["hidden"],
            n=(c["heads"] + 2 * c["kv_heads"]) * c["head_dim"] // tp,
        ),
        dict(model=name, tp=tp, op="o", kind="dense", k=c["heads"] * c["head_dim"] // tp, n=c["hidden"]),
        dict(model=name, tp=tp, op="router", kind="dense", k=c["hidden"], n=c["experts"]),
        dict(model=name, tp=tp, op="lm_head", kind="dense", k=c["hidden"], n=c["vocab"] // tp),
    ] + _experts(name, c, inter)


def _mla_moe(name: str, c: dict, with_dense: bool) -> list[dict]:
    tp = c["tp"]
    h = c["heads"] // tp
    inter = c["moe_intermediate"] // tp
    rows = [
        dict(model=name, tp=tp, op="q_b", kind="dense", k=c["q_lora"], n=h * (c["qk_nope"] + c["qk_rope"])),
        dict(model=name, tp=tp, op="kv_b", kind="dense", k=c["kv_lora"], n=h * (c["qk_nope"] + c["v_head"])),
        dict(model=name, tp=tp, op="o", kind="dense", k=h * c["v_head"], n=c["hidden"]),
        dict(model=name, tp=tp, op="lm_head", kind="dense", k=c["hidden"], n=c["vocab"] // tp),
    ] + _experts(name, c, inter)
    if with_dense:
        rows = [
            dict(
                model=name,
                tp=tp,
                op="q_a_kv_a",
                kind="dense",
                k=c["hidden"],
                n=c["q_lora"] + c["kv_lora"] + c["qk_rope"],
            ),
            dict(model=name, tp=tp, op="dense_gate_up", kind="dense", k=c["hidden"], n=2 * c["intermediate"] // tp),
            dict(model=name, tp=tp, op="dense_down", kind="dense", k=c["intermediate"] // tp, n=c["hidden"]),
            dict(model=name, tp=tp, op="shared_gate_up", kind="dense", k=c["hidden"], n=2 * inter),
            dict(model=name, tp=tp, op="shared_down", kind="dense", k=inter, n=c["hidden"]),
        ] + rows
    return rows


def gemm_shapes() -> list[dict]:
    """All shapes, deduplicated on (kind, K, N, experts): the first model that has one names it."""
    rows = (
        _dense_llama("llama-3.1-8b", MODELS["llama-3.1-8b"])
        + _dense_llama("llama-3.1-70b", MODELS["llama-3.1-70b"])
        + _qwen3_moe("qwen3-30b-a3b", MODELS["qwen3-30b-a3b"])
        + _mla_moe("deepseek-v3", MODELS["deepseek-v3"], with_dense=True)
        # Kimi-K2 shares DeepSeek-V3's replicated / dense / shared-expert shapes.
        + _mla_moe("kimi-k2", MODELS["kimi-k2"], with_dense=False)
    )
    seen, out = {}, []
    for r in rows:
        key = (r["kind"], r["k"], r["n"], r.get("experts"))
        if key in seen:
            seen[key].setdefault("also", []).append(f"{r['model']}/tp{r['tp']}/{r['op']}")
            continue
        r["name"] = f"{r['model']}/tp{r['tp']}/{r['op']}"
        seen[key] = r
        out.append(r)
    return out


# Attention (measure gpu): Llama-3.1-8B GQA, per request KV of ctx (+ the new tokens).
ATTENTION_SHAPE = dict(model="llama-3.1-8b", q_heads=32, kv_heads=8, head_dim=128)
ATTENTION_BATCH = (1, 2, 4, 8, 16, 32, 64)
ATTENTION_CTX = (512, 2048, 8192, 16384)
ATTENTION_Q = (1, 2, 4, 8)

TOPK_VOCABS = (128256, 163840)
TOPK_ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
TOPK_K = (1, 8)

GRAPH_NODES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
COPY_BYTES = tuple(2**p for p in (20, 22, 24, 26, 28, 30, 32))
