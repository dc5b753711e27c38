"""Physics limits and invariants of the cost, cycle and acceptance models."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specsim
from specsim.physics import acceptance as acc
from specsim.physics.collectives import allreduce_us
from specsim.physics.cycle import baseline_step_ms, cycle_ms, cycle_phases_ms, verify_breakdown
from specsim.physics.moe import expected_distinct_experts, experts_read
from specsim.physics.params import scenario_params


def test_distinct_experts_limits():
    assert expected_distinct_experts(384, 8, 1) == pytest.approx(8.0)
    assert expected_distinct_experts(384, 8, 10_000) == pytest.approx(384.0, rel=1e-6)
    # FACTS: ~23.5 experts at 3 tokens, ~46 at 6 tokens (of 384, top-8)
    assert expected_distinct_experts(384, 8, 3) == pytest.approx(23.5, abs=0.1)
    assert expected_distinct_experts(384, 8, 6) == pytest.approx(46.0, abs=0.6)


@given(st.integers(1, 512), st.integers(1, 16), st.integers(1, 300))
def test_distinct_experts_bounds_and_monotone(e, k, n):
    k = min(k, e)
    d = expected_distinct_experts(e, k, n)
    assert k - 1e-9 <= d <= min(e, n * k) + 1e-9
    assert expected_distinct_experts(e, k, n + 1) >= d - 1e-12


def test_gathered_kernel_reads_k_per_token():
    assert experts_read(128, 8, 5, True) == 40
    assert experts_read(128, 8, 5, False) < 40


def test_allreduce_alpha_beta():
    assert allreduce_us(0, 8, 15.0, 2.7e11) == pytest.approx(15.0)
    assert allreduce_us(1e6, 1, 15.0, 2.7e11) == 0.0
    t1, t2 = allreduce_us(1e6, 8, 15.0, 2.7e11), allreduce_us(2e6, 8, 15.0, 2.7e11)
    assert t2 - t1 == pytest.approx(1e6 * 2 * 7 / 8 / 2.7e11 * 1e6)


def _free_overheads_scenario():
    """A dense, memory-bound deployment whose fixed costs are physically ~0, set through real
    parameters: no host time or syncs, no kernel floor, free launches and graph replays, no
    sampling kernels, no TP collectives, a tiny draft head and an empty context. Its verify of a
    few tokens then costs one decode step (the same weights stream once) and drafting is free."""
    from specsim.io.presets import scenario_from_dict

    d = specsim.build_scenario(model="llama-3.1-8b", gpu="h100", tp=1, ctx=0).model_dump()
    d["gpu"].update(kernel_floor_us=0.0, attention_fixed_us=0.0, vocab_topk_fixed_us=0.0, vocab_pass_bytes_per_s=1e14)
    d["engine"].update(graph_fixed_us=0.0, graph_node_us=0.0, eager_launch_us=0.0, sample_kernels=0, small_kernel_floor_us=0.0,
                       decode_sample_kernels=0, draft_preprocess_kernels=0, host_sync_us=0.0, host_syncs_per_cycle=0,
                       host_per_cycle_ms=0.0, host_per_token_us=0.0, host_per_request_us=0.0,
                       host_per_request_decode_us=0.0, host_per_decode_step_ms=0.0, multi_token_kernels_per_layer=0,
                       multi_token_extra_us_per_layer=0.0)
    d["draft"].update(hidden=8, intermediate=8, num_heads=1, num_kv_heads=1, head_dim=8, draft_vocab=8)
    return scenario_from_dict(d)


@pytest.mark.parametrize("alpha,gamma", [(0.7, 4), (0.5, 2), (0.9, 6), (0.8, 1)])
def test_leviathan_limit(alpha, gamma):
    """With free drafts and a verify that costs one decode step, the predicted speedup is
    Leviathan et al.'s closed form (1 - alpha^(gamma+1)) / (1 - alpha), i.i.d. acceptance alpha."""
    p = specsim.predict(_free_overheads_scenario(), steps=gamma, accept_rates=[alpha])
    assert p.verify_ms == pytest.approx(p.baseline_step_ms, rel=0.01)  # the limit's premise holds
    assert (p.cycle_ms - p.verify_ms) / p.cycle_ms < 1e-3  # drafting, accept and host ~free
    closed = (1 - alpha ** (gamma + 1)) / (1 - alpha)
    assert p.accept_length == pytest.approx(closed, rel=1e-9)
    assert p.speedup == pytest.approx(closed, rel=0.01)


def test_leviathan_limit_fails_with_real_overheads():
    """The same deployment with the engine's own launch and host costs lands well below the closed form."""
    p = specsim.predict(model="llama-3.1-8b", gpu="h100", tp=1, ctx=0, steps=4, accept_rates=[0.7])
    assert p.speedup < 0.9 * (1 - 0.7 ** 5) / 0.3


def test_dense_verify_flat_moe_verify_grows():
    dense = specsim.verify_ms([1, 2, 4, 8], model="llama-3.1-70b", gpu="h100", tp=8).verify_ms
    moe = specsim.verify_ms([1, 2, 4, 8], model="qwen3-30b-a3b", gpu="h100", tp=1).verify_ms
    assert (dense[-1] - dense[1]) / dense[1] < 0.05  # memory-bound flat region
    assert (moe[-1] - moe[1]) / moe[1] > 0.15  # new experts with every token


def test_compute_takes_over_at_large_width():
    v = specsim.verify_ms([1, 4096], model="llama-3.1-8b", gpu="h100", tp=1)
    assert v.breakdown_ms["compute"][1] > v.breakdown_ms["weights"][1]
    # one token is memory-bound: compute shows only as its small unhidden share
    assert 0.0 < v.breakdown_ms["compute"][0] < 0.01 * v.breakdown_ms["weights"][0]


def test_monotone_in_acceptance():
    toks = [specsim.predict(steps=3, accept=a).tok_s for a in (1.2, 1.8, 2.4, 3.0, 3.6)]
    assert all(b > a for a, b in zip(toks, toks[1:]))


def test_monotone_in_allreduce_latency():
    sc = specsim.build_scenario(steps=3)
    p = scenario_params(sc)
    out = []
    for scale in (0.5, 1.0, 2.0, 4.0):
        p["allreduce_scale"] = scale
        out.append(float(cycle_ms(cycle_phases_ms(p, 2.0))))
    assert all(b > a for a, b in zip(out, out[1:]))


def test_vectorised_equals_scalar():
    sc = specsim.build_scenario(steps=3)
    p = scenario_params(sc)
    widths = np.array([1.0, 3.0, 6.0, 17.0])
    vec = verify_breakdown(p, num_draft_tokens=widths)["total"]
    for w, v in zip(widths, vec):
        assert float(verify_breakdown(p, num_draft_tokens=w)["total"]) == pytest.approx(v)


def test_graph_batch_padding_costs_like_the_next_captured_size():
    a = specsim.verify_ms([4], batch=9, gpu="h200", model="llama-3.1-8b", tp=1).verify_ms[0]
    b = specsim.verify_ms([4], batch=10, gpu="h200", model="llama-3.1-8b", tp=1).verify_ms[0]
    assert a == pytest.approx(b, rel=1e-3)  # dense: the padded request costs the same weights
    a = specsim.verify_ms([4], batch=9, gpu="h200").verify_ms[0]
    b = specsim.verify_ms([4], batch=10, gpu="h200").verify_ms[0]
    assert a < b < a * 1.05  # MoE: padding rows route to no new experts


def test_vllm_pads_tokens_to_capture_sizes():
    kw = dict(model="llama-3.1-8b", gpu="h100", tp=1, engine="vllm")
    v = specsim.verify_ms([5, 8], **kw).verify_ms
    assert v[0] == pytest.approx(v[1], rel=1e-3)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8), st.integers(1, 10))
def test_acceptance_conversions_round_trip(rates, steps):
    pmf = acc.pmf_from_rates(rates, steps)
    assert pmf.sum() == pytest.approx(1.0)
    assert (pmf >= -1e-12).all()
    tau = acc.tau_from_rates(rates, steps)
    assert 1.0 - 1e-9 <= tau <= steps + 1 + 1e-9
    assert (pmf * np.arange(1, steps + 2)).sum() == pytest.approx(tau)
    back = acc.rates_from_pmf(pmf)
    assert acc.tau_from_rates(back, steps) == pytest.approx(tau)


@settings(max_examples=40, deadline=None)
@given(st.floats(1.0, 6.0), st.integers(5, 9))
def test_scaled_profile_hits_tau(tau, steps):
    r = acc.scale_profile_to_tau([0.8, 0.6, 0.4], tau, steps)
    assert acc.tau_from_rates(r, steps) == pytest.approx(tau, abs=1e-6)


def test_tree_reduces_to_chain_and_beats_it():
    r = [0.7, 0.6, 0.5, 0.4]
    assert acc.tree_accept_length(r, 4, 1, 5) == pytest.approx(acc.tau_from_rates(r, 4))
    chain = acc.tau_from_rates(r, 4)
    tree = acc.tree_accept_length(r, 4, 4, 16)
    assert chain < tree <= 5.0


def test_tok_s_is_expected_tokens_over_expected_cycle_time():
    """tok/s over many cycles = batch x E[accepted length] / E[cycle time], the expectations taken
    over the accepted-length distribution (PMF from the rates; each outcome's cycle costs its own
    host time per committed token) - an independent route to the number predict reports."""
    rates, steps, batch = [0.8, 0.6, 0.5], 3, 4
    p = specsim.predict(steps=steps, accept_rates=rates, batch=batch)
    q = scenario_params(specsim.build_scenario(steps=steps, accept_rates=rates, batch=batch))
    pmf = acc.pmf_from_rates(rates, steps)
    lengths = np.arange(1, steps + 2, dtype=float)
    per_outcome_ms = cycle_ms(cycle_phases_ms(q, lengths))  # one cycle in which every request accepts L
    expected_tokens = batch * (pmf * lengths).sum()
    expected_ms = (pmf * per_outcome_ms).sum()
    assert p.tok_s == pytest.approx(expected_tokens / expected_ms * 1e3, rel=1e-9)
    assert p.baseline_tok_s == pytest.approx(batch / baseline_step_ms(q)["total"] * 1e3, rel=1e-9)
    # the reported parts add up to the reported wholes
    assert sum(p.phases_ms.values()) == pytest.approx(p.cycle_ms, rel=1e-12)
    assert sum(p.verify_breakdown_ms.values()) == pytest.approx(p.verify_ms, rel=1e-12)


def test_draft_sharing_target_lm_head_costs_more():
    from specsim.io.presets import scenario_from_dict

    sc = specsim.build_scenario()
    d = sc.model_dump()
    d["draft"]["lm_head"] = "target"
    own, shared = specsim.predict(sc), specsim.predict(scenario_from_dict(d))
    assert shared.phases_ms["draft"] > own.phases_ms["draft"]
    assert shared.verify_ms == pytest.approx(own.verify_ms)


@pytest.mark.parametrize("xtol", [2e-12, 1e-10, 1e-6])
def test_brentq_matches_scipy_bit_for_bit(xtol):
    """specsim.physics.roots.brentq (kept off scipy.optimize for the cold start) is scipy's brentq."""
    import math

    from scipy.optimize import brentq as scipy_brentq

    from specsim.physics.roots import brentq

    cases = [(lambda x: x ** 2 - 2, 0, 3), (lambda x: math.exp(-x) - 0.3, -5, 30), (lambda x: math.tanh(10 * (x - 0.123)), -1, 1),
             (lambda x: x ** 3 - x - 1, 1, 2), (lambda x: math.cos(x) - x, 0, 1), (lambda x: (x - 1e-3) ** 5, -2, 4),
             (lambda x: float(acc.tau_from_rates(0.7 ** math.exp(x) * np.ones(3), 3)) - 2.2, -30.0, 12.0)]
    for f, a, b in cases:
        assert brentq(f, a, b, xtol=xtol) == scipy_brentq(f, a, b, xtol=xtol)
    with pytest.raises(ValueError):
        brentq(lambda x: x ** 2 + 1, -1, 1)


def test_flat_points_in_blocks_equal_one_pass(monkeypatch):
    """throughput() over a flat point set runs in blocks; every number equals the one-pass result (to 1e-14)."""
    import specsim.physics.cycle as cy

    rng = np.random.default_rng(0)
    n = 5000
    p = scenario_params(specsim.build_scenario())
    p["batch"] = rng.integers(1, 65, n).astype(float)
    p["ctx"] = rng.integers(0, 32768, n).astype(float)
    p["hbm_bytes_per_s"] = rng.uniform(1e12, 8e12, n)
    tau = rng.uniform(1.0, 3.0, n)
    p["kernel_floor_us"] = np.full(n, p["kernel_floor_us"])
    p["kernel_floor_us"][2500] = np.inf  # one block (of five) not finite: it alone takes the general path
    monkeypatch.setattr(cy, "FLAT_CHUNK", 10 ** 9)
    with np.errstate(all="ignore"):
        whole = cy.throughput(p, tau)
    monkeypatch.setattr(cy, "FLAT_CHUNK", 1024)
    for threads in (1, 3):  # the blocks in turn, and spread over threads (each with its own block state)
        with np.errstate(all="ignore"):
            blocks = cy.throughput(p, tau, threads=threads)
        # equal to the last bit or one (a block's sums may round once differently: seen 3.6e-16 in the draft phase)
        for a, b in [(blocks[k], whole[k]) for k in ("cycle_ms", "tok_s", "baseline_tok_s", "speedup")] + [
                (blocks["phases"][k], whole["phases"][k]) for k in whole["phases"]]:
            assert np.array_equal(np.isfinite(a), np.isfinite(b)) and np.array_equal(np.isnan(a), np.isnan(b))
            np.testing.assert_allclose(a[np.isfinite(b)], b[np.isfinite(b)], rtol=1e-14, atol=0)
    assert np.isfinite(whole["speedup"][:2048]).all() and not np.isfinite(whole["speedup"][2500])
    from specsim.physics.operators import FLAT

    assert FLAT.n == 0 and FLAT.cache is None  # the caller's thread is left outside any block


def test_flat_block_shortcuts_equal_the_general_path():
    """Inside a flat block throughput() skips all-zero operators, reuses shared sub-expressions and
    takes launch = count x node gap where every point replays a graph; every number and shape equals
    the general array arithmetic (``_throughput`` outside a flat block), non-finite inputs included."""
    import sys
    from pathlib import Path

    import specsim.physics.cycle as cy

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_predict import random_params

    def leaves(x, pre=""):
        if isinstance(x, dict):
            for k, v in x.items():
                yield from leaves(v, pre + "." + k)
        else:
            yield pre, x

    cases = ((0, None, None), (1, "kernel_floor_us", (np.inf, np.nan)), (2, "hbm_bytes_per_s", (np.inf, np.nan)),
             (3, "num_layers", (np.inf, np.nan)), (4, "head_dim", (np.inf, np.nan)),  # head_dim: skipped GQA operators only
             (5, "mem_efficiency", (0.0, 0.0)), (6, "kernel_floor_us", (1e308, 1e308)))  # finite inputs, non-finite times
    for seed, poison, bad in cases:
        p, tau = random_params(3000, seed)
        if poison:  # the block's input check (non-finite) or the forward's total check (finite) falls back
            p[poison] = np.array(p[poison], dtype=float) * np.ones(3000)
            p[poison][[5, 17]] = bad
        with np.errstate(all="ignore"):
            flat = cy.throughput(p, tau)
            general = cy._throughput(p, tau)
        a, b = list(leaves(flat)), list(leaves(general))
        assert [k for k, _ in a] == [k for k, _ in b]
        for (k, x), (_, y) in zip(a, b):
            assert np.shape(x) == np.shape(y), k
            # the same numbers up to rounding (floors and launches summed as sum(count) x floor), the same inf and nan
            assert np.array_equal(np.isfinite(x), np.isfinite(y)), k
            assert np.allclose(x, y, rtol=1e-12, atol=0.0, equal_nan=True), k


def test_decode_step_reused_across_steps_is_the_fresh_one():
    """throughput() reuses the plain decode step of a scenario when only steps/topk/draft tokens change:
    the reused step equals a fresh baseline_step_ms at every step count, and callers get their own arrays."""
    import specsim.physics.cycle as cy

    p = scenario_params(specsim.build_scenario())
    cy._BASELINE_CACHE.clear()
    for steps in (1, 3, 7):
        q = {**p, "steps": float(steps), "num_draft_tokens": float(steps + 1)}
        th = cy.throughput(q, 1.5)
        fresh = baseline_step_ms(q)
        assert {k: float(v) for k, v in th["baseline"].items()} == {k: float(v) for k, v in fresh.items()}
    assert len(cy._BASELINE_CACHE) == 1
    a, b = cy.throughput(p, 1.5)["baseline"], cy.throughput(p, 1.5)["baseline"]
    assert all(a[k] is not b[k] for k in a if isinstance(a[k], np.ndarray))
    q = {**p, "batch": p["batch"] + 1}  # any other parameter: a new decode step
    assert float(cy.throughput(q, 1.5)["baseline"]["total"]) == float(baseline_step_ms(q)["total"])


def test_cycle_gpu_phases_are_reused_across_accept_lengths():
    """The cycle's GPU phases do not depend on tau: one scenario at several accept lengths computes them
    once, and every result equals a fresh cycle_phases_ms to the bit (host time still follows tau)."""
    import specsim.physics.cycle as cy

    p = scenario_params(specsim.build_scenario())
    cy._GPU_CACHE.clear()
    hosts = []
    for tau in (1.2, 1.9, 2.6):
        th = cy.throughput(p, tau)
        fresh = cy.cycle_phases_ms(p, tau)
        assert {k: float(v) for k, v in th["phases"].items()} == {k: float(v) for k, v in fresh.items()}
        hosts.append(float(th["phases"]["host"]))
    assert len(cy._GPU_CACHE) == 1 and hosts == sorted(hosts) and hosts[0] < hosts[-1]
    q = {**p, "steps": p["steps"] + 1.0, "num_draft_tokens": p["num_draft_tokens"] + 1.0}  # a new cycle
    assert float(cy.throughput(q, 1.5)["phases"]["verify"]) == float(cy.verify_breakdown(q)["total"])
    assert len(cy._GPU_CACHE) == 2


def test_scale_profile_to_tau_scalar_matches_lockstep():
    """The one-scenario Brent path and the array bisection find the same profile scale."""
    base = np.array([0.8, 0.7, 0.6])
    for steps, tau in ((1, 1.5), (3, 2.2), (6, 4.0), (8, 1.01), (5, 5.99)):
        one = acc.scale_profile_to_tau(base, tau, steps)
        many = acc.scale_profile_to_tau(base, np.array([tau]), np.array([steps]))[0]
        assert np.allclose(one, many, rtol=1e-9, atol=0)
        assert abs(float(acc.tau_from_rates(one, steps)) - tau) < 1e-9


def test_a_tree_accept_length_carries_to_other_step_counts_at_its_own_width():
    """The per-position profile implied by a tree's accept length is read at the tree it was given for (its
    steps, topk and draft tokens); deeper trees of the same width then accept at least as much."""
    from specsim.analysis.build import build_scenario
    from specsim.physics.acceptance import expected_accept_length

    sc = build_scenario(None, model="llama-3.1-8b", gpu="h200", tp=1, steps=5, topk=3, draft_tokens=6, accept=3.0)
    taus = [expected_accept_length(build_scenario(sc, steps=s, draft_tokens=6)) for s in (3, 5, 6, 7)]
    assert taus[1] == pytest.approx(3.0, rel=1e-9)
    assert taus[0] <= taus[1] <= taus[2] + 1e-12 <= taus[3] + 2e-12


def test_flat_block_with_a_scalar_launch_flag_equals_the_general_path():
    """A flat set where only the context varies: the launch flag stays one plain number (an eager engine, or a batch
    past the largest captured graph); the flat path gives what the general arithmetic does."""
    import specsim.physics.cycle as cy

    for kw in ({"model": "llama-3.1-8b", "engine": "hf-transformers"}, {"engine": "sglang", "batch": 300}):
        p = scenario_params(specsim.build_scenario(**kw))
        p["ctx"] = np.linspace(512, 8192, 50)
        flat, general = cy.throughput(p, 2.0), cy._throughput(p, 2.0)
        assert np.allclose(flat["speedup"], general["speedup"], rtol=1e-12, atol=0.0)


def test_flat_block_with_a_non_finite_plain_parameter_takes_the_general_path():
    """A plain (not per-point) parameter that is inf or nan sends the block down the general arithmetic: the
    shortcuts (one path's all-reduce numbers, the size table) would otherwise answer where the general path has nan."""
    import sys
    from pathlib import Path

    import specsim.physics.cycle as cy

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_predict import random_params

    for key, bad in (("allreduce_max_bytes_eager", np.inf), ("num_draft_tokens", np.nan)):
        p, tau = random_params(400, 3)
        p[key] = bad
        with np.errstate(all="ignore"):
            flat, general = cy.throughput(p, tau), cy._throughput(p, tau)
        for k in ("speedup", "cycle_ms", "tok_s"):
            assert np.array_equal(np.isfinite(flat[k]), np.isfinite(general[k])), (key, k)
            assert np.allclose(flat[k], general[k], rtol=1e-12, atol=0.0, equal_nan=True), (key, k)


def test_flat_block_shares_each_forwards_static_part_but_not_the_batch():
    """A flat block computes a forward's static part (shapes, counts) once and hands it to every forward of the block
    (operators.static); the speculative and plain runs of a point differ in the running batch alone, so with the
    speculative cap binding for some points and every parameter random, the flat path still gives the general
    arithmetic's numbers, and the static part is built once per block for the target and once for the draft."""
    import sys
    from pathlib import Path

    import specsim.physics.cycle as cy
    import specsim.physics.operators as ops

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_predict import random_params

    p, tau = random_params(300, 7)
    p["spec_running_cap"] = 24.0  # binds where batch > 24: the speculative run's p differs in its batch
    calls = {"target": 0, "draft": 0}
    real_target, real_draft = ops._target_static, ops._draft_static

    def counting(name, fn):
        def wrapped(q):
            calls[name] += 1
            return fn(q)
        return wrapped

    ops._target_static, ops._draft_static = counting("target", real_target), counting("draft", real_draft)
    try:
        flat = cy.throughput(p, tau)
    finally:
        ops._target_static, ops._draft_static = real_target, real_draft
    general = cy._throughput(p, tau)
    assert calls == {"target": 1, "draft": 1}
    assert (np.asarray(flat["running_requests"]) < np.asarray(p["batch"])).any()
    for k in ("speedup", "cycle_ms", "tok_s", "baseline_tok_s"):
        assert np.allclose(flat[k], general[k], rtol=1e-12, atol=0.0), k
