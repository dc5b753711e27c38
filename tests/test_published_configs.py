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


def test_llama_chains_zero_shot_within_10_pct(validation):
    """REGRESSION guard on held-out data: SGLang chains on one H200 at batch 1, seven benchmarks x three step
    counts, each with its own measured accept length (SpecBundle); no parameter was set from them."""
    g = _group(validation, "specbundle-llama-3.1-8b")
    chains = [r for r in g.rows if r["topk"] == 1]
    assert len(chains) == 21
    assert all(not r["fitted"] and abs(r["error_pct"]) <= 10.0 for r in chains), [(r["benchmark"], r["steps"], r["error_pct"]) for r in chains]


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
    assert len(every) == len(chains) + len(trees) > 60 and chains and trees
    fitted = [r for c in validation.configs for r in c.rows if r["fitted"]]
    assert len(fitted) == 14 and all(r["topk"] > 1 for r in fitted)  # the rows that set engine.tree_plan_us


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
                                       ({"benchmark": 3}, "configs.0.rows.0.benchmark"),
                                       ({"speedup": 1.9}, "configs.0.rows.0.baseline_tok_s"),  # ratio and throughputs
                                       ({"speedup": 0, "baseline_tok_s": None, "spec_tok_s": None},
                                        "configs.0.rows.0.speedup")])
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


def test_a_row_may_give_the_printed_speedup_alone(run_json, tmp_path):
    """A figure gives the ratio, not the throughputs: the row scores that ratio as its published speedup."""
    row = {k: v for k, v in ROW.items() if not k.endswith("_tok_s")} | {"speedup": 1.9}
    body = {"kind": "throughput_sweeps", "configs": [{"id": "ratio", "model": "llama-3.1-8b", "gpu": "h200", "tp": 1,
                                                       "engine": "sglang", "rows": [row, ROW]}]}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    (c,) = run_json("validate", str(f))["configs"]
    ratio, tok_s = c["rows"]
    assert ratio["published_speedup"] == 1.9 and tok_s["published_speedup"] == pytest.approx(400 / 190)
    assert ratio["predicted_speedup"] == pytest.approx(tok_s["predicted_speedup"])  # the same settings either way


def test_stated_accept_lengths_put_the_batch_16_tree_within_3_pct(validation):
    """REGRESSION guard on held-out data: SpecDecode-Bench's caption states the accept lengths of its Qwen3-8B GSM8K
    runs in SGLang 0.5.9 (chain 2.25, k = 21 tree 2.92). With them, nothing fitted, the k = 21 tree at 16 requests
    is within 3 % (the sweep protocol, fitted at one request, reads -9 % there) and every row up to 64 within 10 %."""
    g = _group(validation, "specdecodebench-sglang059-qwen3-8b")
    by = {(r["topk"], r["batch"]): r["error_pct"] for r in g.rows}
    assert len(by) == 8 and not any(r["fitted"] for r in g.rows)
    assert abs(by[(4, 16)]) < 3
    assert all(abs(e) < 10 for (_, b), e in by.items() if b <= 64), by
    sweep = next(s for s in validation.sweeps if s.id == "sglang059-eagle3-qwen3-8b-h100-tree-k21-specdecodebench/GSM8K")
    assert sweep.tau < 2.92 * 0.95  # the batch-1 fit takes a shorter accept length than the caption's


def test_tree_host_cost_is_one_plan_per_draft_step_verify_and_extend():
    """SGLang trees on a model without MLA pay (steps + 1) plans and the extra syncs on the host; chains and MLA do not."""
    from specsim.analysis.build import build_scenario
    from specsim.analysis.predict import evaluate
    from specsim.io.presets import get_engine

    e = get_engine("sglang")
    assert e.tree_plan_us > 0 and e.tree_host_syncs_per_cycle == 8

    def host(model, topk, **eng):
        sc = build_scenario(None, model=model, gpu="h200", tp=1, engine="sglang", steps=5, topk=topk,
                            draft_tokens=6 if topk > 1 else None, accept=2.5)
        sc = sc.model_copy(update={"engine": sc.engine.model_copy(update=eng)})
        return evaluate(sc).phases_ms["host"]

    off = {"tree_plan_us": 0.0, "tree_host_syncs_per_cycle": 0}
    extra = host("llama-3.1-8b", 3) - host("llama-3.1-8b", 3, **off)
    assert extra == pytest.approx((5 + 1) * e.tree_plan_us / 1e3 + 8 * e.host_sync_us / 1e3, rel=1e-9)
    assert host("llama-3.1-8b", 1) == pytest.approx(host("llama-3.1-8b", 1, **off))  # a chain: FA3, no plans
    assert host("deepseek-v3", 2) == pytest.approx(host("deepseek-v3", 2, **off))  # MLA trees stay on FA3


def test_the_preset_plan_cost_is_what_its_fit_gives():
    """engines.json's tree_plan_us is the output of calibration/host/fit_tree_plan.py on the dataset, as its source says."""
    import importlib.util
    from pathlib import Path

    from specsim.io.presets import get_engine

    path = Path(__file__).resolve().parents[1] / "calibration" / "host" / "fit_tree_plan.py"
    spec = importlib.util.spec_from_file_location("fit_tree_plan", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    g, rows = mod.tree_rows()
    fit = mod.fit_plan_us(g, rows)
    assert get_engine("sglang").tree_plan_us == pytest.approx(fit, abs=0.06)
    left = [abs(mod.residual_ms(g, r, fit)[0]) for r in rows]
    # ms: one number per plan (beside the measured custom-mask extra and per-request cost) explains every tree row
    # of the group to 0.15 ms, about 2 % of their cycle (0.09 ms when the fitted number carried the verify's extra)
    assert max(left) < 0.16


def test_fitted_tree_rows_follow_their_fit(validation):
    g = _group(validation, "specbundle-llama-3.1-8b")
    trees = [r for r in g.rows if r["topk"] > 1]
    assert all(r["fitted"] and abs(r["error_pct"]) <= 3.0 for r in trees), [(r["benchmark"], r["error_pct"]) for r in trees]


def test_the_work_of_a_dataset_is_bounded(run_cli, tmp_path):
    """Many groups of many rows: refused before any is scored (each row is a model evaluation)."""
    group = {"model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "engine": "sglang", "rows": [ROW] * 5000}
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"kind": "throughput_sweeps", "configs": [group] * 5}))
    code, _, err = run_cli("validate", str(f))
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "dataset.rows" in lines[0] and "25000" in lines[0], err


def test_a_group_without_its_tp_reports_each_candidate_tp_apart(validation):
    g = _group(validation, "specbundle-qwen3-235b")
    assert g.skipped and not g.rows and sorted(g.tp_range) == [4, 8]
    assert all(x["rows"] == 35 and x["mape_pct"] > 0 for x in g.tp_range.values())
    held = config_errors(validation)
    assert len(held) == sum(1 for c in validation.configs if not c.skipped for r in c.rows
                            if not r["fitted"] and not r["reported_as_bug"])


@pytest.mark.parametrize("bad", [4, [], [1, 2, 3, 4, 5, 6, 7, 8, 16], ["8"], [0]])
def test_hostile_tp_candidates_are_one_line(run_cli, tmp_path, bad):
    body = {"kind": "throughput_sweeps", "configs": [{"model": "llama-3.1-8b", "gpu": "h200", "tp": None,
                                                       "tp_candidates": bad, "engine": "sglang", "rows": [ROW]}]}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    code, _, err = run_cli("validate", str(f))
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "configs.0.tp_candidates" in lines[0], err


def test_a_tp_the_model_cannot_take_skips_the_group_not_the_run(run_json, tmp_path):
    groups = [{"id": "odd", "model": "llama-3.1-8b", "gpu": "h200", "tp": 3, "engine": "sglang", "rows": [ROW]},
              {"id": "cands", "model": "llama-3.1-8b", "gpu": "h200", "tp": None, "tp_candidates": [1, 3], "engine": "sglang",
               "rows": [ROW]}]
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"kind": "throughput_sweeps", "configs": groups}))
    odd, cands = run_json("validate", str(f))["configs"]
    assert "must divide" in odd["skipped"] and not odd["rows"]
    assert cands["tp_range"]["1"]["rows"] == 1 and "must divide" in cands["tp_range"]["3"]["error"]


def test_runs_their_source_reports_as_a_bug_are_shown_not_scored(run_json, tmp_path, validation):
    """vLLM#20780 files its own EAGLE-3 rows as a bug (EAGLE-3 barely beats EAGLE-1): the rows are computed and
    shown, marked, and kept out of every held-out score; the EAGLE-1 rows of the same issue are scored."""
    e3 = _group(validation, "vllm20780-eagle3")
    e1 = _group(validation, "vllm20780-eagle1")
    assert e3.source_reports_bug and "issues/20780" in e3.source_reports_bug and len(e3.rows) == 6
    assert all(r["reported_as_bug"] for r in e3.rows) and not any(r["reported_as_bug"] for r in e1.rows)
    assert e3.worst_pct is None and e1.worst_pct == max(config_errors(validation, groups=[e1]))
    assert config_errors(validation, groups=[e3]) == [] and len(config_errors(validation, groups=[e1])) == 6
    body = {"kind": "throughput_sweeps", "configs": [{"id": "buggy", "model": "llama-3.1-8b", "gpu": "h200", "tp": 1,
                                                       "engine": "sglang", "rows": [ROW],
                                                       "source_reports_bug": {"url": "u", "quote": "slow"}}]}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    (c,) = run_json("validate", str(f))["configs"]
    assert c["source_reports_bug"] == "u: slow" and c["rows"][0]["reported_as_bug"] is True
    assert c["worst_error_pct"] is None  # a row its source files as a bug is no score


@pytest.mark.parametrize("bad", ["a bug", {"url": "u"}, {"url": 3, "quote": "q"}])
def test_hostile_bug_reports_are_one_line(run_cli, tmp_path, bad):
    body = {"kind": "throughput_sweeps", "configs": [{"model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "engine": "sglang",
                                                       "rows": [ROW], "source_reports_bug": bad}]}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    code, _, err = run_cli("validate", str(f))
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "configs.0.source_reports_bug" in lines[0], err
