"""CLI round trips, JSON schema stability and bad input (exit 2, one line, no traceback)."""

import json
import subprocess
import sys

import pytest

PREDICT_KEYS = {"tok_s", "baseline_tok_s", "speedup", "cycle_ms", "verify_ms", "accept_length", "phases_ms"}


def test_predict_json_keys(run_json):
    d = run_json("predict", "--steps", "2", "--accept", "2.1")
    assert PREDICT_KEYS <= set(d)
    assert set(d["phases_ms"]) == {"draft", "verify", "accept", "draft_extend", "host"}
    assert set(d["verify_breakdown_ms"]) >= {"launch", "allreduce", "weights", "attention", "compute"}
    assert d["kind"] == "modeled"
    assert d["measured"]["baseline_tok_s"] == 88.8


def test_predict_table_and_markdown(run_cli):
    code, out, _ = run_cli("predict", "--steps", "2", "--accept", "2.1")
    assert code == 0 and "speculative tok/s (modeled)" in out and "verify forward by component" in out
    code, out, _ = run_cli("predict", "--format", "markdown")
    assert code == 0 and out.count("|---") >= 3


def test_verify_json(run_json):
    d = run_json("verify", "--tokens", "1,3,6,16")
    assert d["tokens"] == [1, 3, 6, 16]
    assert len(d["verify_ms"]) == 4 and all(b > a for a, b in zip(d["verify_ms"], d["verify_ms"][1:]))


def test_scenarios_and_dump_round_trip(run_cli, tmp_path):
    code, out, _ = run_cli("scenarios")
    assert code == 0 and "kimi-k2.5-seed (default)" in out and "kimi-k2.5-seed-untuned" in out
    f = tmp_path / "s.json"
    code, _, _ = run_cli("scenario", "dump", "--steps", "3", "--out", str(f))
    assert code == 0
    code, out, _ = run_cli("predict", "--scenario", str(f), "--json")
    assert json.loads(out)["steps"] == 3
    code, out, _ = run_cli("scenario", "show")
    assert code == 0 and "assumption" in out


@pytest.mark.parametrize(
    "args,field",
    [
        (["--accept", "0.5"], "accept"),
        (["--steps", "2", "--accept", "3.5"], "accept"),
        (["--accept-rates", "0.5,1.5"], "accept-rates"),
        (["--steps", "0"], "steps"),
        (["--tp", "3"], "tp"),
        (["--gpu", "x100"], "gpu"),
        (["--model", "gpt-9"], "model"),
        (["--scenario", "nope"], "scenario"),
        (["--model", "/nonexistent/config.json"], "model"),
    ],
)
def test_bad_input_one_line_exit_2(run_cli, args, field):
    code, out, err = run_cli("predict", *args)
    assert code == 2
    assert err.startswith("error: ") and field in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_unknown_gpu_lists_choices(run_cli):
    _, _, err = run_cli("predict", "--gpu", "x100")
    for g in ("h100", "h200", "b200", "h20", "a100"):
        assert g in err


def test_malformed_config_file(run_cli, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    code, _, err = run_cli("predict", "--model", str(bad))
    assert code == 2 and "model" in err
    bad.write_text(json.dumps({"model_type": "gpt2", "hidden_size": 8}))
    code, _, err = run_cli("predict", "--model", str(bad))
    assert code == 2 and "model_type" in err and "llama" in err


def test_hf_config_loads(run_json, tmp_path):
    cfg = {
        "model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
        "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936, "intermediate_size": 6144,
        "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 768,
    }
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    d = run_json("predict", "--model", str(f), "--gpu", "h100", "--tp", "1")
    preset = run_json("predict", "--model", "qwen3-30b-a3b", "--gpu", "h100", "--tp", "1")
    assert d["verify_ms"] == pytest.approx(preset["verify_ms"], rel=0.02)


def test_python_dash_m():
    r = subprocess.run([sys.executable, "-m", "specsim", "predict", "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["steps"] == 2


def test_python_api_repr():
    import specsim

    p = specsim.predict(steps=2, accept=2.1)
    assert "tok/s" in repr(p) and "<table" in p._repr_html_()
    v = specsim.verify_ms([1, 3])
    assert "verify" in repr(v)


# ---- one set of deployment options on every planning command (issue 10) ----------------------

DEPLOY = ("--model", "llama-3.1-70b", "--gpu", "h100", "--tp", "4")
NAME = "llama-3.1-70b-h100-tp4-sglang"


@pytest.mark.parametrize("cmd", [
    ("predict",), ("verify", "--tokens", "1,4"), ("sweep", "--steps", "1-4"),
    ("whatif", "training", "--target-samples", "1M"), ("whatif", "allreduce", "--scale", "0.5"),
    ("whatif", "gpu", "--to", "b200"), ("whatif", "tp", "--to", "8"), ("whatif", "quant", "--dtype", "fp8"),
    ("whatif", "graph", "--phase", "verify", "--off"), ("whatif", "overlap", "--on"), ("explain",),
])
def test_every_planning_command_takes_the_deployment(run_cli, cmd):
    code, out, err = run_cli(*cmd, *DEPLOY, "--accept", "2.8", "--json")
    assert code == 0, err
    d = json.loads(out)
    d.pop("fit", None)  # the training fit's published points are Kimi-family drafts
    text = json.dumps(d)
    assert NAME in text and "kimi-k2.5-seed" not in text and "founding" not in text.lower()


@pytest.mark.parametrize("cmd", [("predict",), ("sweep", "--steps", "1-3"), ("whatif", "tp", "--to", "8"), ("explain",),
                                 ("scenario", "show")])
def test_text_output_names_the_deployment_and_fits_100_columns(run_cli, cmd):
    code, out, err = run_cli(*cmd, *DEPLOY)
    assert code == 0, err
    assert NAME in out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "$$" not in out  # explain: plain text in a terminal by default


def test_report_for_a_new_deployment(run_cli, tmp_path):
    out = tmp_path / "r.md"
    code, _, err = run_cli("report", *DEPLOY, "--out", str(out))
    assert code == 0, err
    text = out.read_text()
    head = text.split("\n## ")[0]  # title and summary: this deployment, not the founding case
    assert NAME in head and "founding case" not in head.lower() and "kimi-k2.5-seed" not in text


def test_new_model_scenario_carries_nothing_of_the_seed(run_cli, tmp_path):
    f = tmp_path / "q.json"
    code, _, err = run_cli("scenario", "dump", "--model", "qwen3-235b-a22b", "-o", str(f))
    assert code == 0, err
    d = json.loads(f.read_text())
    assert d["name"] == "qwen3-235b-a22b-h200-tp4-sglang"  # no --tp: the smallest TP that holds 470 GB of bf16
    assert any(n.startswith("tp=4: the smallest TP") for n in d["notes"])
    assert d["calibration"] is None and "measured" not in d["provenance"]
    assert "fitted_parameters" not in d["provenance"] and "dataset" not in d["provenance"]
    from specsim.io.presets import get_gpu, load_scenario

    preset = get_gpu("h200")[0].kernel_floor_us
    seed = load_scenario("kimi-k2.5-seed").gpu.kernel_floor_us
    assert d["gpu"]["kernel_floor_us"] == preset != seed  # the preset's value, not the seed's fitted one
    assert d["parallel"]["allreduce_eager"] is None
    assert "seed" not in json.dumps(d).lower()


def test_acceptance_warning_only_where_it_applies(run_json):
    generic = run_json("predict", *DEPLOY)
    assert any("generic EAGLE-3 profile" in w for w in generic["warnings"])
    given = run_json("predict", *DEPLOY, "--accept", "2.8")
    assert not any("acceptance" in w for w in given["warnings"])
    seed = run_json("predict")
    assert not any("acceptance" in w for w in seed["warnings"])


def test_flags_show_no_type_and_every_option_has_help_and_an_example(run_cli):
    import re

    for cmd in (["predict"], ["verify"], ["sweep"], ["explain"], ["report"], ["whatif", "training"],
                ["whatif", "tp"], ["scenario", "dump"]):
        code, out, _ = run_cli(*cmd, "--help")
        assert code == 0
        assert "Example: specsim" in " ".join(out.split()), cmd
        assert not re.search(r"--json\s+<bool>", out), cmd


def test_a_named_command_is_parsed_by_an_app_of_it_alone(run_cli):
    """main() builds only the named command (start-up); help, groups and unknown names see the whole app."""
    from specsim.cli import _app_for, app

    assert [c.callback.__name__ for c in _app_for(["predict", "--steps", "2"]).registered_commands] == ["predict"]
    for args in ([], ["--help"], ["whatif", "steps"], ["measure"], ["predictx"]):
        assert _app_for(args) is app
    code, out, _ = run_cli("predict", "--help")
    assert code == 0 and "specsim predict [OPTIONS]" in out
    code, out, _ = run_cli("--help")
    assert code == 0 and all(name in out for name in ("predict", "verify", "sweep", "report", "whatif", "measure"))
    code, _, err = run_cli("predictx")
    assert code == 2 and "No such command" in err


def test_a_new_model_without_tp_takes_the_smallest_tp_that_holds_it(run_json):
    """--model with no --tp: not the base scenario's TP8, but the smallest of 1, 2, 4, 8 that fits (predict's rule)."""
    import specsim
    from specsim.analysis.build import build_scenario, build_view

    for model, gpu, want in (("llama-3.1-8b", "h100", 1), ("llama-3.1-70b", "h100", 2), ("qwen3-30b-a3b", "h200", 1),
                             ("kimi-k2.5", "h200", 8)):
        p = run_json("predict", "--model", model, "--gpu", gpu)
        assert p["tp"] == want and any(w.startswith(f"tp={want}: the smallest TP") for w in p["warnings"]), (model, gpu)
        # the fast record path and the validated scenario agree
        assert build_view(model=model, gpu=gpu).parallel.tp == build_scenario(model=model, gpu=gpu).parallel.tp == want
    # 70B bf16 at a long context: TP2's KV cache no longer fits, so TP4
    assert specsim.predict(model="llama-3.1-70b", gpu="h100", batch=8, ctx=32768).to_dict()["tp"] == 4
    # nothing holds Kimi-K2.5 on one H100 node: TP8 and both warnings
    p = run_json("predict", "--model", "kimi-k2.5", "--gpu", "h100")
    assert p["tp"] == 8 and any("at none do the weights" in w for w in p["warnings"])
    assert any("target weights need" in w for w in p["warnings"])
    # an explicit --tp wins and adds no note; the default scenario keeps its own TP8
    p = run_json("predict", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "4")
    assert p["tp"] == 4 and not any(w.startswith("tp=") for w in p["warnings"])
    assert run_json("predict", "--gpu", "h100")["tp"] == 8
