"""The founding case (shared/seed/FACTS.md) reproduced by the default scenario, within 5%."""

import pytest

import specsim

REL = 0.05


def test_baseline_88_8():
    assert specsim.predict().baseline_tok_s == pytest.approx(88.8, rel=REL)


def test_untuned_verify_points():
    v = specsim.verify_ms([3, 6], "kimi-k2.5-seed-untuned").verify_ms
    assert v[0] == pytest.approx(25.6, rel=REL)
    assert v[1] == pytest.approx(28.7, rel=REL)


def test_tuning_cuts_verify_27_percent():
    tuned = specsim.verify_ms([3]).verify_ms[0]
    untuned = specsim.verify_ms([3], "kimi-k2.5-seed-untuned").verify_ms[0]
    assert 1 - tuned / untuned == pytest.approx(0.27, abs=0.03)


def test_two_steps_accept_2_1_gives_94():
    p = specsim.predict(steps=2, accept=2.1)
    assert p.tok_s == pytest.approx(94.0, rel=REL)
    assert p.speedup == pytest.approx(1.059, rel=REL)


def test_default_profile_tau_and_sweep_peak():
    assert specsim.predict().accept_length == pytest.approx(2.1, abs=0.05)
    toks = {s: specsim.predict(steps=s).tok_s for s in range(1, 11)}
    assert max(toks, key=toks.get) == 2


def test_classic_analysis_would_predict_about_2x():
    """Leviathan's 'verify costs one decode step' is what the seed refutes: ~2x vs +6%."""
    p = specsim.predict(steps=2, accept=2.1)
    classic = p.accept_length * p.baseline_tok_s
    assert classic / p.baseline_tok_s == pytest.approx(2.1)
    assert p.speedup < 1.15


def test_verify_dominates_cycle():
    p = specsim.predict(steps=2, accept=2.1)
    assert p.phases_ms["verify"] / p.cycle_ms > 0.8
    assert p.verify_ms > 1.5 * p.baseline_step_ms
