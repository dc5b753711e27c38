"""Hostile-input battery (issue 11): no traceback, no hang, no unbounded work, no nonsense accepted.

Every named case of the issue is a row below. Each must exit 2 with exactly one stderr line
``error: FIELD: ...`` naming the field, write no file, and finish fast. A few run in a
subprocess under a 1.5 GiB address-space limit and a timeout (the unbounded-allocation cases);
the rest run in-process. Property tests (hypothesis) cover each input boundary.
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specsim.cli import main
from specsim.errors import SpecsimError

ROOT = Path(__file__).resolve().parents[1]
HF = Path(__file__).parent / "fixtures" / "hf"
LLAMA_CFG = json.loads((HF / "llama-3.1-8b-instruct" / "config.json").read_text())


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(code: int, err: str, field: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and field in lines[0], lines[0]
    assert "Traceback" not in err


# ---- files the table refers to ---------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("hostile")
    f: dict[str, str] = {}

    def put(name: str, text: str) -> None:
        (d / name).write_text(text)
        f[name] = str(d / name)

    put("deep.json", "[" * 100_000)
    put("deep_obj.json", '{"a":' * 50_000)
    for name, text in (("null.json", "null"), ("five.json", "5"), ("string.json", '"x"')):
        put(name, text)
    ds = {"model": "kimi-k2.5", "gpu": "h200", "tp": 8, "points": [{"tokens": 3, "ms": 25.6}, {"tokens": 6, "ms": 28.7}]}
    put("tp_null.json", json.dumps({**ds, "tp": None}))
    put("tp_true.json", json.dumps({**ds, "tp": True}))
    put("baseline_str.json", json.dumps({**ds, "baseline_tok_s": "88.8"}))
    put("tokens_inf.json", json.dumps(ds).replace('"tokens": 3,', '"tokens": 1e999,'))
    put("tokens_frac.json", json.dumps(ds).replace('"tokens": 3,', '"tokens": 3.7,'))
    put("ms_nan.json", json.dumps(ds).replace('"ms": 25.6', '"ms": NaN'))
    # scenarios derived from the default one
    from specsim.io.presets import load_scenario

    base = json.loads(load_scenario().model_dump_json())

    def scen(name: str, path: list[str], value) -> None:
        data = json.loads(json.dumps(base))
        node = data
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        put(name, json.dumps(data).replace('"__NaN__"', "NaN").replace('"__Inf__"', "Infinity"))

    scen("accept_nan.json", ["acceptance"], {"accept_length": "__NaN__"})
    scen("hbm_inf.json", ["gpu", "hbm_bytes_per_s"], "__Inf__")
    scen("capture_neg.json", ["engine", "capture_batch_sizes"], [-4, 0])
    scen("floor_inf.json", ["gpu", "kernel_floor_us"], "__Inf__")
    scen("launch_huge.json", ["engine", "eager_launch_us"], 1e308)
    scen("layers_huge.json", ["target", "num_layers"], 10**9)
    scen("batch_huge.json", ["workload", "batch"], 10**26)
    scen("layers_bool.json", ["target", "num_layers"], True)
    scen("layers_str.json", ["target", "num_layers"], "61")
    scen("tp_frac.json", ["parallel", "tp"], 8.5)
    scen("samples_huge.json", ["draft", "training_samples"], 1e308)
    # HF configs
    for name, key, value in (("hf_heads0", "num_attention_heads", 0), ("hf_hidden_inf", "hidden_size", "__Inf__"),
                             ("hf_indivisible", "hidden_size", 4097), ("hf_layers_true", "num_hidden_layers", True),
                             ("hf_layers_frac", "num_hidden_layers", 31.5)):
        cfg = {k: v for k, v in LLAMA_CFG.items() if k != "head_dim"}
        cfg[key] = value
        (d / name).mkdir()
        (d / name / "config.json").write_text(json.dumps(cfg).replace('"__Inf__"', "1e999"))
        f[name] = str(d / name / "config.json")
    moe = json.loads((HF / "qwen3-30b-a3b" / "config.json").read_text())
    moe["num_experts"] = 127.9
    (d / "hf_experts_frac").mkdir()
    (d / "hf_experts_frac" / "config.json").write_text(json.dumps(moe))
    f["hf_experts_frac"] = str(d / "hf_experts_frac" / "config.json")
    fifo = d / "fifo"
    os.mkfifo(fifo)
    f["fifo"] = str(fifo)
    (d / "garbage.log").write_bytes(bytes(range(256)) * 40)
    f["garbage.log"] = str(d / "garbage.log")
    f["dir"] = str(d)
    f["out"] = str(d / "out.json")
    return f


# (id, argv with {placeholders}, field named in the error)
CASES = [
    # tracebacks before
    ("deep-json-scenario", ["predict", "--scenario", "{deep.json}"], "scenario"),
    ("deep-json-object-scenario", ["predict", "--scenario", "{deep_obj.json}"], "scenario"),
    ("deep-json-model", ["predict", "--model", "{deep.json}"], "model"),
    ("deep-json-dataset", ["validate", "{deep.json}"], "dataset"),
    ("validate-null", ["validate", "{null.json}"], "dataset"),
    ("validate-5", ["validate", "{five.json}"], "dataset"),
    ("validate-string", ["validate", "{string.json}"], "dataset"),
    ("validate-tp-null", ["validate", "{tp_null.json}"], "tp"),
    ("validate-tp-true", ["validate", "{tp_true.json}"], "tp"),
    ("validate-baseline-str", ["validate", "{baseline_str.json}"], "baseline_tok_s"),
    ("validate-tokens-1e999", ["validate", "{tokens_inf.json}"], "tokens"),
    ("validate-ms-nan", ["validate", "{ms_nan.json}"], "ms"),
    ("hf-heads-0", ["predict", "--model", "{hf_heads0}"], "num_attention_heads"),
    ("hf-hidden-1e999", ["predict", "--model", "{hf_hidden_inf}"], "hidden_size"),
    ("batch-400-zeros", ["predict", "--batch", "1" + "0" * 400], "batch"),
    ("sweep-accept-1-inf-1", ["sweep", "--accept", "1:inf:1"], "accept"),
    ("sweep-accept-tiny-step", ["sweep", "--accept", "1:1e308:1e-308"], "accept"),
    ("whatif-allreduce-scale-inf", ["whatif", "allreduce", "--scale", "inf"], "scale"),
    ("scenario-floor-inf", ["predict", "--scenario", "{floor_inf.json}"], "kernel_floor_us"),
    ("scenario-launch-1e308", ["predict", "--scenario", "{launch_huge.json}"], "eager_launch_us"),
    # unbounded reads / allocations before
    ("dev-zero-scenario", ["predict", "--scenario", "/dev/zero"], "scenario"),
    ("dev-zero-model", ["predict", "--model", "/dev/zero"], "model"),
    ("dev-zero-dataset", ["validate", "/dev/zero"], "dataset"),
    ("dev-zero-log", ["ingest", "/dev/zero"], "file"),
    ("dev-zero-from-log", ["calibrate", "--model", "kimi-k2.5", "--gpu", "h200", "--tp", "8", "--point", "3=25.6",
                           "--from-log", "/dev/zero", "--out", "{out}"], "file"),
    ("fifo-scenario", ["predict", "--scenario", "{fifo}"], "scenario"),
    ("fifo-log", ["ingest", "{fifo}"], "file"),
    ("sweep-steps-1e9", ["sweep", "--steps", "1-1000000000"], "steps"),
    ("verify-tokens-1e8", ["verify", "--tokens", "1-100000000"], "tokens"),
    ("sweep-1e9-configs", ["sweep", "--steps", "1-64", "--topk", "1-64", "--batch", "1-1000", "--ctx", "1-4000"], "sweep"),
    ("bootstrap-1e9", ["calibrate", "--model", "kimi-k2.5", "--gpu", "h200", "--tp", "8", "--point", "3=25.6",
                       "--point", "6=28.7", "--bootstrap", "1000000000", "--out", "{out}"], "bootstrap"),
    # nonsense accepted before
    ("sweep-accept-nan", ["sweep", "--accept", "nan"], "accept"),
    ("sweep-allreduce-nan", ["sweep", "--allreduce-scale", "nan"], "allreduce-scale"),
    ("sweep-allreduce-inf", ["sweep", "--allreduce-scale", "inf"], "allreduce-scale"),
    ("sweep-top-0", ["sweep", "--top", "0"], "top"),
    ("sweep-top-neg", ["sweep", "--top", "-1"], "top"),
    ("verify-tokens-1e20", ["verify", "--tokens", "100000000000000000000"], "tokens"),
    ("verify-tokens-huge-width", ["verify", "--tokens", "1000000"], "tokens"),
    ("draft-tokens-200000", ["predict", "--topk", "4", "--draft-tokens", "200000"], "draft-tokens"),
    ("scenario-empty-name", ["predict", "--scenario", ""], "scenario"),
    ("scenario-accept-nan", ["predict", "--scenario", "{accept_nan.json}"], "accept_length"),
    ("scenario-hbm-inf", ["predict", "--scenario", "{hbm_inf.json}"], "hbm_bytes_per_s"),
    ("scenario-capture-negative", ["predict", "--scenario", "{capture_neg.json}"], "capture_batch_sizes"),
    ("scenario-layers-1e9", ["predict", "--scenario", "{layers_huge.json}"], "num_layers"),
    ("scenario-batch-1e26", ["predict", "--scenario", "{batch_huge.json}"], "batch"),
    ("scenario-layers-true", ["predict", "--scenario", "{layers_bool.json}"], "num_layers"),
    ("scenario-layers-string", ["predict", "--scenario", "{layers_str.json}"], "num_layers"),
    ("scenario-tp-fraction", ["predict", "--scenario", "{tp_frac.json}"], "tp"),
    ("hf-hidden-indivisible", ["predict", "--model", "{hf_indivisible}"], "hidden_size"),
    ("hf-layers-true", ["predict", "--model", "{hf_layers_true}"], "num_hidden_layers"),
    ("hf-layers-fraction", ["predict", "--model", "{hf_layers_frac}"], "num_hidden_layers"),
    ("hf-experts-127.9", ["predict", "--model", "{hf_experts_frac}"], "num_experts"),
    ("validate-tokens-3.7", ["validate", "{tokens_frac.json}"], "tokens"),
    ("explain-batch-1e30", ["explain", "--batch", "1e30"], "batch"),
    ("predict-batch-1e26", ["predict", "--batch", "100000000000000000000000000"], "batch"),
    ("report-whatif-inf", ["report", "--whatif", "inf", "--out", "{dir}/r.html"], "whatif"),
    ("predict-accept-nan", ["predict", "--accept", "nan"], "accept"),
    ("predict-accept-inf", ["predict", "--accept", "inf"], "accept"),
    ("predict-rates-nan", ["predict", "--accept-rates", "0.8,nan"], "accept-rates"),
    ("training-samples-inf", ["whatif", "training", "--target-samples", "inf"], "target-samples"),
    ("fleet-nan", ["whatif", "training", "--fleet-tokens-per-day", "nan"], "fleet-tokens-per-day"),
    ("alpha-inf", ["whatif", "allreduce", "--alpha-us", "inf"], "alpha-us"),
    ("sweep-batch-range-reversed", ["sweep", "--batch", "8-1"], "batch"),
    ("ints-garbage", ["sweep", "--steps", "abc"], "steps"),
    # session 23's audit: each names the flag the user gave, the value and the range
    ("calibrate-baseline-denormal", ["calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--point",
                                     "1=7.8", "--baseline-tok-s", "1e-320", "--out", "{dir}/c.json"], "baseline-tok-s"),
    ("calibrate-point-denormal", ["calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--point",
                                  "1=1e-320", "--point", "3=8", "--out", "{dir}/c.json"], "point"),
    ("calibrate-point-nan", ["calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--point", "1=nan",
                             "--out", "{dir}/c.json"], "finite"),
    ("calibrate-log-no-records", ["calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--from-log",
                                  "{garbage.log}", "--out", "{dir}/c.json"], "from-log"),
    ("scenario-samples-1e308", ["whatif", "training", "--scenario", "{samples_huge.json}"], "training_samples"),
    ("training-data-1e308", ["whatif", "training", "--data", "1e308=2.6"], "data"),
    ("training-gpus-1e9", ["whatif", "training", "--gpus-per-replica", "1000000000"], "gpus-per-replica"),
    ("alpha-1e308", ["whatif", "allreduce", "--alpha-us", "1e308"], "alpha-us"),
    ("report-sweep-past-64", ["report", "--out", "{dir}/r.html", "--sweep", "1-100000"], "sweep"),
    ("report-accept-1000", ["report", "--out", "{dir}/r.html", "--accept-lengths", "1000"], "accept-lengths"),
    ("measure-kv-margin-neg", ["measure", "forward", "--kv-margin-gib", "-1"], "kv-margin-gib"),
    ("measure-repeats-neg", ["measure", "draft", "--repeats", "-1"], "repeats"),
    ("verify-width-twice", ["verify", "--tokens", "1,1"], "tokens"),
    # outputs
    ("out-directory", ["scenario", "dump", "--out", "{dir}"], "out"),
    ("out-missing-parent", ["scenario", "dump", "--out", "{dir}/no/such/dir/x.json"], "out"),
    ("calibrate-out-directory", ["calibrate", "--model", "kimi-k2.5", "--gpu", "h200", "--tp", "8", "--point", "3=25.6",
                                 "--point", "6=28.7", "--out", "{dir}"], "out"),
]


def _fill(argv: list[str], files: dict[str, str]) -> list[str]:
    out = []
    for a in argv:
        for k, v in files.items():
            a = a.replace("{" + k + "}", v)
        out.append(a)
    return out


@pytest.mark.parametrize(("argv", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_named_case_is_refused_in_one_line(capsys, files, argv, field):
    before = set(os.listdir(files["dir"]))
    t = time.perf_counter()
    code, out, err = run(capsys, *_fill(argv, files))
    assert time.perf_counter() - t < 20
    assert_refused(code, err, field)
    assert set(os.listdir(files["dir"])) == before  # no file written, no temp file left
    assert ".specsim-tmp" not in err and ".tmp" not in err


@pytest.mark.parametrize("argv, line", [
    (["explain", "--batch", "1e30"], "error: batch: got 1e30; allowed: an integer in [1, 1000000]"),
    (["predict", "--batch", "abc"], "error: batch: got 'abc'; allowed: an integer in [1, 1000000]"),
    (["predict", "--batch", ""], "error: batch: got ''; allowed: an integer in [1, 1000000]"),
    (["predict", "--ctx", "1.5"], "error: ctx: got 1.5; allowed: an integer in [0, 100000000]"),
    (["sweep", "--top", "1.5"], "error: top: got 1.5; allowed: an integer"),
    (["sweep", "--top", "1e30"], "error: top: got 1e30; allowed: an integer of magnitude <= 1e15"),
    (["predict", "--accept", ""], "error: accept: got ''; allowed: a finite number"),
    (["whatif", "allreduce", "--scale", "x"], "error: scale: got 'x'; allowed: a finite number"),
])
def test_int_option_given_a_non_integer_gets_the_standard_line(capsys, argv, line):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.strip() == line


def test_battery_size():
    assert len(CASES) >= 60


# ---- under a memory limit, in a subprocess (the unbounded cases) ----------------------------------

LIMIT = int(1.5 * 2**30)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


@pytest.mark.parametrize("argv", [
    ["predict", "--scenario", "/dev/zero"],
    ["ingest", "/dev/zero"],
    ["sweep", "--steps", "1-64", "--topk", "1-64", "--batch", "1-1000", "--ctx", "1-4000"],
    ["verify", "--tokens", "1-100000000"],
], ids=["dev-zero-scenario", "dev-zero-log", "sweep-1e9", "tokens-1e8"])
def test_bounded_under_memory_limit(argv):
    p = subprocess.run([sys.executable, "-m", "specsim", *argv], capture_output=True, text=True, timeout=60,
                       preexec_fn=_limited, cwd=ROOT)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_fifo_without_writer_does_not_block(files):
    p = subprocess.run([sys.executable, "-m", "specsim", "ingest", files["fifo"]], capture_output=True, text=True,
                       timeout=30, cwd=ROOT)
    assert p.returncode == 2 and "regular file" in p.stderr


# ---- outputs ---------------------------------------------------------------------------------------


def test_out_symlink_is_written_through(capsys, tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    code, _, err = run(capsys, "scenario", "dump", "--out", str(link))
    assert code == 0, err
    assert link.is_symlink() and json.loads(real.read_text())["name"]


def test_out_permissions_are_kept(capsys, tmp_path):
    f = tmp_path / "s.json"
    f.write_text("{}")
    f.chmod(0o600)
    assert run(capsys, "scenario", "dump", "--out", str(f))[0] == 0
    assert stat.S_IMODE(f.stat().st_mode) == 0o600


def test_out_dash_is_stdout(capsys):
    code, out, _ = run(capsys, "scenario", "dump", "--out", "-")
    assert code == 0 and json.loads(out)["name"]


def test_temp_files_removed_on_error_and_stale_ones_cleaned(tmp_path, monkeypatch):
    from specsim.io import files as io_files

    target = tmp_path / "x.txt"
    stale = tmp_path / f".x.txt.{2**22 + 12345}.abc.specsim-tmp"  # a pid that does not run
    stale.write_text("partial")

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(io_files.os, "replace", boom)
    with pytest.raises(SpecsimError, match="No space left"):
        io_files.write_atomic(target, "data")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_temp_file_removed_on_sigterm(tmp_path):
    code = ("import os, signal, sys\n"
            "from specsim.io import files\n"
            "real = os.fsync\n"
            "def slow(fd):\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "os.fsync = slow\n"
            "files.write_atomic(sys.argv[1], 'x' * 1000)\n")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out.txt")], capture_output=True, text=True,
                       timeout=30, cwd=ROOT)
    assert p.returncode == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


def test_ingest_stdin_and_only_corrupt_lines(tmp_path):
    log = (ROOT / "tests" / "fixtures" / "ingest" / "sglang_v0_4_6.log").read_text()
    p = subprocess.run([sys.executable, "-m", "specsim", "ingest", "-", "--json"], input=log, capture_output=True,
                       text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["formats"]["sglang_decode"] >= 1
    junk = tmp_path / "junk.log"
    junk.write_text("Decode batch. #running-req: 1, #tok\n{bad json\n")
    p = subprocess.run([sys.executable, "-m", "specsim", "ingest", str(junk)], capture_output=True, text=True,
                       timeout=60, cwd=ROOT)
    # nothing recognised in the whole input: one line naming the file and the counts, exit 2 (a file with records
    # beside corrupt lines still exits 0: corrupt lines are skipped and counted)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert "junk.log (2 lines read, 2 skipped as corrupt" in p.stderr


# ---- property tests per boundary ---------------------------------------------------------------

PROP = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
PROP_CLI = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
_NUMTEXT = st.text(alphabet=list("0123456789-:,.e+ infINFa"), max_size=40)


@PROP
@given(_NUMTEXT)
def test_int_lists_bounded(text):
    from specsim.io.args import MAX_LIST_VALUES, parse_int_list

    try:
        out = parse_int_list(text, "steps")
    except SpecsimError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("steps")
        return
    assert 1 <= len(out) <= MAX_LIST_VALUES


@PROP
@given(_NUMTEXT)
def test_float_lists_finite_and_bounded(text):
    from specsim.io.args import MAX_LIST_VALUES, parse_float_ranges

    try:
        out = parse_float_ranges(text, "accept")
    except SpecsimError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("accept")
        return
    assert 1 <= len(out) <= MAX_LIST_VALUES and all(math.isfinite(v) for v in out)


@PROP
@given(st.text(alphabet=list('[]{}"\\:,0123456789aeNI '), max_size=300))
def test_json_reader_never_recurses(text):
    from specsim.io.safe_read import loads_bounded

    try:
        loads_bounded(text, "scenario", "x.json")
    except SpecsimError as exc:
        assert "\n" not in str(exc)


_VALUES = st.one_of(st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                    st.text(max_size=5), st.none(), st.lists(st.integers(-5, 5), max_size=3))
_FIELDS = [("gpu", "hbm_bytes_per_s"), ("gpu", "kernel_floor_us"), ("target", "num_layers"), ("target", "hidden"),
           ("engine", "eager_launch_us"), ("engine", "capture_batch_sizes"), ("workload", "batch"),
           ("workload", "ctx"), ("parallel", "tp"), ("parallel", "allreduce_scale"), ("speculation", "steps"),
           ("gpu", "sm_count"), ("gpu", "moe_cta_bytes_per_s"), ("gpu", "moe_cta_exit_us"),
           ("engine", "moe_wide_tile_mem_efficiency"), ("engine", "graph_node_us"), ("gpu", "moe_wide_tile_mem_efficiency")]


@pytest.fixture(scope="module")
def base_scenario_dict():
    from specsim.io.presets import load_scenario

    return json.loads(load_scenario().model_dump_json())


@PROP
@given(st.sampled_from(_FIELDS), _VALUES)
def test_scenario_fields_valid_or_one_line_error(base_scenario_dict, where, value):
    from specsim.io.presets import scenario_from_dict

    data = json.loads(json.dumps(base_scenario_dict))
    data[where[0]][where[1]] = value
    try:
        sc = scenario_from_dict(data)
    except SpecsimError as exc:
        assert "\n" not in str(exc) and where[1] in str(exc)
        return
    v = getattr(getattr(sc, where[0]), where[1])
    if v is None:  # an engine's "the GPU's measured value": what the model reads is the GPU's
        from specsim.physics.params import GPU_MEASURED_ENGINE_FIELDS, scenario_params

        assert where[0] == "engine" and where[1] in GPU_MEASURED_ENGINE_FIELDS
        v = scenario_params(sc)[where[1]]
    for x in (v if isinstance(v, list) else [v]):
        assert not isinstance(x, bool) and math.isfinite(x) and x >= 0


@PROP
@given(st.sampled_from(["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                        "vocab_size", "intermediate_size", "head_dim"]), _VALUES)
def test_hf_config_fields_valid_or_one_line_error(tmp_path_factory, key, value):
    from specsim.io.hfconfig import load_hf_config

    cfg = dict(LLAMA_CFG)
    cfg[key] = value
    d = tmp_path_factory.mktemp("hf")
    (d / "config.json").write_text(json.dumps(cfg, allow_nan=True))
    try:
        t, _ = load_hf_config(d / "config.json")
    except SpecsimError as exc:
        assert "\n" not in str(exc)
        return
    assert t.hidden >= 1 and t.attention.num_heads >= 1 and t.num_layers >= 1


@PROP_CLI
@given(st.integers(0, 10**12), st.sampled_from(["predict", "explain"]), st.sampled_from(["--batch", "--ctx", "--tp"]))
def test_cli_int_flags_valid_or_refused(capsys, value, cmd, flag):
    code, out, err = run(capsys, cmd, flag, str(value), "--format", "json")
    if code == 0:
        json.loads(out) if out.strip().startswith("{") else None
    else:
        assert_refused(code, err, flag.lstrip("-"))


@PROP_CLI
@given(st.floats(allow_nan=True, allow_infinity=True) | st.floats(-1e6, 1e6))
def test_cli_float_flags_finite(capsys, value):
    code, out, err = run(capsys, "whatif", "allreduce", "--scale", repr(value), "--json")
    if not math.isfinite(value) or value <= 0:
        assert_refused(code, err, "scale")
    elif code == 0:
        d = json.loads(out)
        assert "nan" not in out.lower() and d
    else:
        assert_refused(code, err, "scale")


# ---- sweep CSV: to_csv writes what columns_to_csv writes ------------------------------------------


@pytest.mark.parametrize("kw", [
    dict(steps=[1, 2, 3], batch=list(range(1, 40)), ctx=[512, 4096, 70000], accept=[1.5, 2.0, 2.75, 3.1],
         accept_at_steps=3),
    dict(steps=[4], topk=[1, 2], batch=[1, 7, 64], accept=[1.01 + 0.013 * i for i in range(300)]),
    dict(steps=[1], batch=[1]),
])
def test_sweep_csv_is_columns_to_csv(kw, monkeypatch):
    import specsim.analysis.sweep as sw
    from specsim.io.csvfmt import columns_to_csv

    res = sw.sweep(None, **kw)
    ints = ("steps", "topk", "draft_tokens", "tp", "batch", "ctx", "fits_memory", "baseline_fits_memory")
    cols = [("label" if c == "gpu" else "int" if c in ints else "float", res.columns[c]) for c in sw.COLUMNS]
    want = columns_to_csv(list(sw.COLUMNS), cols, {sw.COLUMNS.index("gpu"): res.gpu_names})
    assert res.to_csv() == want
    assert want.count("\n") == res.n + 1
    assert b"".join(res.iter_csv()).decode("ascii") == want  # the pieces a --csv file is written in


# ------------------------------------------------------------------ session-5 fuzzing (helper battery)
def _one_line_exit_2(run_cli, *args, field: str):
    code, _, err = run_cli(*args)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and field in lines[0] and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("measured,field", [(5, "provenance"), ("x", "provenance"), ({"a": True}, "provenance"),
                                            ({"a": [1]}, "provenance")])
def test_a_scenario_whose_measurements_are_not_a_record_is_one_line(run_cli, tmp_path, measured, field):
    """provenance.measured is shown beside the model: an int there gave a TypeError traceback in predict."""
    d = json.loads((ROOT / "calibration" / "scenarios" / "kimi-k2.5-seed.json").read_text())
    d["provenance"]["measured"] = measured
    f = tmp_path / "s.json"
    f.write_text(json.dumps(d))
    _one_line_exit_2(run_cli, "predict", "-s", str(f), field=field)
    d["provenance"]["measured"] = {"baseline_tok_s": 88.8, "note": "text is fine", "missing": None}
    f.write_text(json.dumps(d))
    code, _, err = run_cli("predict", "-s", str(f))
    assert code == 0, err


@pytest.mark.parametrize("extra,field", [({"eager_allreduce": 3}, "eager_allreduce"), ({"engine": 5}, "engine"),
                                         ({"engine": [1, 2]}, "engine"), ({"engine": "x"}, "engine"),
                                         ({"graph": "yes"}, "graph"), ({"moe_kernel": 1}, "moe_kernel")])
def test_hostile_dataset_deployment_fields_are_one_line(run_cli, tmp_path, extra, field):
    """A dataset's engine overrides and preset names: a number there gave an AttributeError/TypeError traceback."""
    d = json.loads((ROOT / "calibration" / "datasets" / "kimi-k2.5-seed.json").read_text())
    d.update(extra)
    f = tmp_path / "d.json"
    f.write_text(json.dumps(d))
    _one_line_exit_2(run_cli, "validate", str(f), field=field)


def test_a_mapping_of_numbers_refuses_booleans(run_cli, tmp_path):
    """gpu.peak_flops maps dtypes to FLOP/s: true there was read as 1 FLOP/s and predicted 0 tok/s."""
    d = json.loads((ROOT / "calibration" / "scenarios" / "kimi-k2.5-seed.json").read_text())
    d["gpu"]["peak_flops"]["bf16"] = True
    f = tmp_path / "s.json"
    f.write_text(json.dumps(d))
    _one_line_exit_2(run_cli, "predict", "-s", str(f), field="peak_flops")


@pytest.mark.parametrize("args,field", [(("predict", "--accept-rates", "0.8,,0.4"), "accept-rates"),
                                        (("predict", "--accept-rates", "0.8,0.4,"), "accept-rates"),
                                        (("verify", "--tokens", "1,,3"), "tokens"),
                                        (("sweep", "--steps", "1,,3"), "steps"),
                                        (("sweep", "--gpu", "h100,,h200"), "gpu"),
                                        (("sweep", "--gpu", ""), "gpu"),
                                        (("sweep", "--accept-rates", "0.8,0.6;;0.7"), "accept-rates"),
                                        (("validate", "kimi-k2.5-seed", "--fit", "1,,3"), "fit")])
def test_an_empty_list_item_is_refused_not_dropped(run_cli, args, field):
    """Dropping the empty item would shift every later position (0.8,,0.4 read as two rates)."""
    _one_line_exit_2(run_cli, *args, field=field)


def test_tree_sweeps_are_bounded_by_their_combinations(run_cli):
    """Each (steps, topk, draft tokens) combination evaluates the whole grid: 64 x 64 x 200 ran for minutes and
    64 x 64 x 4096 used 1 GB just to count itself; both are refused at once."""
    from specsim.analysis.sweep import MAX_SWEEP_COMBOS

    for dt in ("1-200", "1-4096"):
        t0 = time.perf_counter()
        line = _one_line_exit_2(run_cli, "sweep", "--steps", "1-64", "--topk", "1-64", "--draft-tokens", dt, field="sweep")
        assert f"{MAX_SWEEP_COMBOS:,}" in line and time.perf_counter() - t0 < 5.0


def test_report_accept_lengths_are_bounded(run_cli, tmp_path):
    out = tmp_path / "r.md"
    _one_line_exit_2(run_cli, "report", "--out", str(out), "--accept-lengths", ",".join(["2.0"] * 65), field="accept-lengths")
    assert not out.exists()


def test_piped_standard_input_is_bounded(monkeypatch):
    """ingest - < /dev/zero read for ever (no newline ever comes); a piped log is capped."""
    import io

    from specsim.io import safe_read

    monkeypatch.setattr(safe_read, "MAX_STDIN_BYTES", 10_000)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\0" * 50_000)))
    with pytest.raises(SpecsimError, match="standard input gave more than"):
        for _ in safe_read.iter_lines("-", max_line=100, chunk=1000):
            pass


def test_a_file_name_the_system_refuses_is_one_short_line(run_cli):
    line = _one_line_exit_2(run_cli, "predict", "--scenario", "x" * 5000, field="file")
    assert len(line) < 300 and "too long" in line


def test_measured_cycles_of_a_log_cost_one_array_evaluation_per_topk():
    """calibrate --from-log costs every cycle record; they are evaluated together (equal to one at a time), each
    at the requests the engine runs at once (the seed's SGLang runs 48 with speculation: batch 64 costs 48)."""
    import numpy as np

    from specsim.analysis import calibrate as cal
    from specsim.analysis.build import build_scenario
    from specsim.physics.cycle import cycle_ms, cycle_phases_ms
    from specsim.physics.params import scenario_params

    p = scenario_params(build_scenario(None))
    cycles = [{"steps": s, "topk": k, "batch": b, "num_draft_tokens": (s + 1) if k == 1 else 2 * s + 1,
               "accept_length": 1.0 + 0.5 * s, "cycle_ms": 10.0}
              for s, k, b in [(1, 1, 1), (3, 1, 8), (3, 4, 2), (5, 2, 16), (2, 1, 64), (4, 4, 1)]]
    one_by_one = []
    for c in cycles:
        q = dict(p)
        q.update(steps=float(c["steps"]), topk=float(c["topk"]), batch=float(min(c["batch"], 48)),
                 num_draft_tokens=float(c["num_draft_tokens"]))
        one_by_one.append(float(cycle_ms(cycle_phases_ms(q, c["accept_length"]))))
    assert p["spec_running_cap"] == 48.0
    # the same formulas; a MoE's distinct experts take math.lgamma on floats and scipy's gammaln on arrays
    assert np.allclose(cal._model_values(p, [], None, cycles), np.array(one_by_one), rtol=1e-12, atol=0.0)


def test_a_dataset_point_context_has_the_dataset_range(run_cli, tmp_path):
    """A point's ctx of 1e12 was accepted (and scored a 62,936,212 % MAPE); the dataset's own ctx is capped."""
    d = json.loads((ROOT / "calibration" / "datasets" / "kimi-k2.5-seed.json").read_text())
    d["points"][0]["ctx"] = 1e12
    f = tmp_path / "d.json"
    f.write_text(json.dumps(d))
    _one_line_exit_2(run_cli, "validate", str(f), field="points.0.ctx")


@pytest.mark.parametrize("args,value", [(("predict", "--accept", "abc"), "'abc'"), (("predict", "--accept=zz"), "'zz'"),
                                        (("predict", "--format", "xml"), "'xml'"),
                                        # the value click kept (the last), not the first; a value that is an option's name
                                        (("predict", "--accept", "2.1", "--accept=zz"), "'zz'"),
                                        (("predict", "--format", "--accept", "--accept", "q"), "'--accept'")])
def test_a_flag_that_does_not_parse_names_the_value_given(run_cli, args, value):
    """typer's own coercion messages carry no value ("Input should be a valid number"); the line names it."""
    line = _one_line_exit_2(run_cli, *args, field=args[1].lstrip("-").split("=")[0])
    assert f"got {value}" in line


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs a /proc that refuses new files")
def test_an_output_directory_that_refuses_new_files_is_refused_before_the_work(run_cli):
    """/proc passes every permission test; calibrate ran its fit and printed warnings before failing to write."""
    line = _one_line_exit_2(run_cli, "calibrate", "--model", "kimi-k2.5", "--gpu", "h200", "--tp", "8", "--point", "1=17",
                            "--point", "3=19", "--out", "/proc/specsim-test.json", field="out")
    assert "cannot write there" in line


def test_a_huge_miss_prints_a_short_percentage(run_cli):
    """1e-300 ms points made a 300-digit percentage in the error line; such times are now refused up front, and a
    time inside the range that the physics cannot reach still gets a short percentage."""
    line = _one_line_exit_2(run_cli, "calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1",
                            "--point", "1=1e-300", "--point", "3=1e-300", "--out", "-", field="point")
    assert len(line) < 300 and "allowed: a time in [0.001, 10000000] ms" in line
    line = _one_line_exit_2(run_cli, "calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1",
                            "--point", "1=0.001", "--point", "3=0.001", "--out", "-", field="point")
    assert len(line) < 300 and "%" in line


def test_quantising_a_part_the_model_lacks_is_refused(run_cli, run_json):
    """whatif quant --target routed_experts on a dense model reported a change of nothing."""
    line = _one_line_exit_2(run_cli, "whatif", "quant", "--dtype", "int4", "--target", "routed_experts",
                            "--model", "qwen3-8b", "--tp", "1", field="target")
    assert "no routed experts" in line and "attention" in line
    d = run_json("whatif", "quant", "--dtype", "fp8", "--model", "qwen3-8b", "--tp", "1")  # default: all of a dense model
    assert d["after"]["baseline_tok_s"] > d["before"]["baseline_tok_s"]


def test_training_costs_are_bounded(run_cli):
    """--gpu-hours-per-100k 1e308 printed 'GPU-hours invested inf'."""
    _one_line_exit_2(run_cli, "whatif", "training", "--gpu-hours-per-100k", "1e308", field="gpu-hours-per-100k")


@pytest.mark.parametrize("field,value", [("sm_count", 1), ("sm_count", 10_000), ("moe_cta_bytes_per_s", 1e6),
                                         ("moe_cta_bytes_per_s_fp8", 1e14), ("moe_cta_exit_us", 1e3), ("moe_cta_tile_us", 0.0)])
def test_the_fused_moe_grid_at_its_bounds_gives_finite_predictions(field, value):
    """Every value the schema lets through for the grid's GPU numbers costs a finite, positive forward (a bf16
    MoE on the Triton tiles, where the grid applies)."""
    from specsim.analysis.build import build_scenario
    from specsim.analysis.predict import evaluate
    from specsim.io.presets import scenario_from_dict

    d = build_scenario(model="qwen3-30b-a3b", gpu="h200", tp=1, engine="sglang", batch=64).model_dump()
    d["gpu"][field] = value
    pred = evaluate(scenario_from_dict(d))
    assert math.isfinite(pred.tok_s) and pred.tok_s > 0 and math.isfinite(pred.baseline_tok_s) and pred.baseline_tok_s > 0


# ---- found by a fuzzing pass (session 10) ----
@pytest.mark.parametrize("path,value,field", [
    (("graph", "idle_replay_us"), None, "graph.idle_replay_us"),
    (("graph", "idle_replay_us"), "x", "graph.idle_replay_us"),
    (("attention", "shape", "kv_heads"), None, "attention.shape.kv_heads"),
    (("attention", "shape", "kv_heads"), [8], "attention.shape.kv_heads"),
    (("copy", "points", 0, "variant"), 5, "copy.points[0].variant"),
])
def test_a_profile_field_of_the_wrong_type_is_one_line_in_predict_and_check(run_cli, tmp_path, path, value, field):
    """The fit read these fields unchecked: a null or a string gave a TypeError traceback in predict, and
    `measure check` passed the file."""
    d = json.loads((ROOT / "models" / "profiles" / "h200.json").read_text())
    o = d
    for k in path[:-1]:
        o = o[k]
    o[path[-1]] = value
    f = tmp_path / "p.json"
    f.write_text(json.dumps(d))
    _one_line_exit_2(run_cli, "predict", "--profile", str(f), field=field)
    code, _, err = run_cli("measure", "check", str(f))
    assert code == 2 and field in err, err


@pytest.mark.parametrize("rows,field", [(1, "dataset.sweeps.0.rows"), ([{"batch": 1, "speedup": 1.5, "dataset": ["x"]},
                                                                         {"batch": 8, "speedup": 1.4, "dataset": ["x"]}],
                                                                        "dataset.sweeps.0.rows.0.dataset")])
def test_sweep_rows_of_the_wrong_shape_are_one_line(run_cli, tmp_path, rows, field):
    d = json.loads((ROOT / "calibration" / "datasets" / "published_batch_sweeps.json").read_text())
    sw = next(s for s in d["sweeps"] if s.get("static_batch"))
    f = tmp_path / "d.json"
    f.write_text(json.dumps({**d, "sweeps": [{**sw, "rows": rows}], "configs": [], "baselines": []}))
    _one_line_exit_2(run_cli, "validate", str(f), field=field)


def test_a_json_file_of_millions_of_values_is_refused_before_it_is_parsed(run_cli, tmp_path):
    """A 40 MB list of 20M empty objects passes the size cap; parsed, it took gigabytes."""
    f = tmp_path / "many.json"
    f.write_text("[" + ",".join(["{}"] * 5_000_000) + "]")
    _one_line_exit_2(run_cli, "predict", "--scenario", str(f), field="JSON values")
    _one_line_exit_2(run_cli, "predict", "--profile", str(f), field="values")


def test_a_text_field_of_millions_of_characters_is_refused(run_cli, tmp_path):
    """A 10M-character scenario name made the text renderer's line wrapping run for minutes."""
    d = json.loads((ROOT / "calibration" / "scenarios" / "kimi-k2.5-seed.json").read_text())
    d["name"] = "x" * 100_001
    f = tmp_path / "s.json"
    f.write_text(json.dumps(d))
    _one_line_exit_2(run_cli, "predict", "--scenario", str(f), field="name")


@pytest.mark.parametrize("path", [("gpu", "mem_efficiency"), ("gpu", "hbm_bytes_per_s"), ("engine", "attention_mem_efficiency"),
                                  ("parallel", "allreduce", "bus_bytes_per_s")])
def test_a_denormal_rate_is_refused_naming_its_field(run_cli, tmp_path, path):
    """1e-320 is > 0 and passed the schema, then divided by zero deep in the model (an error naming no field)."""
    d = json.loads((ROOT / "calibration" / "scenarios" / "kimi-k2.5-seed.json").read_text())
    o = d
    for k in path[:-1]:
        o = o[k]
    o[path[-1]] = 1e-320
    f = tmp_path / "s.json"
    f.write_text(json.dumps(d))
    _one_line_exit_2(run_cli, "predict", "--scenario", str(f), field=".".join(path))


def test_impossible_bench_speculative_records_are_skipped_and_counted(run_cli, tmp_path):
    good = {"batch_size": 1, "steps": 2, "topk": 1, "num_draft_tokens": 3, "acc_length": 2.1, "step_time": 0.0222, "speed": 94}
    bad = [{**good, "acc_length": 1e308}, {**good, "acc_length": 4.0}, {**good, "steps": 2000}, {**good, "step_time": 1e300},
           {**good, "speed": 1e308}]
    f = tmp_path / "b.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in [*bad, good]) + "\n")
    code, out, err = run_cli("ingest", str(f), "--json")
    assert code == 0, err
    d = json.loads(out)
    assert len(d["bench"]) == 1 and d["lines_skipped"] == 5 and d["bench"][0]["accept_length"] == 2.1, d


@pytest.mark.parametrize("block,value,field", [
    ("calibration", {"parameters": {"x": 1}, "cov_log": [[1]]}, "calibration.parameters.x"),
    ("calibration", {"parameters": {"x": {"value": 1.0}}, "cov_log": [[1.0]]}, "calibration.parameters"),
    ("calibration", {"parameters": {"kernel_floor_us": {"value": 3.0}}, "cov_log": "garbage"}, "calibration.cov_log"),
    ("calibration", {"parameters": {"kernel_floor_us": {"value": 3.0}}, "cov_log": [[1.0, 0.0]]}, "calibration.cov_log"),
    ("calibration", {"points": "abc"}, "calibration.points"),
    ("calibration", {"points": [{"tokens": 0, "ms": 3.0}]}, "calibration.points[0].tokens"),
    ("calibration", {"residuals": [{"kind": "verify"}]}, "calibration.residuals[0]"),
    ("calibration", {"residuals": 3}, "calibration.residuals"),
    ("provenance", {"assumptions": 7}, "provenance.assumptions"),
    ("provenance", {"assumptions": ["ok", 3]}, "provenance.assumptions[1]"),
    ("provenance", {"fit_checks": 3}, "provenance.fit_checks"),
    ("provenance", {"fitted_parameters": "x"}, "provenance.fitted_parameters"),
    ("provenance", {"fitted_parameters": {"a": 5}}, "provenance.fitted_parameters.a"),
    ("provenance", {"verify_points": [{"tokens": 3}]}, "provenance.verify_points[0].ms"),
])
@pytest.mark.parametrize("cmd", [("verify", "--tokens", "3"), ("scenario", "show"), ("report", "-o")])
def test_a_malformed_calibration_or_provenance_block_is_one_line_everywhere(run_cli, tmp_path, block, value, field, cmd):
    """The blocks `calibrate` writes and the reports read: a wrong shape there gave KeyError / TypeError /
    AttributeError tracebacks in verify, scenario show and report (and was silently ignored by predict)."""
    if cmd[0] == "scenario" and field == "calibration.parameters":
        pytest.skip("an unknown parameter name is refused where the band uses it; scenario show only lists it")
    d = json.loads((ROOT / "calibration" / "scenarios" / "kimi-k2.5-seed.json").read_text())
    d[block] = value
    f = tmp_path / "s.json"
    f.write_text(json.dumps(d))
    out = tmp_path / "r.html"
    argv = {"verify": [*cmd, "-s", str(f)], "scenario": [*cmd, str(f)], "report": ["report", "-s", str(f), "-o", str(out)]}
    line = _one_line_exit_2(run_cli, *argv[cmd[0]], field=field)
    assert not out.exists(), line


def test_a_calibrated_scenario_still_loads_and_keeps_its_band(run_cli, run_json, tmp_path):
    """The positive side of the check above: what `calibrate` writes passes it, and verify shows the band."""
    out = tmp_path / "cal.json"
    code, _, err = run_cli("calibrate", "--model", "kimi-k2.5", "--gpu", "h200", "--tp", "8", "--eager",
                           "--point", "3=25.6", "--point", "6=28.7", "--out", str(out))
    assert code == 0 and out.exists(), err
    d = run_json("verify", "-s", str(out), "--tokens", "3,6", "--json")
    assert d["verify_ms_low"][0] < d["verify_ms"][0] < d["verify_ms_high"][0]


def test_a_sample_count_below_one_is_refused_and_far_extrapolation_is_flagged(run_cli):
    """Half a training sample gave an accept length of 7.8 and exit 0; a what-if far outside the fitted
    37K-1.4M samples now says that it extrapolates (and within them says nothing)."""
    code, _, err = run_cli("whatif", "training", "--current-samples", "0.0001", "--target-samples", "5")
    assert code == 2 and err.count("\n") == 1 and "current-samples" in err and "[1, " in err
    code, _, err = run_cli("whatif", "training", "--current-samples", "1", "--target-samples", "37K")
    assert code == 0 and "warning: current samples 1 lie beyond the fitted data" in err
    code, _, err = run_cli("whatif", "training", "--target-samples", "1.4M")
    assert code == 0 and "warning" not in err


@pytest.mark.parametrize("text", ["evil\x1b[31mred", "right\u202eto left", "nul\x00", "bell\x07"])
@pytest.mark.parametrize("where", [("name",), ("description",), ("target", "name"), ("draft", "sources")])
def test_control_characters_in_scenario_text_are_refused(run_cli, tmp_path, text, where):
    """An ANSI escape or a bidi override in a scenario's name reached the terminal raw (coloured the output)."""
    d = json.loads((ROOT / "calibration" / "scenarios" / "kimi-k2.5-seed.json").read_text())
    if where == ("draft", "sources"):
        d["draft"]["sources"] = {"name": text}
    elif len(where) == 2:
        d[where[0]][where[1]] = text
    else:
        d[where[0]] = text
    f = tmp_path / "s.json"
    f.write_text(json.dumps(d))
    line = _one_line_exit_2(run_cli, "predict", "-s", str(f), field=where[-1])
    assert "control characters" in line
    d = json.loads((ROOT / "calibration" / "scenarios" / "kimi-k2.5-seed.json").read_text())
    d["description"] = "two\nlines\tand a tab are text"
    f.write_text(json.dumps(d))
    assert run_cli("predict", "-s", str(f))[0] == 0


def test_the_title_names_the_dtype_that_is_modeled(run_json):
    """--dtype int4 on a dense model was modeled as int4 under a title that said bf16."""
    for dtype, tag in (("int4", "(int4)"), ("fp8", "(fp8)")):
        d = run_json("predict", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--dtype", dtype)
        assert d["model"].endswith(tag) and "bf16" not in d["model"], d["model"]
    d = run_json("predict", "--model", "qwen3-30b-a3b", "--gpu", "h200", "--tp", "1", "--dtype", "int4")
    assert d["model"] == "Qwen3-30B-A3B (INT4 routed experts)"


def test_a_log_of_blank_lines_is_counted_in_bulk_and_a_huge_log_is_refused_before_reading(tmp_path, monkeypatch):
    """20M blank lines took 6.4 s line by line (0.3 s in bulk, same counts); a log past MAX_LOG_BYTES is one
    line before any byte is read (a 20 GB sparse file ran for minutes)."""
    from specsim.io import safe_read
    from specsim.io.ingest import IngestError, ingest_files

    f = tmp_path / "mixed.log"
    dec = ("[2025-07-01 10:00:00 TP0] Decode batch. #running-req: 1, #token: 1234, token usage: 0.01, accept len: "
           "2.10, cuda graph: True, gen throughput (token/s): 94.00, #queue-req: 0\n")
    f.write_text(("\n" * 5000 + "INFO unrelated\n" + dec + "{not json\n") * 20)
    res = ingest_files([str(f)], allow_empty=True)
    assert res.lines_total == 20 * 5003 and res.lines_skipped == 20 and res.formats.get("sglang_decode") == 20
    assert res.lines_ignored == 20 * 5001
    monkeypatch.setattr(safe_read, "MAX_LOG_BYTES", 1000)
    with pytest.raises(IngestError, match="files up to"):
        ingest_files([str(f)], allow_empty=True)


def test_a_sweep_ranks_configurations_that_do_not_fit_in_memory_last_and_says_so(run_json):
    """`sweep --ctx 100000000` ranked a batch-64 row best with no word that its KV cache needs petabytes."""
    import specsim.analysis.sweep as sw
    from specsim.analysis.build import build_scenario
    from specsim.analysis.predict import kv_bytes_per_rank

    res = sw.sweep(None, batch=[1, 64, 512], ctx=[2048, 2_000_000])  # 2M tokens: more than the KV pool holds
    fits = res.columns["fits_memory"]
    assert fits.any() and not fits.all()
    assert all(r["fits_memory"] for r in res.ranked(int(fits.sum())))  # every fitting row ranks first
    assert res.best["fits_memory"] and any("do not fit in GPU memory" in n for n in res.notes)
    # the same rule as predict's warning, row by row
    for r in res.ranked(res.n):
        sc = build_scenario(None, batch=r["batch"], ctx=r["ctx"])
        warned = any("this workload does not fit" in w or "leaves room" in w for w in __import__(
            "specsim.analysis.predict", fromlist=["scenario_warnings"]).scenario_warnings(sc))
        assert warned == (not r["fits_memory"]), (r, kv_bytes_per_rank(sc))
    d = run_json("sweep", "--batch", "1,64", "--ctx", "100000000")
    assert not d["best"]["fits_memory"] and any("none fits" in n for n in d["notes"])


def test_the_help_lists_every_gpu_and_engine_preset(run_cli):
    """The --gpu and --engine help named 5 GPUs and 4 engines while rtx3090, vllm-v0 and torch-graph were taken."""
    import specsim.cli as cli
    from specsim.io.presets import data_root

    for opt, file in ((cli.GpuOpt, "gpus.json"), (cli.EngineOpt, "engines.json")):
        names = [k for k in json.loads(data_root("models").joinpath(file).read_text()) if not k.startswith("_")]
        assert all(n in opt.help for n in names), (opt.help, names)


def test_validate_refuses_a_fit_token_count_the_dataset_lacks(run_cli):
    """--fit 3,6,999999 fitted on 3 and 6 and dropped 999999 without a word."""
    code, _, err = run_cli("validate", "kimi-k2.5-seed", "--fit", "3,6,999999")
    assert code == 2 and err.count("\n") == 1 and "999999" in err and "available: [3, 6]" in err


def test_a_profile_from_another_gpu_is_flagged(run_cli):
    """--profile h200 on an H100 applied H200 fits silently."""
    code, out, err = run_cli("predict", "--profile", "h200", "--gpu", "h100")
    assert code == 0 and "measured on NVIDIA H200, not on this scenario's H100" in " ".join((out + err).split())
    code, out, err = run_cli("predict", "--profile", "h200")
    assert code == 0 and "measured on" not in out + err


def test_a_config_json_with_gaps_says_what_it_assumed(run_cli, tmp_path):
    """A config.json without intermediate_size or num_key_value_heads, or with a quantization the model does not
    read, was modeled on defaults without a word; each assumption is now a warning (and none for real configs)."""
    cfg = dict(LLAMA_CFG)
    cfg.pop("intermediate_size")
    cfg.pop("num_key_value_heads")
    cfg["quantization_config"] = {"quant_method": "bogus"}
    (tmp_path / "m").mkdir()
    f = tmp_path / "m" / "config.json"
    f.write_text(json.dumps(cfg))
    code, out, err = run_cli("predict", "--model", str(f), "--gpu", "h100", "--tp", "1")
    text = " ".join((out + err).split())
    assert code == 0
    for what in ("no num_key_value_heads", "no intermediate_size; taken as 4 x hidden_size (16384)",
                 "quant_method 'bogus'"):
        assert what in text, what
    code, out, err = run_cli("predict", "--model", str(HF / "llama-3.1-8b-instruct" / "config.json"), "--gpu", "h100",
                             "--tp", "1")
    assert code == 0 and "assumed: config.json" not in out + err


@pytest.mark.parametrize("patch", [
    lambda d: d["provenance"].update(assumptions=["\x1b[31mRED \u202eevil"]),
    lambda d: d["provenance"].update(measured={"tok_s \x1b[2J": "x"}),
    lambda d: d["engine"].update(model_kernels={"X\x1b[2JEvil": {}}),
])
def test_control_characters_nested_in_free_form_blocks_and_keys_are_refused(run_cli, tmp_path, patch):
    """The first check looked one level deep: nested provenance text and model_kernels keys reached the terminal."""
    d = json.loads((ROOT / "calibration" / "scenarios" / "kimi-k2.5-seed.json").read_text())
    patch(d)
    f = tmp_path / "s.json"
    f.write_text(json.dumps(d))
    code, out, err = run_cli("scenario", "show", str(f))
    assert code == 2 and "control characters" in err and "\x1b" not in out + err and "\u202e" not in out + err


def test_the_baseline_the_kv_pool_cannot_hold_runs_what_it_holds_and_says_so(run_json):
    """At batch 256 SGLang runs 48 requests with speculation but all 256 without: a 137 GB KV cache on 80 GB. The
    engine's pool (~415K tokens on one H100 for Llama-3.1-8B) holds ~100 at ctx 4096: the rest queue, and the
    baseline's tok/s is that of the requests it holds, not of 256 that cannot run."""
    d = run_json("predict", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--batch", "256", "--ctx", "4096")
    held = d["baseline_running_requests"]
    assert 90 <= held <= 110 and d["running_requests"] == 48, (held, d["running_requests"])
    assert any(f"{held} at once without (the pool)" in w for w in d["warnings"]), d["warnings"]
    assert any(f"plain decode runs {held} (what its KV pool holds)" in w for w in d["warnings"]), d["warnings"]
    at_held = run_json("predict", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--batch", str(held),
                       "--ctx", "4096")
    assert at_held["baseline_tok_s"] == pytest.approx(d["baseline_tok_s"], rel=1e-9)
    d = run_json("predict", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--batch", "32", "--ctx", "4096")
    assert not any("does not fit" in w or "KV-cache pool" in w for w in d["warnings"])


def test_whatif_quant_names_the_dtype_it_models(run_json):
    d = run_json("whatif", "quant", "--model", "llama-3.1-70b", "--gpu", "h100", "--tp", "4", "--dtype", "fp8")
    assert d["before"]["model"].endswith("(bf16)") and d["after"]["model"].endswith("(fp8)")
    d = run_json("predict", "--model", "kimi-k2", "--gpu", "h200", "--tp", "8", "--dtype", "bf16")
    assert d["model"].endswith("(bf16)") and d["model"].count("(") == 1, d["model"]


@pytest.mark.parametrize("measured,scenario_gpu,preset,same", [
    ("NVIDIA H200", "H200 SXM 141GB", "h200", True), ("NVIDIA GeForce RTX 3090", "GeForce RTX 3090 24GB", "rtx3090", True),
    ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB", "h100", True), ("NVIDIA H100 PCIe", "H100 SXM5 80GB", "h100", False),
    ("NVIDIA H200", "H20 96GB", "h20", False), ("NVIDIA H20", "H20 96GB", "h20", True),
    ("NVIDIA A100-SXM4-80GB", "H100 SXM5 80GB", "h100", False), ("Some New GPU", "Custom", None, True),
])
def test_the_profile_gpu_check_reads_torch_device_names(measured, scenario_gpu, preset, same):
    from specsim.analysis.profile_fit import _same_gpu

    assert _same_gpu(measured, scenario_gpu, preset) is same


def test_a_csv_to_a_reader_that_stops_early_exits_quietly(tmp_path):
    """`sweep --csv - | head -1` exited 1 (broken pipe) once the CSV was written in pieces."""
    r = subprocess.run(f"{sys.executable} -m specsim sweep --steps 1-10 --batch 1-400 --ctx 1000-1100 --csv - | head -1",
                       shell=True, capture_output=True, text=True, executable="/bin/bash",
                       env={**os.environ, "SHELLOPTS": "pipefail"}, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("steps,topk") and "Traceback" not in r.stderr, r.stderr


def test_training_samples_below_one_are_refused_in_data_and_scenarios(run_cli, tmp_path):
    code, _, err = run_cli("whatif", "training", "--data", "0.5=2.0", "--target-samples", "1M")
    assert code == 2 and "in [1, 1e13]" in err
    d = json.loads((ROOT / "calibration" / "scenarios" / "kimi-k2.5-seed.json").read_text())
    d["draft"]["training_samples"] = 0.5
    f = tmp_path / "s.json"
    f.write_text(json.dumps(d))
    code, _, err = run_cli("predict", "-s", str(f))
    assert code == 2 and "training_samples" in err


@pytest.mark.parametrize("args,field", [(("--gpu", "h100,h100"), "gpu"), (("--batch", "1,2,1"), "batch"),
                                        (("--accept", "2.0,2.0"), "accept"), (("--steps", "1-3,2"), "steps")])
def test_a_sweep_value_given_twice_is_refused(run_cli, args, field):
    """`sweep --gpu h100,h100,h100` gave three identical rows for each configuration."""
    _one_line_exit_2(run_cli, "sweep", *args, field=field)


# --- review of 2026-12-03 (a hostile-input pass over every command) ---------------------------------------------

@pytest.mark.parametrize("fmt", [(), ("--format", "md"), ("--json",)])
@pytest.mark.parametrize("bad", [[1], {"a": 1}, 7, True])
def test_a_sweep_whose_id_is_not_text_is_one_line(run_cli, tmp_path, fmt, bad):
    """A sweep id of [1] gave an AttributeError traceback in the text and Markdown tables (after 6 s of output)."""
    d = json.loads((ROOT / "calibration" / "datasets" / "published_batch_sweeps.json").read_text())
    d["sweeps"][0]["id"] = bad
    f = tmp_path / "d.json"
    f.write_text(json.dumps(d))
    _one_line_exit_2(run_cli, "validate", str(f), *fmt, field="dataset.sweeps.0.id")


@pytest.mark.parametrize("args,field", [(("--max-mape", "-1"), "max-mape"), (("--fit", "abc"), "fit"),
                                        (("--fit", "3,6"), "fit")])
def test_validate_flags_a_sweeps_dataset_cannot_take_are_refused(run_cli, args, field):
    """--max-mape -1 exited 1 after scoring, and --fit was silently ignored, on a sweeps dataset."""
    line = _one_line_exit_2(run_cli, "validate", "published_batch_sweeps", *args, field=field)
    assert field != "fit" or "sweeps dataset" in line


def test_an_output_that_is_also_an_input_is_refused_and_left_alone(run_cli, tmp_path):
    """sweep --csv, report --out, scenario dump -o and calibrate --out replaced the scenario, profile or log they read."""
    scen = tmp_path / "s.json"
    assert run_cli("scenario", "dump", "-o", str(scen))[0] == 0
    prof = tmp_path / "p.json"
    prof.write_bytes((ROOT / "models" / "profiles" / "h200.json").read_bytes())
    log = tmp_path / "srv.log"
    log.write_text("not a log line\n")
    before = {f: f.read_bytes() for f in (scen, prof, log)}
    same = str(tmp_path / "." / "s.json")  # the same file by another name
    for args in (("sweep", "-s", str(scen), "--steps", "1-3", "--csv", same),
                 ("report", "-s", str(scen), "--out", str(scen), "--format", "html"),
                 ("scenario", "dump", str(scen), "-o", same),
                 ("sweep", "--profile", str(prof), "--csv", str(prof)),
                 ("calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--from-log", str(log),
                  "--out", str(log)),
                 ("calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--point", "4=7.6",
                  "--profile", str(prof), "--out", str(prof))):
        line = _one_line_exit_2(run_cli, *args, field="out")
        assert "also an input" in line
    assert {f: f.read_bytes() for f in before} == before
    assert run_cli("sweep", "-s", str(scen), "--steps", "1-3", "--csv", str(tmp_path / "o.csv"))[0] == 0


def _profile_with(tmp_path, edit):
    d = json.loads((ROOT / "models" / "profiles" / "h200.json").read_text())
    edit(d)
    f = tmp_path / "p.json"
    f.write_text(json.dumps(d))
    return f


@pytest.mark.parametrize("edit,field", [
    (lambda d: d["topk"]["points"][0].__setitem__("vocab", 1e308), "topk.points[0].vocab"),
    (lambda d: d["topk"]["points"][0].__setitem__("rows", 1e30), "topk.points[0].rows"),
    (lambda d: [p.__setitem__("us", 1e-300) for p in d["topk"]["points"]], "topk.points[0].us"),
    (lambda d: d["gemm"]["curves"][0]["points"][0].__setitem__("us", 1e-300), "gemm.curves[0].points[0].us"),
    (lambda d: [p.__setitem__("us", 9e6) for p in d["topk"]["points"]], "vocab_topk_fixed_us"),
])
def test_a_profile_with_unphysical_points_is_one_line_before_any_fit(run_cli, tmp_path, edit, field):
    """vocab = 1e308 printed LAPACK's 'DLASCL parameter number 4' on stdout, then 'SVD did not converge'; a top-k
    time of 9 s named the scenario's gpu field. measure check passed the file predict refused."""
    f = _profile_with(tmp_path, edit)
    code, out, err = run_cli("predict", "--profile", str(f))
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and out == "" and len(lines) == 1 and field in lines[0], (out, err)
    if field.startswith(("topk.", "gemm.")):
        _one_line_exit_2(run_cli, "measure", "check", str(f), field=field)


def test_a_profile_path_with_a_line_break_stays_one_line(run_cli, tmp_path):
    line = _one_line_exit_2(run_cli, "measure", "check", str(tmp_path / "no\nsuch.json"), field="measure")
    assert "\\n" in line


def test_training_data_points_are_bounded(run_cli):
    args = [a for i in range(201) for a in ("--data", f"{(i + 1) * 1000}=2.1")]
    _one_line_exit_2(run_cli, "whatif", "training", *args, field="data")


def test_measured_rates_of_0_and_1_carry_to_an_accept_length_shape(run_cli, tmp_path):
    """--accept-rates 1,1 (valid rates) failed explain and report with 'scenario: acceptance: shape_rates ...':
    the profile they carry as the shape of an accept length must lie inside (0, 1)."""
    for args in (("explain", "--accept-rates", "1,1"), ("explain", "--accept-rates", "0.9,0"),
                 ("report", "--accept-rates", "1,1", "--out", str(tmp_path / "r.md"))):
        code, _, err = run_cli(*args)
        assert code == 0, err


def test_an_allreduce_scale_past_the_schema_names_the_flag(run_cli):
    line = _one_line_exit_2(run_cli, "whatif", "allreduce", "--scale", "1e308", field="scale")
    assert "scenario:" not in line


@pytest.mark.parametrize("args,field", [
    (("scenario", "dump", "-o", ""), "out"), (("sweep", "--steps", "1-3", "--csv", ""), "out"),
    (("calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--point", "4=7.6", "--out", ""), "out"),
    (("validate", ""), "dataset"), (("ingest", ""), "file"),
])
def test_an_empty_path_is_named_as_given(run_cli, args, field):
    """An empty --out, --csv, dataset or log name was reported as the directory '.' (typer turned '' into Path('.'))."""
    line = _one_line_exit_2(run_cli, *args, field=field)
    assert "got ''" in line and "'.'" not in line


@pytest.mark.parametrize("flag", ["--steps", "--topk", "--draft-tokens", "--tp", "--batch", "--ctx"])
def test_an_empty_sweep_list_is_refused_like_any_other_list(run_cli, flag):
    """sweep --steps '' was taken as the default; verify --tokens '' was already an error."""
    _one_line_exit_2(run_cli, "sweep", flag, "", field=flag.lstrip("-"))


@pytest.mark.parametrize("args,field", [(("sweep", "--steps", "1-3", "--csv", "-", "--json"), "csv"),
                                        (("predict", "--format", "md", "--json"), "format"),
                                        (("sweep", "--steps", "1-3", "--format=markdown", "--json"), "format")])
def test_two_flags_that_both_choose_standard_output_are_refused(run_cli, args, field):
    _one_line_exit_2(run_cli, *args, field=field)


def test_a_json_integer_of_5000_digits_is_said_as_such(run_cli, tmp_path):
    d = json.loads((ROOT / "calibration" / "scenarios" / "kimi-k2.5-seed.json").read_text())
    text = json.dumps(d).replace('"batch": 1', '"batch": ' + "9" * 5000, 1)
    f = tmp_path / "s.json"
    f.write_text(text)
    line = _one_line_exit_2(run_cli, "predict", "-s", str(f), field="scenario")
    assert "4300 digits" in line and "set_int_max_str_digits" not in line


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_on_standard_output_is_one_line():
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "specsim", "predict"], stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=120)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "output: cannot write" in lines[0], r.stderr


def test_an_output_named_like_a_builtin_it_reads_is_not_an_input(run_cli, tmp_path, monkeypatch):
    """The loader reads a built-in scenario or model preset by name, not a file of that name beside it: running
    `scenario dump kimi-k2.5-seed -o kimi-k2.5-seed` a second time was refused as writing over its input."""
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert run_cli("scenario", "dump", "kimi-k2.5-seed", "-o", "kimi-k2.5-seed")[0] == 0
        assert run_cli("calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--point", "4=7.6",
                       "-o", "llama-3.1-8b")[0] == 0
    _one_line_exit_2(run_cli, "scenario", "dump", "./kimi-k2.5-seed", "-o", "kimi-k2.5-seed", field="out")


@pytest.mark.parametrize("rates", ["1,1,1", "1,0.5,0", "1,0.7,0.4", "0,0,0"])
@pytest.mark.parametrize("tau", [1.05, 1.5, 2.5, 3.9])
@pytest.mark.parametrize("topk", [1, 2])
def test_a_measured_profile_with_rates_of_0_or_1_scales_to_any_accept_length(run_cli, tmp_path, rates, tau, topk):
    """A profile carried as the shape of --accept must reach that accept length: with rates of exactly 1 kept at
    1 - 1e-6 and log theta capped at 12, --accept 1.5 gave rates of 0.85 (an accept length of 3.19)."""
    from specsim.analysis.build import build_scenario
    from specsim.physics.acceptance import expected_accept_length, rates_for, tree_accept_length

    f = tmp_path / "s.json"
    assert run_cli("scenario", "dump", "--accept-rates", rates, "--steps", "3", "-o", str(f))[0] == 0
    tree = {"topk": 2, "draft_tokens": 6} if topk > 1 else {}
    sc = build_scenario(str(f), accept=tau, **tree)
    r = rates_for(sc)
    s = sc.speculation
    assert expected_accept_length(sc) == tau
    assert float(tree_accept_length(r, s.steps, s.topk, s.num_draft_tokens)) == pytest.approx(tau, abs=1e-6)


def test_an_empty_profile_name_is_named(run_cli):
    line = _one_line_exit_2(run_cli, "predict", "--profile", "", field="profile")
    assert "empty" in line


def test_a_profile_of_another_gpu_that_fits_out_of_range_says_so(run_cli):
    line = _one_line_exit_2(run_cli, "predict", "--gpu", "a100", "--profile", "h200", field="profile")
    assert "measured on NVIDIA H200" in line and "--gpu" in line


@pytest.mark.parametrize("args", [("report", "--format", "html", "--json", "--out", "r.html"),
                                  ("calibrate", "--json", "--format", "md")])
def test_json_and_format_on_a_command_without_one_of_them_is_clicks_no_such_option(run_cli, args):
    _one_line_exit_2(run_cli, *args, field="No such option")


def test_a_key_given_twice_in_a_json_object_is_refused(run_cli, tmp_path):
    """A hand-edited scenario with two "batch" keys ran silently at the last one; a profile likewise."""
    text = (ROOT / "calibration" / "scenarios" / "kimi-k2.5-seed.json").read_text()
    f = tmp_path / "s.json"
    f.write_text(text.replace('"batch": 1,', '"batch": 1, "batch": 64,', 1))
    assert f.read_text() != text
    line = _one_line_exit_2(run_cli, "predict", "-s", str(f), field="scenario")
    assert "'batch' appears twice" in line
    prof = (ROOT / "models" / "profiles" / "h200.json").read_text()
    g = tmp_path / "p.json"
    g.write_text(prof.replace('"schema":', '"schema": 1, "schema":', 1))
    for args in (("predict", "--profile", str(g)), ("measure", "check", str(g))):
        assert "'schema' appears twice" in _one_line_exit_2(run_cli, *args, field=args[0] if args[0] == "measure" else "profile")


@pytest.mark.parametrize("argv", [
    ["calibrate", "--model", "kimi-k2.5", "--gpu", "h200", "--tp", "8", "--graph", "--eager", "--point", "3=25.6"],
    ["whatif", "graph", "--phase", "verify", "--on", "--off"],
    ["whatif", "overlap", "--off", "--on"],
])
def test_both_flags_of_one_option_are_refused(run_cli, argv):
    """Click would take the last of ``--graph --eager`` silently; specsim names the pair and exits 2."""
    code, out, err = run_cli(*argv)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and not out and len(lines) == 1 and "give one of the two" in lines[0]


def test_flag_pairs_are_read_per_command():
    from specsim.cli import _refuse_opposite_flags

    _refuse_opposite_flags(["measure", "forward", "--graph", "--eager", "8x4@2048"])  # not calibrate's pair
    _refuse_opposite_flags(["predict", "--on", "--off"])  # predict has no --on/--off: click says so
    _refuse_opposite_flags(["whatif", "graph", "--on", "--off", "--help"])  # help wins
    with pytest.raises(SpecsimError, match="--on/--off"):
        _refuse_opposite_flags(["whatif", "overlap", "--on", "--off"])


def test_a_flag_pair_is_read_as_click_reads_the_words(run_cli, tmp_path, monkeypatch):
    """``--help`` (or a flag) given as another option's value is that option's value: help is not shown, so the pair
    is still refused and nothing is written; a pair word given as a value is no flag."""
    from specsim.cli import _refuse_opposite_flags

    monkeypatch.chdir(tmp_path)
    for argv in (["scenario", "dump", "--stop-strings", "--no-stop-strings", "-o", "--help"],
                 ["sweep", "--steps", "1-3", "--stop-strings", "--no-stop-strings", "--csv", "--help"]):
        code, out, err = run_cli(*argv)
        lines = [x for x in err.splitlines() if x.strip()]
        assert code == 2 and len(lines) == 1 and "give one of the two" in lines[0], (argv, err)
    assert not list(tmp_path.iterdir())
    _refuse_opposite_flags(["calibrate", "--graph", "--out", "--eager"])  # a file named --eager: one flag given
    _refuse_opposite_flags(["calibrate", "--graph", "--", "--eager"])  # after --, words are arguments


def test_the_work_of_a_sweeps_dataset_is_bounded_by_its_cost(run_cli, tmp_path):
    """Rows are counted by what scoring them costs: deep wide trees, TP candidates and cap readings multiply it."""
    pair = {"model": "llama-3.1-8b", "gpu": "h100", "tp": 1, "engine": "sglang", "steps": 64, "topk": 64,
            "num_draft_tokens": 4096, "batch": 1, "accept_length": 10, "v1_tok_s": 100, "v2_tok_s": 110}
    row = {"benchmark": "b", "batch": 1, "steps": 3, "topk": 1, "num_draft_tokens": 4, "accept_length": 2.5,
           "baseline_tok_s": 100.0, "spec_tok_s": 200.0}
    group = {"model": "llama-3.1-8b", "gpu": "h100", "engine": "sglang", "tp_candidates": [1, 2, 4, 8],
             "rows": [row] * 6000}
    sweep = {"model": "llama-3.1-8b", "gpu": "h100", "tp": 1, "engine": "sglang", "steps": 64, "topk": 64,
             "num_draft_tokens": 4096, "rows": [{"batch": 1, "speedup": 0.5}, {"batch": 2, "speedup": 0.5}]}
    for body in ({"overlap_gains": [pair] * 50}, {"configs": [group]}, {"sweeps": [sweep] * 37}):
        f = tmp_path / "d.json"
        f.write_text(json.dumps({"kind": "throughput_sweeps", **body}))
        code, out, err = run_cli("validate", str(f))
        assert code == 2 and not out and "units of work" in err and len(err.strip().splitlines()) == 1, err


def test_calibrate_bounds_its_points_and_logs(run_cli, tmp_path, monkeypatch):
    """Points are residuals of every fit iteration: 40,000 took 100 s; a log given twice would count twice."""
    monkeypatch.chdir(tmp_path)
    base = ["calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "-o", "out.json"]
    pts = [w for i in range(10_001) for w in ("--point", f"{1 + i % 64}=7.6")]
    assert "10,000" in _one_line_exit_2(run_cli, *base, *pts, field="point")
    log = tmp_path / "a.jsonl"
    log.write_text("{}\n")
    _one_line_exit_2(run_cli, *base, "--from-log", str(log), "--from-log", "./a.jsonl", field="from-log")
    assert "baseline-tok-s" in _one_line_exit_2(run_cli, *base, "--point", "4=7.6", "--baseline-tok-s", "1e300",
                                                field="baseline-tok-s")
    d = tmp_path / "kb.json"  # the same measurement in a dataset is named by its field, not by calibrate's flag
    d.write_text(json.dumps({"model": "llama-3.1-8b", "gpu": "h100", "tp": 1, "baseline_tok_s": 1e8,
                             "points": [{"tokens": 3, "ms": 7.0}, {"tokens": 6, "ms": 7.5}]}))
    _one_line_exit_2(run_cli, "validate", str(d), field="dataset.baseline_tok_s")
    assert not (tmp_path / "out.json").exists()


def test_a_range_is_refused_with_its_own_count(run_cli):
    line = _one_line_exit_2(run_cli, "sweep", "--accept", "1:2:0.00001", field="accept")
    assert "100,001 values" in line


def test_names_from_user_files_stay_in_their_cell(run_json, run_cli, tmp_path):
    """A name with a newline, NUL, escape sequence or bidi override is printed escaped wherever it is shown: a
    table cell, a table title, a not-scored line (a scored pair, a configs group, a skipped pair and sweep)."""
    evil = "\u202e\x1b[31mevil\nline\x00"
    row = {"id": evil, "model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "engine": "sglang", "steps": 3, "topk": 1,
           "batch": 1, "accept_length": 2.5, "v1_tok_s": 200.0, "v2_tok_s": 220.0}
    cfg = {"benchmark": "b", "batch": 1, "steps": 3, "topk": 1, "num_draft_tokens": 4, "accept_length": 2.5,
           "baseline_tok_s": 100.0, "spec_tok_s": 200.0}
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"kind": "throughput_sweeps", "overlap_gains": [row, {**row, "model": evil}],
                             "configs": [{"id": evil, "model": "llama-3.1-8b", "gpu": "h200", "tp": 1,
                                          "engine": "sglang", "rows": [cfg]},
                                         {"id": evil, "model": evil, "gpu": "h200", "tp": 1, "engine": "sglang",
                                          "rows": [cfg]}],
                             "sweeps": [{"id": evil, "model": "llama-3.1-8b", "gpu": "h200", "engine": "sglang",
                                         "rows": [{"batch": 1, "speedup": 1.5}]}]}))
    for fmt in ("text", "md"):
        code, out, _ = run_cli("validate", str(f), "--format", fmt)
        assert code == 0 and "\x00" not in out and "\x1b" not in out and "\u202e" not in out, out
        assert not any(x.startswith("line") for x in out.splitlines()), out  # no name broke its line
        assert sum("evil\\nline\\x00" in x for x in out.splitlines()) >= (4 if fmt == "text" else 3), out
    assert run_json("validate", str(f))["overlap_gains"][0]["id"] == evil  # JSON keeps the data as it is


def test_a_published_throughput_is_a_physical_one(run_cli, tmp_path):
    """tok/s below 1e-3 made the v2/v1 gain overflow to inf (shown as null with error -100 %)."""
    row = {"model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "engine": "sglang", "steps": 3, "topk": 1, "batch": 1,
           "accept_length": 2.5, "v1_tok_s": 1e-300, "v2_tok_s": 1e9}
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"kind": "throughput_sweeps", "overlap_gains": [row]}))
    _one_line_exit_2(run_cli, "validate", str(f), field="overlap_gains.0.v1_tok_s")


def test_accept_rates_past_the_steps_are_said(run_cli):
    code, out, err = run_cli("predict", "--steps", "2", "--accept-rates", "0.5,0.5,0.5,0.5,0.5")
    assert code == 0 and "5 rates given for 2 draft steps" in " ".join((out + err).split())
    code, out, err = run_cli("predict", "--steps", "2", "--accept-rates", "0.5,0.5")
    assert code == 0 and "rates given" not in out + err


def test_out_of_range_log_values_are_skipped_and_counted(tmp_path):
    """A bench record faster than any forward, or server arguments no engine takes, are corrupt lines."""
    from specsim.io.ingest import ingest_files

    rec = {"batch_size": 1, "steps": 2, "topk": 1, "num_draft_tokens": 3, "acc_length": 2.5, "speed": 300}
    bench = tmp_path / "b.jsonl"
    bench.write_text("\n".join(json.dumps({**rec, "step_time": t}) for t in (1e-320, 0.0, 0.0125)) + "\n")
    res = ingest_files([str(bench)])
    assert res.lines_skipped == 2 and res.formats == {"bench_speculative": 1}
    log = (ROOT / "examples" / "sglang_server.log").read_text()
    clean = ingest_files([str(ROOT / "examples" / "sglang_server.log")])
    for bad in ("speculative_num_steps=-3", "speculative_num_steps=100000000000000000000", "speculative_eagle_topk=0"):
        key = bad.split("=")[0]
        assert key + "=" in log
        f = tmp_path / "l.log"
        f.write_text(re.sub(key + r"=[0-9]+", bad, log))
        res = ingest_files([str(f)])
        assert res.lines_skipped == clean.lines_skipped + 1, bad
        assert res.formats == clean.formats
