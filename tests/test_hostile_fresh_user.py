"""What a new user typed and got wrong: each test is one defect they hit, through the CLI.

Bad input must give one stderr line ``error: FIELD: got VALUE; allowed ...``, exit 2, no traceback and no file
written; the commands that print a model result must say the same warnings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CAL = ("calibrate", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "1")


def _one_line_exit_2(run_cli, *args, field: str) -> str:
    code, out, err = run_cli(*args)
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and field in lines[0] and "Traceback" not in err, (code, err)
    return lines[0]


# ---- integer flags state their range with whole-number bounds -----------------------------------------------

@pytest.mark.parametrize("args,line", [
    (("predict", "--batch", "2000000"), "error: batch: got 2000000; allowed: an integer in [1, 1000000]"),
    (("predict", "--ctx", "-1"), "error: ctx: got -1; allowed: an integer in [0, 100000000]"),
    (("predict", "--max-running-requests", "0"),
     "error: max-running-requests: got 0; allowed: an integer in [1, 10000000]"),
    (("verify", "--batch", "0"), "error: batch: got 0; allowed: an integer in [1, 1000000]"),
    (("sweep", "--steps", "0-3"), "error: steps: got 0; allowed: integers in [1, 64]"),
    (("sweep", "--topk", "1,99"), "error: topk: got 99; allowed: integers in [1, 64]"),
    (("sweep", "--batch", "1,2000000"), "error: batch: got 2000000; allowed: integers in [1, 1000000]"),
    ((*CAL, "--point", "4=7.6", "--out", "x.json", "--batch", "3000000"),
     "error: batch: got 3000000; allowed: an integer in [1, 1000000]"),
    ((*CAL, "--point", "4=7.6", "--out", "x.json", "--ctx", "-5"),
     "error: ctx: got -5; allowed: an integer in [0, 100000000]"),
])
def test_an_out_of_range_integer_flag_states_its_range_in_digits(run_cli, tmp_path, monkeypatch, args, line):
    monkeypatch.chdir(tmp_path)
    field = line.split(": ")[1]
    assert _one_line_exit_2(run_cli, *args, field=field) == line
    assert "e+0" not in line and list(tmp_path.iterdir()) == []


def test_fmt_bound_reads_whole_numbers_as_digits():
    from specsim.errors import fmt_bound, fmt_range

    assert fmt_bound(1e6) == "1000000" and fmt_bound(1_000_000) == "1000000" and fmt_bound(0.001) == "0.001"
    assert fmt_bound(2.5) == "2.5" and fmt_bound(float("inf")) == "inf" and fmt_range(1, 64.0) == "[1, 64]"


# ---- validate: an unknown built-in name lists the built-in datasets ---------------------------------------------

def test_an_unknown_dataset_name_lists_the_built_in_datasets(run_cli):
    from specsim.io.packagedata import builtin_dataset_names

    names = builtin_dataset_names()
    assert {"kimi-k2.5-seed", "published_batch_sweeps", "h200-llama-3.1-8b-forwards"} <= set(names)
    assert "h200-sglang-fused-moe" not in names  # kernel timings validate does not score
    line = _one_line_exit_2(run_cli, "validate", "no-such-dataset", field="dataset")
    assert "'no-such-dataset'" in line and all(n in line for n in names)
    for name in ("published-batch-sweeps", "published_batch_sweeps"):  # the alias is_sweeps_dataset takes works too
        code, out, err = run_cli("validate", name, "--json")
        assert code == 0, err


# ---- calibrate --out -: the scenario alone on standard output, described as calibrated -------------------------

def test_calibrate_out_dash_prints_only_the_scenario_on_stdout(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(*CAL, "--point", "4=7.6", "--point", "8=8.5", "--out", "-")
    assert code == 0, err
    sc = json.loads(out)  # nothing but the scenario: `specsim calibrate ... --out - > my.json` or `| jq`
    assert sc["calibration"]["points"] and "residuals" in err and "wrote" not in err
    assert list(tmp_path.iterdir()) == []  # no file named '-'
    f = tmp_path / "s.json"
    f.write_text(out)
    assert run_cli("predict", "-s", str(f))[0] == 0  # accepted back
    line = _one_line_exit_2(run_cli, *CAL, "--point", "4=7.6", "--out", "-", "--json", field="out")
    assert "--json" in line


def test_a_calibrated_scenario_says_what_it_was_calibrated_on(run_cli, tmp_path):
    out = tmp_path / "c.json"
    log = ROOT / "examples" / "sglang_server.log"
    code, _, err = run_cli(*CAL, "--point", "4=7.6", "--point", "8=8.5", "--from-log", str(log), "--out", str(out))
    assert code == 0, err
    sc = json.loads(out.read_text())
    desc = sc["description"]
    assert "not calibrated" not in desc and desc.startswith("Llama-3.1-8B")
    assert "calibrated by specsim calibrate on 2 verify point(s) at 4, 8 tokens" in desc
    assert "--point 4=7.6 8=8.5" in desc and "--from-log sglang_server.log" in desc and "logged cycle(s)" in desc
    moved = sc["provenance"]["calibrated"]["moved"]
    assert "mem_efficiency" in moved and f"mem_efficiency {moved['mem_efficiency']['prior']:.4g} -> " in desc
    from specsim.analysis.calibrate import _calibrated_description

    text, _ = _calibrated_description(desc, [], True, [], "--baseline-tok-s", {}, {})  # a recalibration
    assert text.count("calibrated by") == 1 and "a baseline tok/s from --baseline-tok-s" in text


# ---- scenario show / dump take --scenario as every other command does ------------------------------------------

def test_scenario_show_takes_scenario_as_an_option(run_cli, tmp_path):
    code, by_option, err = run_cli("scenario", "show", "--scenario", "kimi-k2.5-seed-untuned")
    assert code == 0, err
    assert by_option == run_cli("scenario", "show", "kimi-k2.5-seed-untuned")[1] and "kimi-k2.5-seed-untuned" in by_option
    f = tmp_path / "s.json"
    assert run_cli("scenario", "dump", "-s", "kimi-k2.5-seed-untuned", "-o", str(f))[0] == 0
    assert json.loads(f.read_text())["name"] == "kimi-k2.5-seed-untuned"
    assert run_cli("scenario", "show", "-s", str(f))[1] == by_option
    garbage = tmp_path / "g.json"
    garbage.write_text("not json {")
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    for value, says in (("no-such-scenario", "built-in scenarios: "), (str(tmp_path / "missing.json"), "no such file"),
                        (str(garbage), "not valid JSON"), (str(binary), "not UTF-8"), (str(tmp_path), "directory"),
                        ("", "built-in scenarios")):
        for cmd in ("show", "dump"):
            line = _one_line_exit_2(run_cli, "scenario", cmd, "--scenario", value, field="scenario")
            assert says in line and repr(value) in line, line
    line = _one_line_exit_2(run_cli, "scenario", "show", "kimi-k2.5-seed", "--scenario", "kimi-k2.5-seed-untuned",
                            field="scenario")
    assert "give one scenario" in line


# ---- report: the format follows --out's suffix or --format, and the two agree ----------------------------------

@pytest.mark.parametrize("args,field,says", [
    (("--out", "r.md", "--format", "html"), "format", "names a Markdown file"),
    (("--out", "r.html", "--format", "md"), "format", "names an HTML file"),
    (("--out", "r.json", "--format", "markdown"), "format", "names a JSON file"),
    (("--out", "r.txt"), "out", "allowed: a file name ending in .html"),
    (("--out", "r.pdf", "--format", "html"), "out", "allowed: a file name ending in .html"),
    (("--out", "report"), "out", "no suffix: give --format html, md or json"),
    (("--out", "-"), "out", "standard output has no suffix"),
    (("--out", "r.md", "--format", "pdf"), "format", "allowed: html, md (markdown) or json"),
])
def test_report_format_and_suffix_must_agree(run_cli, tmp_path, monkeypatch, args, field, says):
    monkeypatch.chdir(tmp_path)
    line = _one_line_exit_2(run_cli, "report", *args, field=field)
    assert says in line and line.startswith(f"error: {field}: got ")
    assert list(tmp_path.iterdir()) == []  # refused before any work: nothing written


@pytest.mark.parametrize("name,fmt,starts", [("r.HTML", None, "<!DOCTYPE html>"), ("r.markdown", "md", "# specsim report"),
                                             ("r.json", None, "{"), ("plain", "json", "{")])
def test_report_writes_the_format_its_suffix_or_format_names(run_cli, tmp_path, name, fmt, starts):
    out = tmp_path / name
    code, _, err = run_cli("report", "--sweep", "1-3", "--out", str(out), *(("--format", fmt) if fmt else ()))
    assert code == 0, err
    assert out.read_text().lstrip().startswith(starts), out.read_text()[:80]
    if starts == "{":
        d = json.loads(out.read_text())
        assert d["kind"] == "modeled" and d["prediction"]["tok_s"] > 0 and d["steps_sweep"]["steps"] == [1, 2, 3]


def test_report_to_stdout_with_a_format(run_cli):
    code, out, err = run_cli("report", "--sweep", "1-2", "--out", "-", "--format", "json")
    assert code == 0 and json.loads(out)["scenario"] == "kimi-k2.5-seed" and "wrote" not in err


# ---- a log with nothing to read: one line naming the file and the line counts, exit 2 ---------------------------

def _bad_logs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    binary = tmp_path / "binary.log"
    binary.write_bytes(bytes(range(256)) * 40)
    junk = tmp_path / "junk.log"
    junk.write_text("hello\nDecode batch. #running-req: 1, #tok\n{bad json\n")
    latin = tmp_path / "latin1.log"
    latin.write_bytes("caf\xe9 na\xefve r\xe9sum\xe9\n".encode("latin-1") * 50)
    return {"missing": (tmp_path / "missing.log", "does not exist"), "dir": (tmp_path, "is a directory"),
            "devzero": (Path("/dev/zero"), "not a regular file"),
            "empty": (empty, "empty.log (0 lines read, 0 skipped as corrupt, 0 unrelated)"),
            "binary": (binary, "binary.log looks binary, not a text log"),
            "junk": (junk, "junk.log (3 lines read, 2 skipped as corrupt, 1 unrelated)"),
            "latin1": (latin, "latin1.log (50 lines read")}


@pytest.mark.parametrize("case", ["missing", "dir", "devzero", "empty", "binary", "junk", "latin1"])
def test_a_log_with_nothing_to_read_is_one_line_in_ingest_and_calibrate(run_cli, tmp_path, case):
    path, says = _bad_logs(tmp_path)[case]
    line = _one_line_exit_2(run_cli, "ingest", str(path), field="file")
    assert says in line, line
    out = tmp_path / "out" / "s.json"
    out.parent.mkdir()
    line = _one_line_exit_2(run_cli, *CAL, "--from-log", str(path), "--out", str(out), field="from-log")
    assert says in line and not out.exists(), line


def test_corrupt_lines_beside_records_are_still_counted_not_fatal(run_cli, tmp_path):
    path, _ = _bad_logs(tmp_path)["junk"]
    code, out, err = run_cli("ingest", str(path), str(ROOT / "examples" / "sglang_server.log"))
    assert code == 0 and "2 skipped (corrupt)" in out, err


# ---- verify and explain say the warnings predict says -----------------------------------------------------------

@pytest.mark.parametrize("deploy,says", [
    (("--batch", "200"), "runs at most 48 requests at once"),  # past the engine's cap
    (("--model", "llama-3.1-70b", "--gpu", "rtx3090", "--tp", "1"), "target weights need"),  # does not fit memory
])
@pytest.mark.parametrize("cmd", [("predict",), ("verify",), ("verify", "--breakdown", "--tokens", "3"), ("explain",)])
def test_verify_and_explain_say_predicts_warnings(run_cli, deploy, says, cmd):
    code, out, err = run_cli("predict", *deploy, "--json")
    assert code == 0, err
    warnings = json.loads(out)["warnings"]
    assert any(says in w for w in warnings)
    code, out, err = run_cli(*cmd, *deploy, "--json")
    assert code == 0, err
    assert json.loads(out)["warnings"] == warnings
    for fmt in ("text", "md"):
        code, out, err = run_cli(*cmd, *deploy, "--format", fmt)
        assert code == 0, err
        text = " ".join(out.split())
        assert text.count("warning:") == len(warnings) and says in text, (fmt, out[-600:])
    code, out, _ = run_cli(*cmd)  # the default scenario warns of nothing
    assert "warning:" not in out


# ---- other hostile files: a profile names the file as the value given ------------------------------------------

def test_a_bad_profile_file_is_named_as_the_value_given(run_cli, tmp_path):
    garbage = tmp_path / "g.json"
    garbage.write_text("{ not json")
    binary = tmp_path / "b.json"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    for path, says in ((tmp_path, "is a directory"), (tmp_path / "nope.json", "no such file"),
                       (garbage, "not valid JSON"), (binary, "not UTF-8"), (Path("/dev/zero"), "only regular files")):
        line = _one_line_exit_2(run_cli, "predict", "--profile", str(path), field="profile")
        assert line.startswith(f"error: profile: got {str(path)!r}; ") and says in line, line
