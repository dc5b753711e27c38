"""Tests for specsim.analysis.symbolic: closed forms of the cycle model against the numeric model."""

from __future__ import annotations

import json
import math
from functools import lru_cache

import numpy as np
import pytest

import specsim
from specsim.analysis.symbolic import CYCLE_COMPONENTS, closed_forms, elasticities, explain, iid_optimal_steps
from specsim.errors import SpecsimError


@lru_cache(maxsize=4)
def forms(**kw):
    return closed_forms(**kw)


CASES = [{}, {"batch": 8, "steps": 3}, {"steps": 4, "accept": 3.2}]


@pytest.mark.parametrize("kw", CASES)
def test_break_even_matches_predict(kw: dict) -> None:
    e = closed_forms(**kw)
    p = specsim.predict(**kw)
    assert e.values["break_even_accept_length"] == pytest.approx(p.cycle_ms / p.baseline_step_ms, rel=1e-9)
    assert e.values["speedup"] == pytest.approx(p.speedup, rel=1e-9)
    x, s = e.expressions, e.symbols
    sub = {s["T_fixed"]: e.values["T_fixed_ms"], s["t_step"]: e.values["t_step_ms"], s["k"]: p.steps,
           s["T_d"]: p.baseline_step_ms}
    assert float(x["break_even_accept_length"].subs(sub)) == pytest.approx(p.cycle_ms / p.baseline_step_ms)
    # speedup is exactly 1 at the break-even accept length
    assert float(x["speedup"].subs(sub).subs(s["tau"], x["break_even_accept_length"].subs(sub))) == pytest.approx(1)


@pytest.mark.parametrize("kw", CASES)
def test_elasticities_symbolic_vs_finite_difference(kw: dict) -> None:
    e = closed_forms(**kw)
    fd = elasticities(**kw)
    assert set(fd) == set(CYCLE_COMPONENTS) | {"tau"}
    for name, sym in e.elasticities.items():
        if abs(sym) < 1e-3:
            assert abs(fd[name]) < 2e-3, name
        else:
            assert fd[name] == pytest.approx(sym, rel=0.02), name
    assert sum(e.elasticities[c] for c in CYCLE_COMPONENTS) == pytest.approx(-1.0, abs=1e-9)
    assert sum(fd[c] for c in CYCLE_COMPONENTS) == pytest.approx(-1.0, abs=0.01)
    t = e.values["T_cycle_ms"]
    p = specsim.predict(**kw)
    for c, ms in p.verify_breakdown_ms.items():
        assert e.elasticities[c] == pytest.approx(-ms / t, abs=1e-12)
    assert e.elasticities["tau"] == pytest.approx(1.0, abs=0.02)


def test_elasticities_under_overlap_scheduler() -> None:
    sc = specsim.build_scenario()
    for host_ms, host_bound in ((0.6, False), (40.0, True)):
        eng = sc.engine.model_copy(update={"overlap_scheduler": True, "host_per_cycle_ms": host_ms})
        e = closed_forms(sc.model_copy(update={"engine": eng}))
        assert sum(e.elasticities[c] for c in CYCLE_COMPONENTS) == pytest.approx(-1.0, abs=1e-9)
        assert e.elasticities["host"] == pytest.approx(-1.0 if host_bound else 0.0)
        for c in CYCLE_COMPONENTS:
            assert e.elasticities_finite_difference[c] == pytest.approx(e.elasticities[c], rel=0.02, abs=1e-9)


@pytest.mark.parametrize("alpha", [0.3, 0.5, 0.62, 0.75, 0.85, 0.92])
@pytest.mark.parametrize("t_fixed_ms,t_step_ms", [(19.6, 1.2), (30.0, 5.0), (70.0, 2.3), (10.0, 8.0)])
def test_iid_optimum_matches_brute_force(alpha: float, t_fixed_ms: float, t_step_ms: float) -> None:
    opt = iid_optimal_steps(alpha, t_fixed_ms, t_step_ms, max_steps=64)
    k = np.arange(1, 65)
    rate = (1 - alpha ** (k + 1)) / (1 - alpha) / (t_fixed_ms + k * t_step_ms)
    brute = int(k[np.argmax(rate)])
    assert opt["brute_force"] == brute == opt["discrete"]
    cont = opt["continuous"]
    assert math.floor(cont) <= brute <= math.ceil(cont) or (cont < 1 and brute == 1)


def test_iid_condition_is_the_sympy_derivative_root() -> None:
    e = forms()
    v, s = e.values, e.symbols
    lhs = e.expressions["iid_optimum_condition"].lhs
    k_star = v["optimal_steps_iid_continuous"]
    sub = {s["alpha"]: v["alpha_iid"], s["T_fixed"]: v["T_fixed_ms"], s["t_step"]: v["t_step_ms"]}
    assert abs(float(lhs.subs(sub).subs(s["k"], k_star))) < 1e-9
    assert float(lhs.subs(sub).subs(s["k"], k_star - 0.5)) > 0 > float(lhs.subs(sub).subs(s["k"], k_star + 0.5))


@pytest.mark.parametrize("alpha", [0.5, 0.7])
def test_linear_iid_optimum_near_model_sweep(alpha: float) -> None:
    v = closed_forms(steps=2, accept_rates=[alpha]).values
    opt = iid_optimal_steps(alpha, v["T_fixed_ms"], v["t_step_ms"], max_steps=12)
    toks = [specsim.predict(steps=k, accept_rates=[alpha] * k).tok_s for k in range(1, 13)]
    assert abs(opt["discrete"] - (int(np.argmax(toks)) + 1)) <= 1


@pytest.mark.parametrize("kw", [{}, {"steps": 3, "accept_rates": [0.85]}, {"steps": 2, "accept_rates": [0.5]}])
def test_marginal_step_condition_matches_model(kw: dict) -> None:
    v = closed_forms(**kw).values
    k = int(v["steps"])
    pays = v["marginal_accept_next_step"] > v["marginal_threshold"]
    base = specsim.predict(**kw)
    nxt = specsim.predict(**{**kw, "steps": k + 1})
    assert pays == (nxt.tok_s > base.tok_s)


def test_cycle_decomposition_reproduces_predict() -> None:
    v = forms().values
    p = specsim.predict()
    assert v["T_fixed_ms"] + v["steps"] * v["t_step_ms"] == pytest.approx(p.cycle_ms)
    p3 = specsim.predict(steps=p.steps + 1, accept=p.accept_length)
    assert p3.cycle_ms - p.cycle_ms == pytest.approx(v["t_step_ms"])
    assert 0 < v["t_step_verify_ms"] < v["t_step_ms"]


@pytest.mark.parametrize("fmt", ["markdown", "latex", "text"])
def test_explain_formats(fmt: str) -> None:
    out = explain(fmt=fmt)
    tau_star = forms().values["break_even_accept_length"]  # the seed scenario's break-even accept length
    assert 1.5 < tau_star < 2.5 and f"{tau_star:.3f}" in out
    assert ("\\frac" in out) == (fmt != "text")


def test_explain_rejects_unknown_format_and_to_dict_is_json() -> None:
    with pytest.raises(SpecsimError):
        explain(fmt="html")
    d = forms().to_dict()
    json.dumps(d, allow_nan=False)
    assert d["values"]["break_even_accept_length"] == pytest.approx(forms().values["break_even_accept_length"])
    assert set(d["elasticities"]) == set(CYCLE_COMPONENTS) | {"tau"}


EAGER = {"model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "engine": "hf-transformers", "steps": 3}
REPLAYED = {"model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "engine": "sglang", "steps": 3}


@pytest.mark.parametrize("fmt", ["markdown", "latex", "text"])
def test_an_eager_verify_says_its_elasticities_hold_the_launch_queue_fixed(fmt: str) -> None:
    """The wait explain reports is the breakdown's eager_launch_wait row, and every format says it is held fixed; a
    verify replayed from a graph has none and no note."""
    from specsim.analysis.predict import operator_table

    e, r = forms(**EAGER).values, forms(**REPLAYED).values
    rows = operator_table(4, **EAGER).rows
    assert e["verify_eager_launch_wait_ms"] == pytest.approx(next(x["ms"] for x in rows if x["name"] == "eager_launch_wait"))
    assert e["verify_eager_launch_wait_ms"] > 0.05 * e["T_cycle_ms"] and r["verify_eager_launch_wait_ms"] == 0.0
    eager, replayed = explain(fmt=fmt, **EAGER), explain(fmt=fmt, **REPLAYED)
    assert "launch-queue wait" in eager and f"{e['verify_eager_launch_wait_ms']:.3f} ms" in eager
    assert "launch-queue wait" not in replayed
