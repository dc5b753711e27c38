"""Published configurations that state their measured accept length (``configs`` of the published
dataset): scored zero-shot, the accept length in and the speedup out; nothing about them is fitted
except where a group says so."""

from __future__ import annotations

import json

import pytest

from specsim.analysis.predict import predict
from specsim.analysis.validate_sweeps import config_errors, score_configs, validate_sweeps
from specsim.io.presets import data_root


@pytest.fixture(scope="module")
def validation():
    return validate_sweeps()


def _group(validation, prefix):
    return next(c for c in validation.configs if c.id.startswith(prefix))


def test_llama_chains_zero_shot_within_8_pct(validation):
    """REGRESSION guard on held-out data: SGLang chains on one H200 at batch 1, seven benchmarks x three step
    counts, each with its own measured accept length (SpecBundle); no parameter was set from them."""
    g = _group(validation, "specbundle-llama-3.1-8b")
    chains = [r for r in g.rows if r["topk"] == 1]
    assert len(chains) == 21
    assert all(not r["fitted"] and abs(r["error_pct"]) <= 8.0 for r in chains), [(r["benchmark"], r["steps"], r["error_pct"]) for r in chains]


def test_a_row_is_the_prediction_at_its_measured_accept_length(validation):
    g = _group(validation, "specbundle-llama-3.1-8b")
    r = next(r for r in g.rows if r["benchmark"] == "mtbench" and r["steps"] == 5 and r["topk"] == 1)
    p = predict(model="llama-3.1-8b", gpu="h200", tp=1, engine="sglang", steps=5, topk=1, batch=1, ctx=512,
                accept=r["accept_length"])
    assert r["predicted_speedup"] == pytest.approx(p.speedup, rel=1e-12)
    assert r["published_speedup"] == pytest.approx(446.6 / 190.0, rel=1e-3)


def test_a_group_without_its_tp_is_not_scored(validation):
    g = _group(validation, "specbundle-llama-3.3-70b")
    assert g.skipped and "TP not recorded" in g.skipped and not g.rows


def test_config_errors_split_chains_and_trees(validation):
    every, chains, trees = config_errors(validation), config_errors(validation, False), config_errors(validation, True)
    assert len(every) == len(chains) + len(trees) > 80 and chains and trees


def test_a_stated_run_length_scores_a_finite_run():
    d = json.loads(data_root("calibration").joinpath("datasets", "published_batch_sweeps.json").read_text(encoding="utf-8"))
    g = next(x for x in d["configs"] if x["id"].startswith("angelslim163"))
    steady = score_configs({k: v for k, v in g.items() if k != "requests"})
    run = score_configs(g)
    by_batch = {r["batch"]: r["predicted_speedup"] for r in run.rows if r["steps"] == 4}
    steady_b = {r["batch"]: r["predicted_speedup"] for r in steady.rows if r["steps"] == 4}
    assert by_batch[1] == pytest.approx(steady_b[1])  # 160 requests on 1 slot: whole waves, the steady state
    assert by_batch[64] != pytest.approx(steady_b[64])  # 160 on 64 slots drains in a wave of 32


ROW = {"benchmark": "mtbench", "batch": 1, "steps": 3, "topk": 1, "num_draft_tokens": 4, "accept_length": 2.5,
       "baseline_tok_s": 190.0, "spec_tok_s": 400.0}


@pytest.mark.parametrize("bad,field", [({"accept_length": 4.5}, "configs.0.rows.0.accept_length"),
                                       ({"accept_length": "2.5"}, "configs.0.rows.0.accept_length"),
                                       ({"baseline_tok_s": 0}, "configs.0.rows.0.baseline_tok_s"),
                                       ({"spec_tok_s": float("nan")}, "configs.0.rows.0.spec_tok_s"),
                                       ({"topk": 0}, "configs.0.rows.0.topk"),
                                       ({"batch": True}, "configs.0.rows.0.batch"),
                                       ({"benchmark": 3}, "configs.0.rows.0.benchmark")])
def test_hostile_config_rows_are_one_line(run_cli, tmp_path, bad, field):
    body = {"kind": "throughput_sweeps", "configs": [{"model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "engine": "sglang",
                                                       "rows": [{**ROW, **bad}]}]}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    code, _, err = run_cli("validate", str(f))
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and field in lines[0], err


def test_a_user_configs_dataset_round_trips(run_json, tmp_path):
    body = {"kind": "throughput_sweeps", "configs": [{"id": "mine", "model": "llama-3.1-8b", "gpu": "h200", "tp": 1,
                                                       "engine": "sglang", "rows": [ROW]}]}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    out = run_json("validate", str(f))
    (c,) = out["configs"]
    assert c["id"] == "mine" and c["skipped"] is None and len(c["rows"]) == 1
    assert c["rows"][0]["published_speedup"] == pytest.approx(400 / 190) and c["rows"][0]["fitted"] is False
