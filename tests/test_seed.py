"""REGRESSION checks of fitted points - not validation.

The built-in scenarios ``kimi-k2.5-seed`` (after NCCL tuning) and ``kimi-k2.5-seed-untuned``
were fitted to the founding case's measurements (``calibration/build_seed_scenarios.py`` runs
``calibrate.fit`` on them). Agreement here therefore shows only that the fit still holds after a
code change; it says nothing about how well the model predicts an unmeasured setup. Every
expected number is read from ``calibration/datasets/kimi-k2.5-seed.json``, never restated.
"""

import json
from pathlib import Path

import pytest

import specsim
from specsim.analysis.sweep import best_steps
from specsim.physics.schema import Scenario

REL = 0.05  # the fit's residuals are ~1 %; 5 % flags a code change that moved a fitted point
DATASET = json.loads((Path(__file__).resolve().parents[1] / "calibration" / "datasets" / "kimi-k2.5-seed.json").read_text())
MEASURED = {m["id"]: m["value"] for m in DATASET["measurements"]}
UNTUNED = "kimi-k2.5-seed-untuned"


def test_regression_fitted_baseline_tok_s():
    assert specsim.predict().baseline_tok_s == pytest.approx(MEASURED["baseline_tok_s"], rel=REL)


def test_regression_fitted_untuned_verify_points():
    points = {pt["tokens"]: pt["ms"] for pt in DATASET["points"]}
    v = specsim.verify_ms(sorted(points), UNTUNED)
    for tokens, ms in zip(v.tokens, v.verify_ms):
        assert ms == pytest.approx(points[tokens], rel=REL), tokens
    assert MEASURED["verify_3_untuned_ms"] == points[3] and MEASURED["verify_6_untuned_ms"] == points[6]


def test_regression_fitted_nccl_tuning_reduction():
    tuned = specsim.verify_ms([3]).verify_ms[0]
    untuned = specsim.verify_ms([3], UNTUNED).verify_ms[0]
    assert 1 - tuned / untuned == pytest.approx(MEASURED["nccl_tuning_verify_reduction"], abs=0.03)


def test_regression_fitted_spec_tok_s_at_two_steps():
    p = specsim.predict(steps=2, accept=MEASURED["accept_length"])
    assert p.tok_s == pytest.approx(MEASURED["spec_tok_s_2steps"], rel=REL)
    assert p.speedup == pytest.approx(MEASURED["spec_tok_s_2steps"] / MEASURED["baseline_tok_s"], rel=REL)


def test_regression_fitted_default_profile_and_best_steps():
    """The default scenario's acceptance profile gives the measured tau at 2 steps, and the
    steps sweep 1..10 (the one best_steps search) peaks at the measured optimum."""
    assert specsim.predict(steps=2).accept_length == pytest.approx(MEASURED["accept_length"], abs=0.05)
    assert best_steps(None, 10)["steps"] == MEASURED["best_steps"]


def test_regression_model_speedup_far_below_the_classic_closed_form():
    """Leviathan's 'verify costs one decode step, drafts are free' predicts speedup = tau (~2.1x at
    the measured tau); the measurement shows +6 %. The model must land on the measurement, not on
    the closed form."""
    tau = MEASURED["accept_length"]
    measured_speedup = MEASURED["spec_tok_s_2steps"] / MEASURED["baseline_tok_s"]
    classic = tau  # (1 - a^(g+1)) / (1 - a) is the accept length itself
    assert classic > 1.8 * measured_speedup  # the data refute the closed form ...
    p = specsim.predict(steps=2, accept=tau)
    assert abs(p.speedup - measured_speedup) < 0.1 * abs(classic - measured_speedup)  # ... and so does the model


def test_regression_verify_dominates_the_cycle():
    """Measured: verify >= 95 % of the cycle (profiled without synchronize, so the other phases'
    GPU time shows up inside verify); the model's verify share is its largest phase by far."""
    p = specsim.predict(UNTUNED, steps=2, accept=MEASURED["accept_length"])
    share = p.phases_ms["verify"] / p.cycle_ms
    assert 0.8 < share <= MEASURED["verify_share_of_cycle"]
    assert p.verify_ms > 1.5 * p.baseline_step_ms



@pytest.mark.parametrize("name", ["kimi-k2.5-seed", UNTUNED])
def test_seed_scenarios_are_built_from_todays_presets(name):
    """A preset change reaches the built-in scenarios (``python calibration/build_seed_scenarios.py``): the stored
    engine, GPU and parallel layout (all-reduce chains) equal what the build script makes from today's presets with the seed's own fitted values."""
    import importlib.util

    from specsim.io.presets import load_scenario

    path = Path(__file__).resolve().parents[1] / "calibration" / "build_seed_scenarios.py"
    spec = importlib.util.spec_from_file_location("build_seed_scenarios", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sc = load_scenario(name)
    x = {k: v["value"] for k, v in sc.provenance["fitted_parameters"].items()}
    fresh = Scenario.model_validate(mod.scenario_dict(x, name != UNTUNED))  # defaults filled in as the stored one's
    for part in ("engine", "gpu", "parallel"):
        stored, built = getattr(sc, part).model_dump(), getattr(fresh, part).model_dump()
        stale = sorted(k for k in stored if stored[k] != built.get(k))
        assert not stale, f"{name}.{part} differs from today's presets in {stale}: rebuild the seed scenarios"
