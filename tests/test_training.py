"""Tests for specsim.analysis.training: accept length versus draft-training samples, and the payback what-if."""

from __future__ import annotations

import json
import math
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsim.analysis.training import (
    LIGHTSEEK_GPU_HOURS_PER_100K_SAMPLES,
    TrainingFit,
    default_training_data,
    fit_training,
    parse_data_points,
    payback,
    whatif_training,
)
from specsim.errors import SpecsimError


@lru_cache(maxsize=1)
def default_fit() -> TrainingFit:
    return fit_training()


@lru_cache(maxsize=1)
def default_whatif():
    return whatif_training(curve_points=6)


samples_st = st.floats(min_value=1.0, max_value=1e12, allow_nan=False, allow_infinity=False)
steps_st = st.integers(min_value=1, max_value=20)


@settings(max_examples=60, deadline=None)
@given(samples=samples_st, steps=steps_st)
def test_tau_bounded_by_steps_plus_one(samples: float, steps: int) -> None:
    fit = default_fit()
    tau = fit.tau(samples, steps)
    assert 1.0 <= tau <= steps + 1
    low, high = fit.tau_band(samples, steps)
    assert 1.0 <= low <= tau + 1e-9
    assert tau - 1e-9 <= high <= steps + 1
    r = fit.rates(samples, steps)
    assert r.shape == (steps,) and np.all((r >= 0) & (r < 1))


@settings(max_examples=60, deadline=None)
@given(a=samples_st, b=samples_st, steps=steps_st)
def test_tau_monotone_in_samples(a: float, b: float, steps: int) -> None:
    lo, hi = sorted((a, b))
    fit = default_fit()
    assert fit.tau(lo, steps) <= fit.tau(hi, steps) + 1e-12


def test_fit_passes_near_default_points() -> None:
    fit = default_fit()
    assert abs(fit.tau(37_000, 2) - 2.1) < 0.25
    for p in default_training_data():
        assert abs(fit.tau(p["samples"], p["steps"]) - p["tau"]) < 0.35, p["source"]
    assert 0 < fit.params["beta"] < 3 and fit.params["g"] > 0 and fit.params["c1"] > 0
    assert all(p["source"] for p in default_training_data())


def test_default_points_match_priors() -> None:
    pts = {p["samples"]: p for p in default_training_data()}
    assert pts[37_000]["steps"] == 2 and pts[37_000]["tau"] == 2.1
    assert pts[1_400_000]["tau"] == pytest.approx((3.372 + 3.165 + 3.490) / 3)
    assert pts[600_000]["tau"] == pytest.approx((2.687 + 3.201 + 3.285 + 3.342) / 4)


def test_band_contains_mean_and_widens_away_from_data() -> None:
    fit = default_fit()

    def width(n: float) -> float:
        lo, hi = fit.tau_band(n, 3)
        assert lo <= fit.tau(n, 3) <= hi
        return hi - lo

    assert width(1e4) > width(4e5)
    assert width(2e7) > width(4e5)
    lo90, hi90 = fit.tau_band(4e5, 3)
    lo50, hi50 = fit.tau_band(4e5, 3, level=0.5)
    assert lo90 <= lo50 <= hi50 <= hi90


def test_parse_data_points() -> None:
    got = parse_data_points(["37000=2.1", "37K=2.1", "1.4M=3.3", "37K=2.1@2", " 2.5e5 = 3.0 @ 4 "])
    assert got == [(37000.0, 2.1, 3), (37000.0, 2.1, 3), (1.4e6, 3.3, 3), (37000.0, 2.1, 2), (2.5e5, 3.0, 4)]
    for bad in ["abc", "37K", "0=2", "37K=5.5", "37K=2.1@0", "-5=2"]:
        with pytest.raises(SpecsimError):
            parse_data_points([bad])


def test_too_few_points_raise() -> None:
    with pytest.raises(SpecsimError, match="at least two training data points"):
        fit_training([(37_000, 2.1, 2)])
    with pytest.raises(SpecsimError, match="at least two"):
        fit_training(["37K=2.1", "37K=2.3"])
    with pytest.raises(SpecsimError, match="at least two"):
        whatif_training(data=["37K=2.1@2"], use_default_data=False, curve_points=2)


def test_two_point_fit_works() -> None:
    fit = fit_training(["37K=2.1@2", "1.4M=3.3"])
    assert abs(fit.tau(37_000, 2) - 2.1) < 0.1 and abs(fit.tau(1.4e6, 3) - 3.3) < 0.1
    lo, hi = fit.tau_band(1e6, 3)
    assert lo < fit.tau(1e6, 3) < hi


def test_payback_hand_computed() -> None:
    # 7.2M tokens/day: at 100 tok/s a replica needs 20 h/day x 8 GPUs = 160 GPU-h; at 200 tok/s, 80 GPU-h
    pay = payback(100.0, 200.0, 400_000, 1_400_000, 10.0, 7.2e6, 8)
    assert pay["gpu_hours_per_day_now"] == pytest.approx(160.0)
    assert pay["gpu_hours_per_day_target"] == pytest.approx(80.0)
    assert pay["gpu_hours_saved_per_day"] == pytest.approx(80.0)
    assert pay["gpu_hours_invested"] == pytest.approx(100.0)  # 10 x 100K at 10 GPU-h each
    assert pay["payback_days"] == pytest.approx(1.25)
    assert math.isinf(payback(100.0, 90.0, 1, 2, 10.0, 1e6, 8)["payback_days"])


def test_whatif_payback_consistent() -> None:
    w = default_whatif()
    assert w.gpus_per_replica == 8 and w.gpu_hours_per_100k_samples == pytest.approx(448 / 3)
    assert LIGHTSEEK_GPU_HOURS_PER_100K_SAMPLES == pytest.approx(149.33, abs=0.01)
    hours = [w.fleet_tokens_per_day / (t * 3600) * 8 for t in (w.tok_s_now, w.tok_s_target)]
    assert w.gpu_hours_saved_per_day == pytest.approx(hours[0] - hours[1])
    assert w.gpu_hours_invested == pytest.approx((1.4e6 - 37_000) / 1e5 * 448 / 3)
    assert w.payback_days == pytest.approx(w.gpu_hours_invested / w.gpu_hours_saved_per_day)


def test_best_steps_grow_with_training() -> None:
    w = default_whatif()
    assert w.best_steps_target >= w.best_steps_now
    assert w.tok_s_target > w.tok_s_now and w.tau_target > w.tau_now
    assert w.tau_target_low <= w.tau_target <= w.tau_target_high <= w.best_steps_target + 1
    c = w.curve
    assert len(c["samples"]) == len(c["tau"]) == len(c["tau_low"]) == len(c["tau_high"]) == len(c["tok_s"])
    assert all(b >= a for a, b in zip(c["best_steps"], c["best_steps"][1:], strict=False))
    assert all(b >= a - 1e-9 for a, b in zip(c["tok_s"], c["tok_s"][1:], strict=False))


def test_whatif_outputs_render_and_serialize() -> None:
    w = default_whatif()
    d = json.loads(json.dumps(w.to_dict(), allow_nan=False))
    assert d["kind"] == "modeled" and d["best_steps_target"] == w.best_steps_target
    assert "payback" in repr(w) and "<table" in w._repr_html_()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gpu_hours_per_100k_samples": -1.0},
        {"fleet_tokens_per_day": -5.0},
        {"target_samples": 0.0},
        {"current_samples": -10.0},
        {"target_samples": 30_000.0},
        {"gpus_per_replica": 0},
        {"max_steps": 0},
    ],
)
def test_bad_inputs_raise(kwargs: dict) -> None:
    with pytest.raises(SpecsimError):
        whatif_training(curve_points=2, **kwargs)
    with pytest.raises(SpecsimError):
        payback(100.0, 120.0, 1e4, 1e5, -1.0, 1e6, 8)


def test_now_is_the_scenarios_own_draft_and_configuration() -> None:
    w = whatif_training(model="llama-3.1-70b", gpu="h100", tp=4, curve_points=3, target_samples=1e6)
    assert w.samples_now == 276_000 and "EAGLE-3 paper" in w.samples_now_source
    assert w.steps_scenario == 3 and w.scenario == "llama-3.1-70b-h100-tp4-sglang"
    assert "now: scenario (steps 3)" in repr(w)
    w2 = whatif_training(model="llama-3.1-70b", gpu="h100", tp=4, curve_points=3, target_samples=1e6,
                         current_samples=50_000)
    assert w2.samples_now == 50_000 and w2.samples_now_source.startswith("given")
    seed = default_whatif()
    assert seed.samples_now == 37_000 and seed.steps_scenario == 2


def test_unknown_training_samples_need_current_samples() -> None:
    with pytest.raises(SpecsimError, match="current-samples"):
        whatif_training(model="qwen3-30b-a3b", curve_points=2)
    w = whatif_training(model="qwen3-30b-a3b", current_samples=1e5, curve_points=2)
    assert w.samples_now == 1e5


def test_training_cost_scales_with_target_and_draft() -> None:
    from specsim.analysis.training import draft_params, scaled_gpu_hours_per_100k, target_active_params
    from specsim.io.presets import get_model

    kimi, kimi_d = get_model("kimi-k2.5")
    small, small_d = get_model("llama-3.1-8b")
    big, big_d = get_model("llama-3.1-70b")
    assert target_active_params(kimi) == pytest.approx(32e9, rel=0.05)  # 32B active (model card)
    assert target_active_params(small) == pytest.approx(7.5e9, rel=0.1)  # 8B incl. embedding
    assert target_active_params(big) == pytest.approx(69.5e9, rel=0.05)
    assert scaled_gpu_hours_per_100k(kimi, kimi_d) == pytest.approx(LIGHTSEEK_GPU_HOURS_PER_100K_SAMPLES)
    assert scaled_gpu_hours_per_100k(small, small_d) < LIGHTSEEK_GPU_HOURS_PER_100K_SAMPLES / 2
    assert scaled_gpu_hours_per_100k(big, big_d) > scaled_gpu_hours_per_100k(small, small_d)
    assert draft_params(small_d) < draft_params(kimi_d)
