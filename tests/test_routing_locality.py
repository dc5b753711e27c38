"""Routing locality of a MoE's verify tokens (``target.moe.routing_locality``, rho): limits, direction, CLI."""

import json

import pytest

from specsim.analysis.build import build_scenario
from specsim.analysis.predict import predict
from specsim.analysis.whatif import edit_scenario, whatif_routing
from specsim.errors import SpecsimError
from specsim.physics.moe import expected_distinct_experts, routing_skew_of
from specsim.physics.operators import target_ops
from specsim.physics.params import scenario_params

QWEN_MOE = dict(model="qwen3-30b-a3b", gpu="h200", tp=1, batch=8)


def _with_rho(sc, rho):
    return edit_scenario(sc, lambda d: d["target"]["moe"].update(routing_locality=rho))


def _expert_weight_bytes(ops):
    return sum(float(o.bytes) for o in ops if o.name in ("experts_gate_up", "experts_down"))


def test_prior_is_one_and_leaves_every_prediction_unchanged():
    sc = build_scenario(**QWEN_MOE)
    assert sc.target.moe.routing_locality == 1.0
    w = whatif_routing(locality=1.0, **QWEN_MOE)
    assert w.after.tok_s == pytest.approx(w.before.tok_s, rel=1e-12)
    assert w.after.verify_ms == pytest.approx(w.before.verify_ms, rel=1e-12)


def test_lower_locality_cheapens_the_verify_and_leaves_decode_alone():
    rhos = (1.0, 0.8, 0.55, 0.3, 0.0)
    runs = [whatif_routing(locality=r, **QWEN_MOE).after for r in rhos]
    verify = [r.verify_ms for r in runs]
    assert all(a > b for a, b in zip(verify, verify[1:])), verify  # fewer distinct experts, strictly less to read
    base = {r.baseline_tok_s for r in runs}
    assert max(base) == pytest.approx(min(base), rel=1e-12)  # a 1-token decode has no tokens to share experts
    assert runs[2].tok_s > runs[0].tok_s


def test_at_zero_locality_a_verify_reads_the_experts_of_a_decode():
    """rho = 0: each request's verify tokens all pick its one token's experts, so the verify reads what decode reads."""
    sc = build_scenario(**QWEN_MOE)
    p = scenario_params(_with_rho(sc, 0.0))
    b, ndt = 8, 4
    verify = target_ops(p, ndt, batch=b, routed_tokens=b * ndt, independent_tokens=b * (1 + 0.0 * (ndt - 1)), verify=True)
    decode = target_ops(p, 1, batch=b)
    assert _expert_weight_bytes(verify) == pytest.approx(_expert_weight_bytes(decode), rel=1e-12)
    E, k = sc.target.moe.num_experts, sc.target.moe.experts_per_token
    full = target_ops(p, ndt, batch=b, routed_tokens=b * ndt, verify=True)  # rho = 1: the distinct-experts formula
    c = routing_skew_of(sc.target.moe)  # skew across experts (the prior) acts on verify and decode alike
    ratio = expected_distinct_experts(E, k, b * ndt, c) / expected_distinct_experts(E, k, b, c)
    assert sc.target.moe.num_shared_experts == 0  # so every expert byte is a routed one
    assert _expert_weight_bytes(full) / _expert_weight_bytes(decode) == pytest.approx(ratio, rel=1e-9)


def test_a_gathered_kernel_reads_every_token_whatever_they_share():
    """A per-token (gathered) MoE kernel, as hf-transformers runs, reads k experts a token: locality cannot help it."""
    sc = build_scenario(**QWEN_MOE)
    p1, p0 = scenario_params(sc), scenario_params(_with_rho(sc, 0.0))
    for p in (p1, p0):
        p["moe_per_token_kernel"] = 1.0
    b, ndt = 8, 4
    ops = [target_ops(p, ndt, batch=b, routed_tokens=b * ndt, independent_tokens=b * (1 + p["routing_locality"] * (ndt - 1)),
                      verify=True) for p in (p1, p0)]
    assert _expert_weight_bytes(ops[0]) == pytest.approx(_expert_weight_bytes(ops[1]), rel=1e-12)


def test_the_founding_case_gains_from_locality_and_the_default_is_unchanged():
    w = whatif_routing("kimi-k2.5-seed", locality=0.44)
    assert w.before.tok_s == pytest.approx(predict("kimi-k2.5-seed").tok_s, rel=1e-12)
    assert w.after.tok_s > w.before.tok_s and w.after.baseline_tok_s == pytest.approx(w.before.baseline_tok_s, rel=1e-12)
    assert w.after.verify_breakdown_ms["allreduce"] == pytest.approx(w.before.verify_breakdown_ms["allreduce"], rel=1e-12)


def test_scenario_field_is_bounded():
    sc = build_scenario(**QWEN_MOE)
    for bad in (-0.1, 1.01):
        with pytest.raises(SpecsimError):
            _with_rho(sc, bad)


def test_whatif_routing_refuses_a_dense_model_and_out_of_range_values():
    with pytest.raises(SpecsimError, match="locality"):
        whatif_routing(locality=0.5, model="qwen3-8b", gpu="h100", tp=1)
    for bad in (1.5, -0.2, float("nan"), float("inf")):
        with pytest.raises(SpecsimError, match="locality"):
            whatif_routing(locality=bad, **QWEN_MOE)


def test_cli_round_trip_and_bad_input(run_cli):
    base = ["--model", "qwen3-30b-a3b", "--gpu", "h200", "--tp", "1", "--batch", "8"]
    code, out, err = run_cli("whatif", "routing", *base, "--locality", "0.55", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["lever"] == "routing" and d["after"]["tok_s"] > d["before"]["tok_s"]
    code, out, err = run_cli("whatif", "routing", *base, "--locality", "0.55")
    assert code == 0 and "routing locality" in out, err
    for bad in (["--locality", "1.5"], ["--locality", "nan"], ["--locality", "x"], [],
                ["--model", "qwen3-8b", "--gpu", "h100", "--tp", "1", "--locality", "0.5"]):
        args = bad if "--model" in bad else [*base, *bad]
        code, out, err = run_cli("whatif", "routing", *args)
        assert code == 2 and len(err.strip().splitlines()) == 1 and not out, (bad, err)
        assert "locality" in err, err


def test_sweep_axis_matches_the_whatif_at_every_rho_and_the_scenario_at_one():
    """``sweep(routing_locality=...)``: each row is the scenario with that rho, the same numbers as the what-if."""
    from specsim.analysis.sweep import sweep

    sc = build_scenario(**QWEN_MOE)
    rhos = [0.0, 0.55, 1.0]
    res = sweep(sc, steps=[2, 4], routing_locality=rhos)
    assert res.n == 6
    for r in res.ranked(6):
        want = whatif_routing(locality=r["routing_locality"], steps=r["steps"], **QWEN_MOE).after
        assert r["tok_s"] == pytest.approx(want.tok_s, rel=1e-9)
        assert r["verify_ms"] == pytest.approx(want.verify_ms, rel=1e-9)
    plain = sweep(sc, steps=[2, 4])
    assert set(plain.columns["routing_locality"].tolist()) == {1.0}
    at_one = res.columns["routing_locality"] == 1.0
    assert sorted(res.columns["tok_s"][at_one]) == pytest.approx(sorted(plain.columns["tok_s"]), rel=1e-12)


def test_sweep_axis_refuses_a_dense_model_and_values_outside_the_unit_interval():
    from specsim.analysis.sweep import sweep

    with pytest.raises(SpecsimError, match="no routed experts"):
        sweep(build_scenario(model="llama-3.1-8b", gpu="h100", tp=1), routing_locality=[0.5])
    for bad in ([1.5], [-0.1], [float("nan")], []):
        with pytest.raises(SpecsimError, match="routing-locality"):
            sweep(build_scenario(**QWEN_MOE), routing_locality=bad)


def test_cli_sweep_routing_locality_round_trip(run_cli, tmp_path):
    import csv

    out = tmp_path / "rho.csv"
    code, text, err = run_cli("sweep", "--model", "qwen3-30b-a3b", "--gpu", "h200", "--tp", "1", "--batch", "8",
                              "--steps", "1-3", "--routing-locality", "0.5:1:0.25", "--csv", str(out))
    assert code in (0, None), err
    assert "rho" in text.splitlines()[4]  # the ranked table's header names the swept column
    rows = list(csv.DictReader(out.open(newline="")))
    assert len(rows) == 9 and {float(r["routing_locality"]) for r in rows} == {0.5, 0.75, 1.0}
    code, _, err = run_cli("sweep", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--routing-locality", "0.5")
    assert code == 2 and "routing-locality" in err and "no routed experts" in err and "Traceback" not in err
