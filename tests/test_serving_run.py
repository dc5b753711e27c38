"""Serving-side physics outside the GPU kernels: stop-string finish checks on the host, and finite
benchmark runs whose batch drains in waves (specsim.analysis.run). Both were added for the published
SGLang batch sweep (EAGLE-3 paper Table 3), whose benchmark sends stop strings and 80 requests."""

import json

import pytest

from specsim.analysis.predict import predict
from specsim.analysis.run import predict_run, waves
from specsim.analysis.validate_sweeps import cap_reading_summary, score_sweep, validate_sweeps
from specsim.errors import SpecsimError
from specsim.io.presets import get_engine

LLAMA_H100 = dict(model="llama-3.1-8b", gpu="h100", tp=1, engine="sglang", steps=3, ctx=512)


def test_stop_strings_cost_tau_plus_one_checks_per_request_per_cycle():
    tau, batch = 2.4, 16
    off = predict(batch=batch, accept=tau, stop_strings=False, **LLAMA_H100)
    on = predict(batch=batch, accept=tau, stop_strings=True, **LLAMA_H100)
    check_us = get_engine("sglang").stop_check_us
    assert check_us > 0
    # SGLang v1 spec runs without the overlap scheduler: every check is on the critical path
    assert on.phases_ms["host"] - off.phases_ms["host"] == pytest.approx(batch * (tau + 1) * check_us / 1e3, rel=1e-9)
    # plain decode runs the overlap scheduler: its one check per request hides behind the GPU step
    assert on.baseline_step_ms == pytest.approx(off.baseline_step_ms, rel=1e-12)
    assert on.speedup < off.speedup


def test_stop_strings_cost_nothing_where_the_engine_checks_elsewhere():
    kw = dict(LLAMA_H100, engine="vllm")
    assert get_engine("vllm").stop_check_us == 0
    assert predict(batch=8, accept=2.0, stop_strings=True, **kw).tok_s == predict(batch=8, accept=2.0, **kw).tok_s


@pytest.mark.parametrize("requests,slots,expect", [(80, 64, [(64, 1), (16, 1)]), (80, 32, [(32, 2), (16, 1)]),
                                                    (80, 40, [(40, 2)]), (5, 8, [(5, 1)]), (1, 1, [(1, 1)]),
                                                    (10_000_000, 1, [(1, 10_000_000)])])
def test_waves(requests, slots, expect):
    assert waves(requests, slots) == expect
    assert sum(n * c for n, c in waves(requests, slots)) == requests


@pytest.mark.parametrize("requests", [0, -3, 1.5, True, "80", 10**9])
def test_waves_refuse_bad_request_counts(requests):
    with pytest.raises(SpecsimError, match="requests"):
        waves(requests, 8)


def test_a_run_of_whole_waves_is_the_steady_state():
    steady = predict(batch=16, accept=2.4, **LLAMA_H100)
    run = predict_run(64, batch=16, accept=2.4, accept_spread=0.0, **LLAMA_H100)
    assert run.waves == [(16, 4)]
    assert run.tok_s == pytest.approx(steady.tok_s, rel=1e-12)
    assert run.baseline_tok_s == pytest.approx(steady.baseline_tok_s, rel=1e-12)


def test_a_draining_run_lies_between_its_wave_sizes():
    run = predict_run(80, batch=64, accept=2.4, accept_spread=0.0, **LLAMA_H100)
    big, small = (predict(batch=b, accept=2.4, **LLAMA_H100) for b in (64, 16))
    assert small.tok_s < run.tok_s < big.tok_s
    assert small.baseline_tok_s < run.baseline_tok_s < big.baseline_tok_s
    # the speedup of a run that drains is nearer the small batch's than steady batch 64's
    assert run.speedup > big.speedup


def test_published_sglang_sweep_held_out_within_12_pct():
    """REGRESSION guard on held-out data: tau is fitted at batch 2 only, batches 4-64 are predicted."""
    v = validate_sweeps()
    sg = next(s for s in v.sweeps if s.id == "sglang-eagle3-llama31-8b-h100")
    held = [r for r in sg.rows if not r["fitted"]]
    assert len(held) == 8 and all(abs(r["error_pct"]) <= 12.0 for r in held), [(r["batch"], r["error_pct"]) for r in held]


def test_sweep_without_its_benchmark_protocol_misses_again():
    """The two serving effects are what closes the sweep: without them the held-out error is back above 12 %."""
    from specsim.io.presets import data_root

    d = json.loads(data_root("calibration").joinpath("datasets", "published_batch_sweeps.json").read_text(encoding="utf-8"))
    sw = next(s for s in d["sweeps"] if s["id"] == "sglang-eagle3-llama31-8b-h100")
    bare = {k: v for k, v in sw.items() if k not in ("stop_strings", "requests")}
    worst = score_sweep(bare).worst_pct
    assert worst is not None and worst > 12.0


@pytest.mark.parametrize("extra,field", [({"stop_strings": "yes"}, "dataset.sweeps.0.stop_strings"),
                                         ({"requests": 0}, "dataset.sweeps.0.requests"),
                                         ({"requests": 2.5}, "dataset.sweeps.0.requests")])
def test_hostile_sweep_protocol_fields(run_cli, tmp_path, extra, field):
    body = {"kind": "throughput_sweeps", "sweeps": [{"model": "llama-3.1-8b", "gpu": "h100", "engine": "sglang", "steps": 3,
                                                      "rows": [{"batch": 2, "speedup": 1.8}, {"batch": 8, "speedup": 1.6}],
                                                      **extra}]}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    code, _, err = run_cli("validate", str(f))
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and field in lines[0], err


def test_cli_stop_strings_flag_round_trip(run_cli):
    args = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--batch", "32", "--accept", "2.4", "--json"]
    outs = {}
    for flag in ([], ["--stop-strings"], ["--no-stop-strings"]):
        code, out, err = run_cli(*args, *flag)
        assert code == 0, err
        outs[tuple(flag)] = json.loads(out)["speedup"]
    assert outs[("--stop-strings",)] < outs[()] == outs[("--no-stop-strings",)]


def _host_profile(tmp_path, decode_us):
    from specsim.measure.profile import PROFILE_SCHEMA, PROFILE_VERSION

    prof = {"schema": PROFILE_SCHEMA, "version": PROFILE_VERSION,
            "provenance": {"gpu_name": "NVIDIA H100 80GB HBM3", "date_utc": "2026-12-01T00:00:00Z",
                           "command": "specsim measure gpu --sections host", "torch": "2.13.0"},
            "host": {"stop_check": {"check_finished_with_stop_string_us": decode_us + 5.0,
                                    "check_finished_no_stop_string_us": 5.0, "stop_string_decode_us": decode_us}}}
    f = tmp_path / "host.json"
    f.write_text(json.dumps(prof))
    return f


def test_a_measured_host_section_sets_the_finish_check_cost(run_cli, tmp_path):
    """`specsim measure gpu --sections host` times this CPU's finish check; --profile carries it into the engine."""
    from specsim.analysis.build import build_scenario

    f = _host_profile(tmp_path, 4.5)
    sc = build_scenario(profile=str(f), stop_strings=True, **LLAMA_H100)
    assert sc.engine.stop_check_us == 4.5 and "measured profile" in sc.engine.sources["stop_check_us"]
    args = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--batch", "32", "--accept", "2.4",
            "--stop-strings", "--json"]
    _, preset_out, _ = run_cli(*args)
    code, out, err = run_cli(*args, "--profile", str(f))
    assert code == 0, err
    assert json.loads(out)["speedup"] > json.loads(preset_out)["speedup"]  # 4.5 us < the preset's v0.4.4 figure


@pytest.mark.parametrize("bad", [-1.0, "fast", None])
def test_a_bad_host_section_is_one_line(run_cli, tmp_path, bad):
    f = _host_profile(tmp_path, 1.0)
    prof = json.loads(f.read_text())
    prof["host"]["stop_check"]["stop_string_decode_us"] = bad
    f.write_text(json.dumps(prof))
    code, _, err = run_cli("predict", "--profile", str(f))
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "host.stop_check.stop_string_decode_us" in lines[0], err


def test_host_measurement_without_transformers_is_one_line(monkeypatch):
    import builtins

    from specsim.measure import MeasureError
    from specsim.measure.host import measure_stop_check

    real = builtins.__import__

    def no_transformers(name, *a, **k):
        if name.split(".")[0] in ("transformers", "tokenizers"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_transformers)
    with pytest.raises(MeasureError, match="transformers"):
        measure_stop_check(calls=10, repeats=1)


def test_host_measurement_times_the_decode():
    pytest.importorskip("transformers")
    from specsim.measure.host import measure_stop_check

    r = measure_stop_check(calls=300, repeats=2)
    assert r["check_finished_with_stop_string_us"] > r["check_finished_no_stop_string_us"] > 0
    assert r["stop_string_decode_us"] > 0 and r["transformers"]


def test_a_measured_gpu_sync_sets_the_round_trip_cost(tmp_path):
    """The host section's `.item()` round trip on a GPU replaces engine.host_sync_us; one timed on a CPU does not."""
    from specsim.analysis.build import build_scenario
    from specsim.analysis.predict import evaluate

    f = _host_profile(tmp_path, 4.5)
    prof = json.loads(f.read_text())
    prof["host"]["sync"] = {"item_idle_us": 11.0, "tolist_64_idle_us": 14.0, "device": "cuda"}
    f.write_text(json.dumps(prof))
    base = build_scenario(**LLAMA_H100)
    sc = build_scenario(profile=str(f), **LLAMA_H100)
    preset = base.engine.host_sync_us
    assert sc.engine.host_sync_us == 11.0 and preset != 11.0
    syncs = sc.engine.host_syncs_per_cycle
    assert evaluate(sc).phases_ms["host"] - evaluate(base).phases_ms["host"] == pytest.approx(syncs * (11.0 - preset) / 1e3)
    prof["host"]["sync"]["device"] = "cpu"
    f.write_text(json.dumps(prof))
    assert build_scenario(profile=str(f), **LLAMA_H100).engine.host_sync_us == preset


def test_a_bad_sync_section_is_one_line(run_cli, tmp_path):
    f = _host_profile(tmp_path, 1.0)
    prof = json.loads(f.read_text())
    prof["host"]["sync"] = {"item_idle_us": -3, "device": "cuda"}
    f.write_text(json.dumps(prof))
    code, _, err = run_cli("predict", "--profile", str(f))
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "host.sync.item_idle_us" in lines[0], err


def test_sync_measurement_times_a_round_trip():
    torch = pytest.importorskip("torch")
    from specsim.measure.host import measure_sync

    s = measure_sync(torch, "cpu", calls=50, repeats=2)
    assert s["device"] == "cpu" and 0 < s["item_idle_us"] < 1e4 and s["tolist_64_idle_us"] > 0


# ---- vLLM V0's batch-expansion scorer (engine preset vllm-v0) ----------------------------------------------------

V0_3090 = dict(model="llama-3.1-8b", gpu="rtx3090", tp=1, steps=2, topk=1, ctx=512, accept=1.97)


def _verify_op(engine: str, name: str, batch: int, tokens: int):
    from specsim.analysis.predict import operator_table

    t = operator_table(tokens, None, model="llama-3.1-8b", gpu="rtx3090", tp=1, engine=engine, batch=batch, ctx=512)
    return next(r for r in t.rows if r["name"] == name)


def test_batch_expansion_reads_each_requests_kv_once_per_verify_row():
    """V0 scores k + 1 rows per request as single-token sequences: the verify's attention streams the KV cache
    k + 1 times (decode kernels), where V1's one multi-token query per request streams it once; GEMMs are alike."""
    v1, v0 = (_verify_op(e, "attention_gqa", 8, 3) for e in ("vllm", "vllm-v0"))
    assert v0["mbytes"] == pytest.approx(3 * v1["mbytes"], rel=1e-12) and v0["ms"] > 2 * v1["ms"]
    g1, g0 = (_verify_op(e, "qkv_proj", 8, 3) for e in ("vllm", "vllm-v0"))
    assert g0["ms"] == pytest.approx(g1["ms"], rel=1e-12) and g0["mbytes"] == g1["mbytes"]
    # a decode step (one row per request) is the same forward in both
    d1, d0 = (_verify_op(e, "attention_gqa", 8, 1) for e in ("vllm", "vllm-v0"))
    assert d0["mbytes"] == d1["mbytes"] and d0["ms"] == pytest.approx(d1["ms"], rel=1e-12)


def test_batch_expansion_host_copies_grow_with_rows_times_context():
    """The expansion's host copies: batch x num_draft_tokens x ctx x host_expansion_us_per_row_token per cycle."""
    slope = get_engine("vllm-v0").host_expansion_us_per_row_token
    assert 0.03 < slope < 0.3  # us per row x context token, measured (calibration/datasets/host-vllm-v0-batch-expansion.json)
    h = {(b, c): predict(engine="vllm-v0", **{**V0_3090, "ctx": c}, batch=b).phases_ms["host"] for b in (8, 16) for c in (512, 1024)}
    base = {(b, c): predict(engine="vllm", **{**V0_3090, "ctx": c}, batch=b).phases_ms["host"] for b in (8, 16) for c in (512, 1024)}
    for (b, c), ms in h.items():
        assert ms - base[(b, c)] == pytest.approx(b * 3 * c * slope / 1e3, rel=1e-9)


def test_batch_expansion_slows_the_cycle_more_as_the_batch_grows():
    s1 = [predict(engine="vllm", batch=b, **V0_3090).speedup for b in (2, 32)]
    s0 = [predict(engine="vllm-v0", batch=b, **V0_3090).speedup for b in (2, 32)]
    assert s0[0] < s1[0] and s0[1] < s1[1]
    assert s1[1] - s0[1] > 2 * (s1[0] - s0[0])  # the V0 costs grow with batch (rows x context)


def test_published_vllm_v0_sweeps_held_out_up_to_batch_32_within_12_pct():
    """REGRESSION guard on held-out data (EAGLE-3 paper Table 5, vLLM V0 on an RTX 3090, tau fitted at batch 2):
    batches 4-32 of both rows within 12 %. Batches 48-56 are not asserted: the EAGLE-3 row misses there by up to
    -20 % (its largest batches may not have fit in the card's KV cache; not modeled)."""
    v = validate_sweeps()
    for sid in ("vllm-eagle3-llama31-8b-rtx3090", "vllm-eagle1-llama31-8b-rtx3090"):
        sw = next(s for s in v.sweeps if s.id == sid)
        assert "vllm-v0" in sw.setup
        held = [r for r in sw.rows if not r["fitted"] and r["batch"] <= 32]
        assert len(held) == 5 and all(abs(r["error_pct"]) <= 12.0 for r in held), [(r["batch"], r["error_pct"]) for r in held]


def test_specdecode_bench_sweeps_held_out_at_batch_16():
    """REGRESSION guard on held-out data: SpecDecode-Bench (arXiv 2601.11580) on one H100, vLLM 0.10-0.11 and SGLang
    0.5.9, chains and trees, four datasets each, accept length fitted at batch 1: every batch-16 chain point within
    6.5 %, every tree point within 10 % (6 % for the chains before the H100 preset took its measured profile,
    models/profiles/h100.json: Qwen3-8B ShareGPT moved from -5.9 to -6.2 %; the k = 21 trees moved from -4.5 to -9.2 % at worst when the measured FA2
    custom-mask kernel replaced the flat 2x prior and the measured plan() costs the flat per-plan fit: their fitted
    batch-1 accept length rose from 2.57 to 2.69 of the paper's printed 2.92; see the next test for the trees with
    that printed value)."""
    v = validate_sweeps()
    rows = [(s.id, r["error_pct"]) for s in v.sweeps if "specdecodebench" in s.id and "h100x4" not in s.id
            for r in s.rows if r["batch"] == 16 and not r["fitted"]]
    assert len(rows) == 24, rows
    assert all(abs(e) <= (10.0 if "tree" in sid else 6.5) for sid, e in rows), rows


def test_specdecode_bench_qwen3_with_the_papers_printed_accept_lengths():
    """Held out whole (nothing fitted, the accept length the paper prints: Qwen3-8B GSM8K, 2.25 for the chain, 2.92
    for the k = 21 tree; SGLang 0.5.9, one H100, at most 48 running in both runs as the dataset reads the figure):
    the chain within 7 % at batch 1, 16 and 64, the tree within 9 % at batch 1 and 64 and 3 % at 16 (it was
    +13.7 / +10.9 % at 1 / 16 with the flat custom-mask prior and per-plan cost); with the cap raised to the
    batch the tree at 64 comes out 11 % low instead."""
    published = {("chain", 1): 1.648, ("chain", 16): 1.577, ("chain", 64): 1.311,
                 ("tree", 1): 1.848, ("tree", 16): 1.336, ("tree", 64): 0.584}
    err = {}
    for cap in (48, 128):
        kw = dict(model="qwen3-8b", gpu="h100", tp=1, engine="sglang", steps=3, ctx=512, max_running_requests=cap)
        for (shape, batch), x in published.items():
            spec = dict(topk=1, accept=2.25) if shape == "chain" else dict(topk=4, draft_tokens=22, accept=2.92)
            err[cap, shape, batch] = 100 * (predict(batch=batch, **kw, **spec).speedup / x - 1)
    assert all(abs(err[48, "chain", b]) <= 7 for b in (1, 16, 64)), err
    assert abs(err[48, "tree", 1]) <= 9 and abs(err[48, "tree", 16]) <= 3 and abs(err[48, "tree", 64]) <= 9, err
    assert err[128, "tree", 16] == err[48, "tree", 16] and -12 <= err[128, "tree", 64] < 0, err


def test_a_tree_on_a_chains_only_engine_is_warned_about():
    p = predict(engine="vllm-v0", **{**V0_3090, "topk": 2}, batch=4)
    assert any("chains only" in w for w in p.warnings), p.warnings
    assert not any("chains only" in w for w in predict(engine="vllm-v0", batch=4, **V0_3090).warnings)
    assert not any("chains only" in w for w in predict(engine="vllm", **{**V0_3090, "topk": 2}, batch=4).warnings)
    from specsim.analysis.build import build_scenario
    from specsim.analysis.sweep import sweep

    sc = build_scenario(engine="vllm-v0", **V0_3090)
    assert any("chains only" in n for n in sweep(sc, topk=[1, 2], steps=[2]).notes)
    assert not any("chains only" in n for n in sweep(sc, topk=[1], steps=[2]).notes)


# ---- static batches with their prefill counted (offline LLM.generate benchmarks) --------------------------------

LLAMA_VLLM = dict(model="llama-3.1-8b", gpu="h100", tp=1, engine="vllm", steps=3, topk=1, ctx=984, accept=2.1)


def test_prefill_counts_in_a_run_when_its_lengths_are_given():
    """Each wave prefills its prompts before decoding: the same cost on both sides (plus the draft head's extend
    over the prompt for speculation), so it pulls the measured speedup toward 1, more at large batch and long
    prompts; without lengths the run is the decode-only formula it was."""
    from specsim.physics.cycle import prefill_ms
    from specsim.physics.params import scenario_params

    for b in (1, 64):
        plain = predict_run(b, batch=b, accept_spread=0.0, **LLAMA_VLLM)
        pre = predict_run(b, batch=b, accept_spread=0.0, prompt_tokens=827, output_tokens=315, **LLAMA_VLLM)
        steady = predict(batch=b, **LLAMA_VLLM)
        assert plain.speedup == pytest.approx(steady.speedup, rel=1e-12)
        assert 1.0 < pre.speedup < plain.speedup and pre.baseline_tok_s < plain.baseline_tok_s
        # the wall time: prefill + output_tokens x decode step (baseline)
        sc = specsim_build(b)
        p = scenario_params(sc)
        wall_ms = float(prefill_ms(p, 827.0, float(b))["target"]) + 315 * steady.baseline_step_ms
        assert pre.baseline_tok_s == pytest.approx(1e3 * b * 315 / wall_ms, rel=1e-9)
    small, big = (predict_run(b, batch=b, accept_spread=0.0, prompt_tokens=827, output_tokens=315, **LLAMA_VLLM) for b in (1, 64))
    assert (predict_run(64, batch=64, accept_spread=0.0, **LLAMA_VLLM).speedup - big.speedup) > 5 * (
        predict_run(1, batch=1, accept_spread=0.0, **LLAMA_VLLM).speedup - small.speedup)


def specsim_build(batch):
    from specsim.analysis.build import build_scenario

    return build_scenario(batch=batch, **LLAMA_VLLM)


def test_prefill_grows_with_prompt_tokens_and_batch():
    from specsim.physics.cycle import prefill_ms
    from specsim.physics.params import scenario_params

    p = scenario_params(specsim_build(1))
    t = [[float(prefill_ms(p, n, b)["target"]) for n in (100.0, 800.0)] for b in (1.0, 64.0)]
    assert t[0][0] < t[0][1] and t[1][0] < t[1][1] and t[0][1] < t[1][1]
    # a compute-bound prefill (64 x 800 tokens): about 2 x active params x tokens at the GPU's GEMM rate
    flops = 2 * 8.0e9 * 64 * 800
    assert 0.5 < flops / (t[1][1] / 1e3) / 989e12 < 1.0


@pytest.mark.parametrize("argv, field", [
    (["predict", "--prompt-tokens", "100", "--output-tokens", "10"], "prompt-tokens"),
    (["predict", "--requests", "4", "--prompt-tokens", "100"], "output-tokens"),
    (["predict", "--requests", "4", "--prompt-tokens", "0", "--output-tokens", "10"], "prompt-tokens"),
    (["predict", "--requests", "4", "--prompt-tokens", "100", "--output-tokens", "1e30"], "output-tokens"),
    (["predict", "--requests", "4", "--prompt-tokens", "inf", "--output-tokens", "10"], "prompt-tokens"),
])
def test_bad_run_lengths_are_one_line(run_cli, argv, field):
    code, _, err = run_cli(*argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith(f"error: {field}"), err


def test_cli_run_with_prefill_round_trip(run_cli):
    code, out, _ = run_cli("predict", "--requests", "8", "--batch", "8", "--prompt-tokens", "500", "--output-tokens", "200",
                           "--json")
    run = json.loads(out)["run"]
    assert code == 0 and run["prefill_counted"] and run["prompt_tokens"] == 500 and run["output_tokens"] == 200
    code, out, _ = run_cli("predict", "--requests", "8", "--batch", "8", "--json")
    assert json.loads(out)["run"]["prefill_counted"] is False


@pytest.mark.parametrize("extra,field", [
    ({"dataset_lengths": [1]}, "dataset.sweeps.0.dataset_lengths"),
    ({"dataset_lengths": {"A": 5}}, "dataset.sweeps.0.dataset_lengths.A"),
    ({"dataset_lengths": {"A": {"input_len": -1, "output_len": 5}}}, "dataset.sweeps.0.dataset_lengths.A.input_len"),
    ({"dataset_lengths": {"A": {"input_len": 0.5, "output_len": 5}}}, "dataset.sweeps.0.dataset_lengths.A.input_len"),
    ({"dataset_lengths": {"A": {"input_len": 50}}}, "dataset.sweeps.0.dataset_lengths.A.output_len"),
    ({"dataset_lengths": {"typo": {"input_len": 50, "output_len": 5}}}, "dataset.sweeps.0.dataset_lengths.typo"),
    ({"static_batch": True}, "dataset.sweeps.0.static_batch"),
    ({"static_batch": True, "dataset_lengths": {"A": {"input_len": 50, "output_len": 5}}}, "dataset.sweeps.0.static_batch"),
    ({"static_batch": "yes"}, "dataset.sweeps.0.static_batch")])
def test_hostile_static_batch_fields(run_cli, tmp_path, extra, field):
    from specsim.io.presets import data_root

    d = json.loads(data_root("calibration").joinpath("datasets", "published_batch_sweeps.json").read_text(encoding="utf-8"))
    rows = [{"batch": b, "speedup": 1.5, "dataset": name} for name in ("A", "B") for b in (1, 8)]
    sw = {**d["sweeps"][0], "rows": rows, **extra}
    f = tmp_path / "d.json"
    f.write_text(json.dumps({**d, "sweeps": [sw], "configs": [], "baselines": []}))
    code, _, err = run_cli("validate", str(f))
    assert code == 2 and err.startswith(f"error: {field}") and len(err.strip().splitlines()) == 1, err


def test_specdecode_bench_vllm_llama_sweeps_scored_as_they_ran_within_5_pct():
    """REGRESSION guard on held-out data: SpecDecode-Bench's vLLM 0.10.1.1 Llama-3.1-8B sweeps (EAGLE-3 and EAGLE-1
    heads, four datasets), scored as the benchmark ran (static batches, prefill counted, the traces' mean lengths):
    every batch up to 64 within 5 %; without the prefill, InstructCoder at batch 64 misses by +14 % (EAGLE-3)."""
    from specsim.io.presets import data_root

    v = validate_sweeps()
    rows = [(s.id, r["batch"], r["error_pct"]) for s in v.sweeps if "llama31-8b" in s.id and s.id.startswith("vllm0101-eagle")
            for r in s.rows if not r["fitted"] and r["batch"] <= 64]
    assert len(rows) == 16 and all(abs(e) <= 5.0 for *_, e in rows), rows
    d = json.loads(data_root("calibration").joinpath("datasets", "published_batch_sweeps.json").read_text(encoding="utf-8"))
    sw = next(s for s in d["sweeps"] if s["id"] == "vllm0101-eagle3-llama31-8b-h100-specdecodebench")
    bare = {**{k: v for k, v in sw.items() if k != "static_batch"},
            "rows": [r for r in sw["rows"] if r["dataset"] == "InstructCoder"], "ctx": 512}
    bare.pop("dataset_lengths")
    assert score_sweep(bare).worst_pct > 12.0


def test_batch_expansion_is_a_verify_with_graphs_only():
    """V0 expands the verify only, and only while it runs CUDA graphs (eager V0 scores with the MQA scorer): a
    prefill, or any forward with --graph-max 0, is the same on vllm-v0 as on vllm, host copies included."""
    from specsim.analysis.build import build_scenario
    from specsim.physics.cycle import prefill_ms
    from specsim.physics.operators import batch_expansion
    from specsim.physics.params import scenario_params

    kw = dict(model="llama-3.1-8b", gpu="rtx3090", tp=1, batch=16, ctx=512, accept=1.97)
    p0, p1 = (scenario_params(build_scenario(engine=e, **kw)) for e in ("vllm-v0", "vllm"))
    assert prefill_ms(p0, 800.0, 16.0) == prefill_ms(p1, 800.0, 16.0)
    assert batch_expansion(p0) == 1.0 and batch_expansion(p1) == 0.0
    e0, e1 = (build_scenario(engine=e, graph_max=0, **kw) for e in ("vllm-v0", "vllm"))
    assert batch_expansion(scenario_params(e0)) == 0.0
    a, b = (predict(s) for s in (e0, e1))
    assert a.verify_breakdown_ms["attention"] == pytest.approx(b.verify_breakdown_ms["attention"], rel=1e-12)
    assert a.phases_ms["host"] == pytest.approx(b.phases_ms["host"], rel=1e-12)


def test_a_prefill_computes_the_logits_of_each_prompts_last_token_only():
    from specsim.physics.operators import draft_ops, target_ops
    from specsim.physics.params import scenario_params

    p = scenario_params(specsim_build(8))
    lm = {op.name: op for op in target_ops(p, 500.0, 8.0, 0.0, 0.0, True, last_logits=True)}["lm_head"]
    assert lm.m == 8.0
    assert {op.name: op for op in target_ops(p, 500.0, 8.0, 0.0, 0.0, True)}["lm_head"].m == 4000.0
    assert {op.name: op for op in draft_ops(p, 500.0, 8.0, 0.0, 0.0, True, last_logits=True)}["lm_head"].m == 8.0


def test_a_token_captured_engine_runs_eagerly_past_its_largest_graph():
    """vLLM captures graphs by token count (up to 512 tokens by default): a verify of 200 x 4 tokens is eager (no
    graph replay, host launches), one of 64 x 4 replays its padded graph."""
    from specsim.analysis.predict import operator_table

    kw = dict(model="llama-3.1-8b", gpu="h100", tp=1, engine="vllm", ctx=512)
    small, big = (operator_table(4, None, batch=b, **kw) for b in (64, 200))
    assert any(r["name"] == "graph_replay" for r in small.rows)
    assert not any(r["name"] == "graph_replay" for r in big.rows)


# ---- the engine's cap on requests run at once (SGLang: 48 with speculation on, unless the launch raises it) ----
QWEN_H100 = dict(model="qwen3-8b", gpu="h100", tp=1, engine="sglang", steps=3, accept=2.1, ctx=512)


def test_sglang_runs_48_requests_at_once_with_speculation_the_rest_queue():
    assert get_engine("sglang").spec_max_running_requests == 48 and get_engine("sglang").max_running_requests is None
    big, at_cap = predict(batch=128, **QWEN_H100), predict(batch=48, **QWEN_H100)
    raised = predict(batch=128, max_running_requests=128, **QWEN_H100)
    assert (big.running_requests, big.baseline_running_requests) == (48, 128)
    assert big.tok_s == pytest.approx(at_cap.tok_s, rel=1e-12)  # the queue adds no work to a forward
    assert big.baseline_tok_s == pytest.approx(raised.baseline_tok_s, rel=1e-12)  # plain decode runs all 128
    assert raised.running_requests == 128 and raised.tok_s > big.tok_s
    assert any("48 requests at once" in w and "80 of the batch of 128" in w for w in big.warnings)
    assert not any("at once" in w for w in raised.warnings + at_cap.warnings)


def test_a_launch_cap_holds_both_runs_alike():
    """--max-running-requests 64 at batch 128: both runs run 64 at once, so the speedup is batch 64's."""
    capped = predict(batch=128, max_running_requests=64, **QWEN_H100)
    b64 = predict(batch=64, max_running_requests=64, **QWEN_H100)
    assert (capped.running_requests, capped.baseline_running_requests) == (64, 64)
    assert capped.speedup == pytest.approx(b64.speedup, rel=1e-12)
    assert any("--max-running-requests" in w and "64 of the batch of 128" in w and "on or off" in w for w in capped.warnings)


def test_the_cap_binds_per_point_in_one_vectorised_call():
    import numpy as np

    from specsim.analysis.build import build_scenario
    from specsim.physics.cycle import throughput
    from specsim.physics.params import scenario_params

    p = scenario_params(build_scenario(batch=1, **QWEN_H100))
    p["batch"] = np.array([16.0, 48.0, 64.0, 128.0])
    th = throughput(p, 2.1)
    assert list(th["running_requests"]) == [16, 48, 48, 48] and list(th["baseline_running_requests"]) == [16, 48, 64, 128]
    for i, b in enumerate((16, 48, 64, 128)):
        assert th["tok_s"][i] == pytest.approx(predict(batch=b, **QWEN_H100).tok_s, rel=1e-9)
    assert th["tok_s"][2] == pytest.approx(th["tok_s"][3], rel=1e-12)


def test_a_run_past_the_cap_runs_the_speculative_waves_at_the_cap():
    run = predict_run(128, batch=128, accept_spread=0.0, **QWEN_H100)
    assert run.waves == [(48, 2), (32, 1)] and run.baseline_waves == [(128, 1)]
    w48, w32 = predict(batch=48, **QWEN_H100), predict(batch=32, **QWEN_H100)
    spec_ms = 2 * w48.cycle_ms / w48.accept_length + w32.cycle_ms / w32.accept_length
    assert run.tok_s == pytest.approx(1e3 * 128 / spec_ms, rel=1e-9)
    d = run.to_dict()
    assert d["baseline_waves"] == [{"requests": 128, "count": 1}]
    raised = predict_run(128, batch=128, accept_spread=0.0, max_running_requests=128, **QWEN_H100)
    assert raised.waves == [(128, 1)] and raised.baseline_waves is None and raised.speedup > run.speedup


def test_cli_max_running_requests_round_trip(run_cli):
    args = ["predict", "--model", "qwen3-8b", "--gpu", "h100", "--tp", "1", "--batch", "128", "--accept", "2.1", "--json"]
    code, out, err = run_cli(*args)
    assert code == 0, err
    d = json.loads(out)
    assert (d["running_requests"], d["baseline_running_requests"]) == (48, 128)
    code, out, err = run_cli(*args, "--max-running-requests", "128")
    assert code == 0, err
    assert json.loads(out)["running_requests"] == 128 and json.loads(out)["speedup"] > d["speedup"]
    code, out, err = run_cli(*args[:-1])
    assert code == 0 and "requests running at once, speculative" in out and "wait in the queue" in out, err


@pytest.mark.parametrize("value", ["0", "-3", "10000001", "1.5", "inf", "many"])
def test_bad_max_running_requests_is_one_line(run_cli, value):
    code, out, err = run_cli("predict", "--max-running-requests", value)
    assert code == 2 and "max-running-requests" in err and len(err.strip().splitlines()) == 1 and not out, err


def test_library_max_running_requests_is_checked():
    for bad in (0, 2.5, True, "48"):
        with pytest.raises(SpecsimError, match="max-running-requests"):
            predict(max_running_requests=bad)


@pytest.mark.parametrize("value", ["all", 0, 2.5, -1, True])
def test_hostile_sweep_running_cap(run_cli, tmp_path, value):
    body = {"kind": "throughput_sweeps", "sweeps": [{"model": "llama-3.1-8b", "gpu": "h100", "engine": "sglang", "steps": 3,
                                                      "rows": [{"batch": 2, "speedup": 1.8}, {"batch": 8, "speedup": 1.6}],
                                                      "max_running_requests": value}]}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    code, _, err = run_cli("validate", str(f))
    assert code == 2 and "dataset.sweeps.0.max_running_requests" in err and len(err.strip().splitlines()) == 1, err


def _held(reading: dict) -> dict:
    """{batch: error %} of one cap reading's held-out rows."""
    return {r["batch"]: r["error_pct"] for r in reading["held_out"]}


def test_published_sglang_sweeps_are_scored_at_48_in_both_runs_with_the_other_readings_beside():
    """The SpecDecode-Bench SGLang 0.5.9 sweeps do not state the running-requests cap. The figure's speedup barely
    moves from batch 64 to 128 in every series, which the model reproduces only with a limit on both runs; they are
    scored at SGLang's own speculative default, 48, in both runs (an inference, max_running_requests_note). The k = 21
    tree on GSM8K at batch 64 within 2 % (-17.6 % with the cap raised to the batch) and at 128 within 6 %; the engine
    default alone (48 speculative, the plain run at the full batch) puts the chain 15 % or more low at 64. Each other
    reading is scored beside it, refitted at batch 1; the validation's headline counts only the scored one."""
    from specsim.analysis.validate_sweeps import held_out_errors
    from specsim.io.presets import data_root

    d = json.loads(data_root("calibration").joinpath("datasets", "published_batch_sweeps.json").read_text(encoding="utf-8"))
    ids = [s["id"] for s in d["sweeps"] if s["id"].startswith("sglang059")]
    assert len(ids) == 6 and all(s["max_running_requests"] == 48 and s["max_running_requests_readings"] == ["batch", "preset", 64]
                                 for s in d["sweeps"] if s["id"] in ids)

    def gsm8k(sid):
        sw = next(s for s in d["sweeps"] if s["id"] == sid)
        return {**sw, "rows": [r for r in sw["rows"] if r["dataset"] == "GSM8K"], "dataset": "GSM8K"}

    tree = score_sweep(gsm8k("sglang059-eagle3-qwen3-8b-h100-tree-k21-specdecodebench"))
    err = {r["batch"]: r["error_pct"] for r in tree.rows}
    assert abs(err[64]) < 2 and abs(err[128]) < 6.5, err  # 128: 5.0 -> 6.05 % with the measured H100 profile
    raised = _held(tree.readings["raised to the batch"])
    assert raised[64] < -15 and raised[16] == pytest.approx(err[16]) and raised[128] < -40, raised
    both64 = _held(tree.readings["64 in both runs"])
    assert both64[128] > raised[128] + 20 and abs(both64[128]) > abs(err[128])  # 64 at once: halfway, still 10+ % low
    chain = score_sweep(gsm8k("sglang059-eagle3-qwen3-8b-h100-chain-specdecodebench"))
    assert _held(chain.readings["the engine preset's default"])[64] < -15
    v = validate_sweeps()
    series = [s for s in v.sweeps if s.readings and s.id.startswith("sglang059")]
    assert len(series) == 24 and sum(len(s.rows) for s in series) == 96
    groups = {title: {row[0]: row[1] for row in rows} for title, rows in cap_reading_summary(v)}
    summary = groups["sglang059-eagle3-qwen3-8b-h100-chain-specdecodebench and 5 more (24 series)"]
    assert summary["48 in both runs (scored)"] == "45 of 48" and summary["raised to the batch"] == "31 of 48", summary
    upto64 = held_out_errors(v, 64)
    assert len(upto64) == 120 and sum(e <= 12 for e in upto64) == 107  # the README's headline: the scored readings only


@pytest.mark.parametrize("readings", ["batch", [], ["all"], [0], ["batch"] * 9, [2.5], [True], [None], [{"cap": 1}]])
@pytest.mark.parametrize("fmt", [[], ["--json"], ["--format", "md"]])
def test_hostile_sweep_cap_readings(run_cli, tmp_path, readings, fmt):
    body = {"kind": "throughput_sweeps", "sweeps": [{"model": "llama-3.1-8b", "gpu": "h100", "engine": "sglang", "steps": 3,
                                                      "rows": [{"batch": 2, "speedup": 1.8}, {"batch": 8, "speedup": 1.6}],
                                                      "max_running_requests_readings": readings}]}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    code, out, err = run_cli("validate", str(f), *fmt)
    assert code == 2 and "dataset.sweeps.0.max_running_requests_readings" in err and len(err.strip().splitlines()) == 1, err
    assert not out


@pytest.mark.parametrize("key", ["configs", "baselines"])
def test_cap_readings_belong_to_sweeps_only(run_cli, tmp_path, key):
    item = {"model": "llama-3.1-8b", "gpu": "h100", "engine": "sglang", "tp": 1, "max_running_requests_readings": [48]}
    item.update({"rows": []} if key == "configs" else {"batch": 1, "tok_s": 150})
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"kind": "throughput_sweeps", key: [item]}))
    code, out, err = run_cli("validate", str(f))
    assert code == 2 and f"dataset.{key}.0.max_running_requests_readings" in err and "only on a sweep" in err, err
    assert len(err.strip().splitlines()) == 1 and not out


def test_a_sweeps_cap_readings_round_trip_through_the_cli(run_cli, tmp_path):
    """A user's sweep with an unstated cap: the scored reading's rows, the others in the sensitivity table and JSON;
    a reading equal to the scored one, or listed twice, is scored once; two rows at one batch both count."""
    rows = [{"batch": 1, "speedup": 1.6}, {"batch": 64, "speedup": 1.3}, {"batch": 96, "speedup": 1.25}, {"batch": 96, "speedup": 1.2}]
    body = {"kind": "throughput_sweeps", "sweeps": [{"id": "mine", "model": "qwen3-8b", "gpu": "h100", "engine": "sglang",
                                                      "steps": 3, "rows": rows, "max_running_requests": 48,
                                                      "max_running_requests_readings": ["batch", 48.0, "preset", "batch"]}]}
    f = tmp_path / "d.json"
    f.write_text(json.dumps(body))
    code, out, err = run_cli("validate", str(f), "--json")
    assert code == 0, err
    s = json.loads(out)["sweeps"][0]
    assert s["cap_scored"] == "48 in both runs" and list(s["cap_readings"]) == ["raised to the batch", "the engine preset's default"]
    capped = [(r["batch"], r["predicted_speedup"]) for r in s["rows"]]
    assert capped[1][1] == pytest.approx(capped[2][1], rel=1e-12)  # 48 at once in both runs: the same speedup past the cap
    raised = s["cap_readings"]["raised to the batch"]
    assert raised["rows"] == 3 and raised["rows_to_batch_64"] == 1 and [r["batch"] for r in raised["held_out"]] == [64, 96, 96]
    assert 1.25 * (1 + raised["held_out"][1]["error_pct"] / 100) < 0.95 * capped[2][1]  # a real batch of 96 verifies 2x the tokens
    code, out, err = run_cli("validate", str(f))
    assert code == 0 and "48 in both runs (scored)" in out and "raised to the batch" in out, err
    assert "48 in both runs " not in out.replace("48 in both runs (scored)", "")  # not listed again as a reading


def test_whatif_running_cap_raises_the_speculative_run_to_the_batch(run_cli):
    from specsim.analysis.whatif import whatif_running_cap

    w = whatif_running_cap(to=128, batch=128, **QWEN_H100)
    assert (w.before.running_requests, w.after.running_requests) == (48, 128)
    assert w.after.baseline_tok_s == pytest.approx(w.before.baseline_tok_s, rel=1e-12)  # plain decode ran 128 already
    assert w.after.tok_s == pytest.approx(predict(batch=128, max_running_requests=128, **QWEN_H100).tok_s, rel=1e-12)
    code, out, err = run_cli("whatif", "running-cap", "--model", "qwen3-8b", "--gpu", "h100", "--tp", "1", "--batch", "128",
                             "--to", "128", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["lever"] == "running-cap" and d["after"]["running_requests"] == 128 and d["before"]["running_requests"] == 48
    for bad in (["--to", "0"], ["--to", "x"], []):
        code, out, err = run_cli("whatif", "running-cap", *bad)
        assert code == 2 and len(err.strip().splitlines()) == 1 and not out, (bad, err)


def test_explain_and_verify_views_use_the_requests_run_at_once():
    """Closed forms, the verify curve and the operator table agree with predict once SGLang's cap binds."""
    from specsim.analysis.predict import operator_table, verify_ms
    from specsim.analysis.symbolic import closed_forms, explain

    pred = predict(batch=128, **QWEN_H100)
    ex = closed_forms(batch=128, **QWEN_H100)
    v = ex.values
    assert (v["batch"], v["batch_baseline"]) == (48, 128)
    assert v["speedup"] == pytest.approx(pred.speedup, rel=1e-9)
    # break-even: tau* = (B_b / B) T_cycle / T_d, the accept length at which the capped run only matches plain decode
    assert v["break_even_accept_length"] == pytest.approx(128 / 48 * pred.cycle_ms / pred.baseline_step_ms, rel=1e-9)
    assert "x 48/128" in explain(fmt="text", batch=128, **QWEN_H100) and "B_b" in ex.symbols
    uncapped = closed_forms(batch=32, **QWEN_H100)
    assert "B_b" not in uncapped.symbols and "x 32/32" not in explain(fmt="text", batch=32, **QWEN_H100)
    assert verify_ms([4], batch=128, **QWEN_H100).verify_ms[0] == pytest.approx(pred.verify_ms, rel=1e-12)
    table = operator_table(4, batch=128, **QWEN_H100)
    assert table.batch == 48 and table.total_ms == pytest.approx(pred.verify_ms, rel=1e-12)


def test_calibrate_costs_a_benchmarks_client_batch_at_the_running_cap():
    import numpy as np

    from specsim.analysis.build import build_scenario
    from specsim.analysis.calibrate import _model_values
    from specsim.physics.params import scenario_params

    p = scenario_params(build_scenario(**QWEN_H100))
    pts = [{"steps": 3, "batch": b, "accept_length": 2.1, "num_draft_tokens": 4} for b in (64, 48, 16)]
    ms = _model_values(p, [], None, pts)
    assert ms[0] == pytest.approx(ms[1], rel=1e-12) and ms[2] < ms[1]
    assert ms[1] == pytest.approx(predict(batch=48, **QWEN_H100).cycle_ms, rel=1e-9)
    assert np.isfinite(ms).all()


def test_numpy_integers_are_caps_too():
    import numpy as np

    from specsim.analysis.whatif import whatif_running_cap

    assert predict(batch=128, max_running_requests=np.int64(64), **QWEN_H100).running_requests == 64
    assert whatif_running_cap(to=np.int64(128), batch=128, **QWEN_H100).after.running_requests == 128


@pytest.mark.parametrize(
    ("sweep_id", "steady_worst_min_pct"),
    [("vllm0101-eagle1-llama3-70b-h100x4-specdecodebench", 12.0), ("vllm0111-eagle3-qwen3-8b-h100-specdecodebench", 15.0)],
)
def test_specdecode_bench_vllm_sweeps_scored_as_run_are_held_out_within_10_pct_at_every_batch(sweep_id, steady_worst_min_pct):
    """REGRESSION guard on held-out data of other models and TPs: SpecDecode-Bench's vLLM Llama-3-70B on 4x H100 (TP4,
    an EAGLE-1 head) and Qwen3-8B on one H100 (EAGLE-3), chains of 3, four datasets, accept length fitted at batch 1,
    scored as the benchmark ran (static batches, their prefill counted, the 8B traces' lengths as a proxy): batch 16,
    64 and 128 within 10 %. Scored as a steady stream at context 512 instead (no prefill), batch 64 misses by more
    than 12 % (70B) and 15 % (Qwen3): the protocol matters as much as the physics here."""
    v = validate_sweeps()
    rows = [(s.id, r["batch"], r["error_pct"]) for s in v.sweeps if s.id.startswith(sweep_id + "/")
            for r in s.rows if not r["fitted"]]
    assert len(rows) == 12 and all(abs(e) <= 10.0 for _, _, e in rows), rows
    from specsim.analysis.validate_sweeps import _by_dataset
    from specsim.io.presets import data_root

    d = json.loads(data_root("calibration").joinpath("datasets", "published_batch_sweeps.json").read_text(encoding="utf-8"))
    steady = next(x for x in d["sweeps"] if x["id"] == sweep_id)
    steady = {k: v for k, v in steady.items() if k not in ("static_batch", "dataset_lengths")}
    worst = max(abs(r["error_pct"]) for part in _by_dataset(steady) for r in score_sweep(part).rows if not r["fitted"])
    assert worst > steady_worst_min_pct  # the same rows without the benchmark's prefill: the difference is real


def test_the_custom_all_reduce_runs_one_shot_then_two_shot_then_nccl():
    """SGLang's custom all-reduce: one-shot below 512 KiB at TP 4 (256 KiB at TP 8, any size to 8 MiB at TP 2),
    two-shot to 8 MiB, NCCL past it; each message at its own implementation's cost, per point in one array call,
    the two-shot line near the published times it was fitted to, and a wide TP4 verify at NCCL's rate."""
    import numpy as np

    from specsim.io.presets import data_root, get_allreduce
    from specsim.physics.collectives import allreduce_us
    from specsim.physics.params import allreduce_path_params

    one, two, nccl = (get_allreduce(n) for n in ("sglang-custom-nvlink4", "sglang-custom-twoshot-nvlink4", "nccl-nvlink4"))
    assert one.fallback.name == two.name and two.fallback.name == nccl.name
    assert one.max_bytes_at(4) == 512 * 1024 - 1 and one.max_bytes_at(8) == 256 * 1024 - 1
    assert one.max_bytes_at(2) == two.max_bytes_at(4) == 8 * 1024 * 1024

    def own(ar, size, tp):
        return allreduce_us(size, tp, ar.alpha_at(tp), ar.bus_at(tp))

    def chain(size, tp):
        q = allreduce_path_params(one, one, tp)
        large = ((q["allreduce_max_bytes_graph"], q["allreduce_fallback_alpha_graph_us"],
                  q["allreduce_fallback_bus_graph_bytes_per_s"]),
                 (q["allreduce_fallback_max_bytes_graph"], q["allreduce_fallback2_alpha_graph_us"],
                  q["allreduce_fallback2_bus_graph_bytes_per_s"]))
        return allreduce_us(size, tp, q["allreduce_alpha_graph_us"], q["allreduce_bus_bytes_per_s"], large)

    sizes = [256 * 1024, 512 * 1024, 4 * 2**20, 23e6]
    assert [chain(s, 4) for s in sizes] == pytest.approx(
        [own(one, sizes[0], 4), own(two, sizes[1], 4), own(two, sizes[2], 4), own(nccl, sizes[3], 4)])
    assert chain(4 * 2**20, 2) == pytest.approx(own(one, 4 * 2**20, 2))  # TP 2: one-shot up to the 8 MiB limit
    assert chain(300e3, 8) == pytest.approx(own(two, 300e3, 8))
    assert list(chain(np.array(sizes), 4)) == pytest.approx([chain(s, 4) for s in sizes])  # one array call, per point
    data = json.loads(data_root("calibration").joinpath("datasets", "published-custom-allreduce-h100.json").read_text())
    for s in data["series"]:
        if s["kernel"] == "two-shot" and s["tp"] == 4:
            for mib, us in s["points"]:
                assert chain(mib * 2**20, 4) == pytest.approx(us, rel=0.13), (s["id"], mib)
    # a 64 x 22-token verify of Llama-3-70B at TP4: 23 MB per all-reduce, at NCCL's rate
    kw = dict(model="llama-3-70b-eagle", gpu="h100", tp=4, engine="sglang", steps=3, topk=4, draft_tokens=22,
              accept=2.6, ctx=512, batch=64, max_running_requests=64)
    per_ar_ms = own(nccl, 64 * 22 * 8192 * 2, 4) / 1e3
    assert predict(**kw).verify_breakdown_ms["allreduce"] >= (80 * 2 + 1) * per_ar_ms


def test_an_all_reduce_chain_past_three_implementations_is_refused(run_cli, tmp_path):
    from specsim.analysis.build import build_scenario
    from specsim.io.presets import get_allreduce

    chain = get_allreduce("sglang-custom-nvlink4").model_dump()
    deepest = chain["fallback"]["fallback"]
    deepest["max_message_bytes"], deepest["fallback"] = 1e9, dict(deepest)
    data = build_scenario().model_dump()
    data["parallel"]["allreduce"] = chain
    f = tmp_path / "deep.json"
    f.write_text(json.dumps(data))
    code, out, err = run_cli("predict", "--scenario", str(f))
    assert code == 2 and "at most 3" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1 and not out


def test_the_two_shot_preset_is_what_its_fit_gives():
    """models/allreduce.json's two-shot line is calibration/kernels/fit_custom_allreduce.py on its dataset, per TP,
    as its sources say (refitting the dataset reproduces the preset; a changed point or preset shows here)."""
    import importlib.util
    from pathlib import Path

    from specsim.io.presets import get_allreduce

    path = Path(__file__).resolve().parents[1] / "calibration" / "kernels" / "fit_custom_allreduce.py"
    spec = importlib.util.spec_from_file_location("fit_custom_allreduce", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    two = get_allreduce("sglang-custom-twoshot-nvlink4")
    by_tp: dict = {}
    for s in mod.series():
        if s["kernel"] == "two-shot":
            by_tp.setdefault(s["tp"], []).extend(s["points"])
    assert sorted(by_tp) == [4, 6, 8]
    for tp, pts in by_tp.items():
        alpha, bus, res = mod.fit(pts, tp)
        assert two.alpha_at(tp) == pytest.approx(alpha, abs=0.01) and two.bus_at(tp) == pytest.approx(bus, rel=1e-3)
        assert max(abs(res)) < 13.0  # % : one line per TP explains each published table


def test_tp_sizes_off_the_tables_take_the_rule_of_the_next_listed_size():
    """One-shot below 512 KiB at TP <= 4 and below 256 KiB at TP <= 8: TP 3 takes TP 4's limit, TP 5 and 7 TP 8's
    (TP 6's), past the table the last; the two-shot bandwidth runs linear in log2(TP) between its measured sizes."""
    import math

    from specsim.io.presets import get_allreduce

    one, two = get_allreduce("sglang-custom-nvlink4"), get_allreduce("sglang-custom-twoshot-nvlink4")
    assert [one.max_bytes_at(t) for t in (2, 3, 4, 5, 7, 8, 16)] == [8 * 2**20, 524287, 524287, 262143, 262143, 262143, 262143]
    b4, b6, b8 = two.bus_at(4), two.bus_at(6), two.bus_at(8)
    assert min(b4, b6) < two.bus_at(5) < max(b4, b6) and two.bus_at(16) == b8 and two.bus_at(2) == b4
    w = (math.log2(5) - 2) / (math.log2(6) - 2)
    assert two.bus_at(5) == pytest.approx(b4 + w * (b6 - b4))


def test_whatif_alpha_sets_every_implementation_of_the_chain():
    """``whatif allreduce --alpha-us`` is the latency of an all-reduce of any size at that TP: at TP4 a 21-token verify
    of 8 requests (2.6 MiB messages, two-shot) moves with it, not only the one-shot kernel's small messages."""
    from specsim.analysis.whatif import whatif_allreduce

    kw = dict(model="llama-3-70b-eagle", gpu="h100", tp=4, engine="sglang", batch=8, topk=4, draft_tokens=21, steps=3,
              accept=2.6, max_running_requests=64)
    res = whatif_allreduce(None, alpha_us=0.0, **kw)
    before, after = res.before.verify_breakdown_ms["allreduce"], res.after.verify_breakdown_ms["allreduce"]
    # 161 all-reduces per verify lose their two-shot latency (12.6 us each); the logits all-gather its own (4.8 us)
    assert before - after == pytest.approx((161 * 12.56 + 4.8) / 1e3, rel=0.01)


def test_calibrate_fits_the_all_reduce_link_its_points_take(run_cli, tmp_path):
    """Verify points whose messages pass the one-shot limit (TP4: >= 512 KiB) speak to the two-shot latency: that one
    is freed and written back to its link; points of small messages free the one-shot latency, as before."""
    from specsim.analysis.build import build_scenario
    from specsim.analysis.calibrate import Point, apply_parameters, free_parameters

    sc = build_scenario(model="llama-3-70b-eagle", gpu="h100", tp=4, engine="sglang", batch=16)
    big = [Point(k, 20.0 + k) for k in (4, 8, 16, 21)]  # 1-5.3 MiB per all-reduce
    small = [Point(k, 20.0 + k, batch=1) for k in (4, 8)]  # 64-128 KiB
    assert "allreduce_fallback_alpha_graph_us" in free_parameters(sc, 4, False, False, points=big)
    assert "allreduce_alpha_graph_us" not in free_parameters(sc, 4, False, False, points=big)
    names = free_parameters(sc, 2, False, False, points=small)
    assert "allreduce_alpha_graph_us" in names and "allreduce_fallback_alpha_graph_us" not in names
    both = free_parameters(sc, 6, False, False, points=big + small)
    assert "allreduce_alpha_graph_us" in both and "allreduce_fallback_alpha_graph_us" in both
    out = apply_parameters(sc, {"allreduce_fallback_alpha_graph_us": 17.5})
    ar = out.parallel.allreduce
    assert ar.fallback.alpha_at(4) == 17.5 and ar.alpha_at(4) == sc.parallel.allreduce.alpha_at(4)
    assert ar.fallback.fallback.alpha_at(4) == sc.parallel.allreduce.fallback.fallback.alpha_at(4)
    # through the CLI: the fitted latency lands in the scenario file's two-shot link
    f = tmp_path / "cal.json"
    code, out_text, err = run_cli("calibrate", "--model", "llama-3-70b-eagle", "--gpu", "h100", "--tp", "4", "--batch", "16",
                                  "--point", "4=20", "--point", "8=24", "--point", "16=30", "--point", "21=34", "-o", str(f))
    assert code == 0, err
    saved = json.loads(f.read_text())["parallel"]["allreduce"]
    assert saved["fallback"]["sources"]["alpha_us"].endswith("fitted by specsim calibrate")
    assert saved["fallback"]["alpha_us"]["4"] != 12.56 and saved["alpha_us"]["4"] == 4.8


def test_logits_are_gathered_in_bf16_by_nccl():
    """SGLang's LogitsProcessor all-gathers the lm_head's bf16 output through pynccl (the custom all-reduce has no
    all-gather) and makes it fp32 after: the gather is costed at NCCL's numbers on rows x vocab x 2 bytes."""
    from specsim.analysis.build import build_scenario
    from specsim.io.presets import get_allreduce
    from specsim.physics.collectives import allgather_us
    from specsim.physics.operators import target_ops
    from specsim.physics.params import scenario_params

    p = scenario_params(build_scenario(model="llama-3-70b-eagle", gpu="h100", tp=4, engine="sglang", batch=16))
    nccl = get_allreduce("nccl-nvlink4")
    op = next(o for o in target_ops(p, 4.0, verify=True) if o.name == "logits_allgather")
    rows_bytes = 16 * 4 * 128256 * 2.0
    assert op.bytes == rows_bytes
    assert op.fixed_us == pytest.approx(allgather_us(rows_bytes, 4, nccl.alpha_at(4), nccl.bus_at(4)))


TREE = {"id": "t", "model": "qwen3-8b", "gpu": "h100", "engine": "sglang", "steps": 3, "topk": 4,
        "rows": [{"batch": 1, "speedup": 1.6}, {"batch": 16, "speedup": 1.2}]}


def test_a_tree_without_its_verify_width_gets_the_rule_predict_uses():
    """Sweeps, configs and overlap pairs map to the model through one function: a tree whose source omits
    ``num_draft_tokens`` is scored at the width ``predict`` derives (steps x topk + 1 = 13 here), not skipped, and
    the same as stating that width; another width scores differently."""
    from specsim.physics.rules import draft_tokens_for

    derived = score_sweep(TREE)
    stated = score_sweep({**TREE, "num_draft_tokens": draft_tokens_for(3, 4)})
    other = score_sweep({**TREE, "num_draft_tokens": 6})
    assert derived.skipped is None and draft_tokens_for(3, 4) == 13
    assert [r["predicted_speedup"] for r in derived.rows] == [r["predicted_speedup"] for r in stated.rows]
    assert derived.tau == stated.tau != other.tau


def test_a_sweep_without_steps_is_listed_with_why():
    s = score_sweep({**TREE, "steps": None})
    assert s.skipped is not None and "steps" in s.skipped and "does not state" in s.skipped and not s.rows


def test_a_baseline_caveat_is_printed_under_the_table_and_kept_in_json(tmp_path):
    """A row's ``caveat`` (why it may not measure what its preset models) goes with its score, cut to 500 characters."""
    import json as _json

    from specsim.analysis.validate_sweeps import sweeps_text, validate_sweeps

    row = {"id": "b1", "source": {"url": "https://example.org", "quote": "q"}, "model": "llama-3.1-8b", "gpu": "h100",
           "tp": 1, "engine": "sglang", "batch": 1, "tok_s": 150.0, "caveat": "GPU clocks not stated " + "x" * 1000}
    f = tmp_path / "d.json"
    f.write_text(_json.dumps({"name": "t", "kind": "throughput_sweeps", "sweeps": [], "baselines": [row]}))
    v = validate_sweeps(str(f))
    (b,) = v.baselines
    assert b["caveat"].startswith("GPU clocks not stated") and len(b["caveat"]) == 500
    text = sweeps_text(v)
    assert "caveat, llama-3.1-8b h100 TP1 sglang: GPU clocks not stated" in text
    assert max(len(line) for line in text.splitlines()) <= 100
