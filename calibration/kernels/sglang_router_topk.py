"""Kernels per call and GPU time per call of SGLang's compiled router top-k and MoE sum, inside a CUDA graph.

GLM-4.5/4.7 (and GLM-4.7-Flash) route through ``biased_grouped_topk_impl`` (SGLang v0.5.6 and the
tails-mpt fork 63291f7f51, ``python/sglang/srt/layers/moe/topk.py``, ``@torch.compile(dynamic=True)``):
``moe_fused_gate`` needs at most 32 experts per group and GLM has 64 or 160 in one group. Its body is
copied below from that file (Apache-2.0, https://github.com/sgl-project/sglang), the expert-location
remap left out (the identity without expert parallelism). The small-batch MoE sum
(``moe_sum_reduce_torch_compile``, ``layers/moe/fused_moe_triton/fused_moe.py`` v0.5.6, used up to 32
tokens) is copied the same way.

For each shape and token count: the kernels one call launches (torch profiler, CUDA activities of one
eager call after warm-up: kernels, memsets and copies) and the time per call with 100 calls captured
in one CUDA graph (median of 15 replays; the graph node gap included). Needs torch (with Inductor /
Triton) on a CUDA GPU; it never runs in CI:

    python3 calibration/kernels/sglang_router_topk.py OUT.json
"""
# ruff: noqa: B023  (each closure is captured into a CUDA graph in the iteration that defines it)
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from small_kernels import _provenance, replay_us  # noqa: E402


def biased_grouped_topk_impl(hidden_states, gating_output, correction_bias, topk, renormalize,
                             num_expert_group=None, topk_group=None, num_fused_shared_experts=0,
                             routed_scaling_factor=None, num_token_non_padded=None,
                             apply_routed_scaling_factor_on_output=False):
    # --- body as in SGLang v0.5.6 layers/moe/topk.py (expert-location remap omitted) ---
    assert hidden_states.shape[0] == gating_output.shape[0], "Number of tokens mismatch"
    scores = gating_output.sigmoid()
    num_token = scores.shape[0]
    num_experts = scores.shape[1]
    scores_for_choice = scores.view(num_token, -1) + correction_bias.unsqueeze(0)
    group_scores = scores_for_choice.view(num_token, num_expert_group, -1).topk(2, dim=-1)[0].sum(dim=-1)
    group_idx = torch.topk(group_scores, k=topk_group, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores)
    group_mask.scatter_(1, group_idx, 1)
    score_mask = (group_mask.unsqueeze(-1).expand(num_token, num_expert_group, scores.shape[-1] // num_expert_group)
                  .reshape(num_token, -1))
    tmp_scores = scores_for_choice.masked_fill(~score_mask.bool(), float("-inf"))
    _, topk_ids = torch.topk(tmp_scores, k=topk, dim=-1, sorted=(True if num_fused_shared_experts > 0 else False))
    topk_weights = scores.gather(1, topk_ids)
    if num_fused_shared_experts:
        topk_ids[:, -1] = torch.randint(low=num_experts, high=num_experts + num_fused_shared_experts,
                                        size=(topk_ids.size(0),), dtype=topk_ids.dtype, device=topk_ids.device)
        if routed_scaling_factor is not None:
            topk_weights[:, -1] = topk_weights[:, :-1].sum(dim=-1) / routed_scaling_factor
    if renormalize:
        topk_weights_sum = (topk_weights.sum(dim=-1, keepdim=True) if num_fused_shared_experts == 0
                            else topk_weights[:, :-1].sum(dim=-1, keepdim=True))
        topk_weights = topk_weights / topk_weights_sum
        if apply_routed_scaling_factor_on_output:
            topk_weights *= routed_scaling_factor
    topk_weights, topk_ids = topk_weights.to(torch.float32), topk_ids.to(torch.int32)
    if num_token_non_padded is not None:  # _mask_topk_ids_padded_region
        indices = torch.arange(0, topk_ids.shape[0], device=topk_ids.device)
        topk_ids[indices >= num_token_non_padded, :] = -1
    return topk_weights, topk_ids


def moe_sum_reduce(x, out, routed_scaling_factor):
    torch.sum(x, dim=1, out=out)
    out.mul_(routed_scaling_factor)


#: (name, routed experts, top-k without the shared slot, hidden, routed scaling factor) from the models' config.json
SHAPES = [("glm-4.7-flash", 64, 4, 2048, 1.8), ("glm-4.7", 160, 8, 5120, 2.5)]
TOKENS = [1, 4, 8, 32, 64, 192]


def count_kernels(fn) -> tuple[int, list[str]]:
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len(names), names


def graph_us(fn, calls: int = 100, reps: int = 15) -> float:
    """Median per-call time (us) of ``fn`` captured ``calls`` times in one graph (:func:`replay_us`)."""
    return statistics.median(t / calls for t in replay_us([fn], calls, reps))


def main(out_path: str) -> None:
    dev = torch.device("cuda")
    topk_c = torch.compile(biased_grouped_topk_impl, dynamic=True)
    sum_c = torch.compile(moe_sum_reduce)
    points = []
    for name, E, k, H, rsf in SHAPES:
        bias = torch.randn(E, device=dev, dtype=torch.float32)
        for T in TOKENS:
            logits = torch.randn(T, E, device=dev, dtype=torch.float32)
            hidden = torch.randn(T, H, device=dev, dtype=torch.bfloat16)
            pad = torch.tensor([T], device=dev, dtype=torch.int32)
            for masked in (False, True):
                def call():
                    return topk_c(hidden, logits, bias, k + 1, True, num_expert_group=1, topk_group=1,
                                  num_fused_shared_experts=1, routed_scaling_factor=rsf,
                                  num_token_non_padded=pad if masked else None)
                n, names = count_kernels(call)
                us = graph_us(call)
                points.append({"op": "biased_grouped_topk", "shape": name, "experts": E, "topk": k + 1, "tokens": T,
                               "num_token_non_padded": masked, "kernels": n, "us": us, "kernel_names": names})
                print(name, T, "masked" if masked else "plain", n, f"{us:.2f} us", flush=True)
            if T <= 32:
                x = torch.randn(T, k + 1, H, device=dev, dtype=torch.bfloat16)
                o = torch.empty(T, H, device=dev, dtype=torch.bfloat16)

                def sum_call():
                    return sum_c(x, o, rsf)
                n, names = count_kernels(sum_call)
                us = graph_us(sum_call)
                points.append({"op": "moe_sum_reduce_torch_compile", "shape": name, "topk": k + 1, "hidden": H,
                               "tokens": T, "kernels": n, "us": us, "kernel_names": names})
                print(name, T, "sum", n, f"{us:.2f} us", flush=True)
    # the floor any captured kernel pays, for reference: a tiny add_
    z = torch.zeros(256, device=dev)
    floor = graph_us(lambda: z.add_(1.0))
    doc = {"name": "h200-sglang-router-topk", "provenance": _provenance(), "tiny_add_us": floor,
           "description": __doc__.strip().splitlines()[0], "points": points}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "h200-sglang-router-topk.json")
