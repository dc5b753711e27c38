"""Tests for specsim.io.ingest: SGLang / vLLM log and benchmark-output ingestion."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import specsim.io.ingest as ingest_mod
from specsim.io.ingest import (
    BenchRecord,
    CaptureRecord,
    DecodeRecord,
    IngestError,
    IngestResult,
    VllmSpecRecord,
    ingest_files,
    ingest_text,
)

FIX = Path(__file__).parent / "fixtures" / "ingest"


@pytest.fixture(autouse=True, scope="module")
def _surface_parser_bugs() -> Iterator[None]:
    """Make internal parser errors raise instead of being counted as skipped lines."""
    old = ingest_mod._RAISE_INTERNAL_ERRORS
    ingest_mod._RAISE_INTERNAL_ERRORS = True
    yield
    ingest_mod._RAISE_INTERNAL_ERRORS = old

ALL_FIXTURES = sorted(FIX.iterdir())


def _parsed_lines(r: IngestResult) -> int:
    return r.lines_total - r.lines_skipped - r.lines_ignored - r.lines_idle


def _check_invariants(r: IngestResult) -> None:
    n_records = len(r.decode) + len(r.captures) + len(r.bench) + len(r.vllm)
    assert 0 <= _parsed_lines(r) <= n_records
    assert sum(r.formats.values()) == n_records
    for d in r.decode:
        assert d.running_req >= 0 and d.gen_throughput_tok_s >= 0
        assert d.accept_length is None or d.accept_length >= 1.0
        assert d.accept_rate is None or 0.0 <= d.accept_rate <= 1.0
    for c in r.captures:
        for v in (c.avail_mem_gb, c.mem_usage_gb, c.elapsed_s):
            assert v is None or (v >= 0 and math.isfinite(v))
    for b in r.bench:
        assert b.accept_length is None or b.accept_length >= 1.0
        assert b.step_time_ms is None or b.step_time_ms > 0
    for v in r.vllm:
        assert v.mean_acceptance_length is None or v.mean_acceptance_length >= 1.0
        assert v.draft_acceptance_rate is None or 0.0 <= v.draft_acceptance_rate <= 1.0
    json.dumps(r.to_dict(), allow_nan=False)


# ---- SGLang Decode batch lines, one fixture per version ---------------------------------------


def test_decode_v0_4_3() -> None:
    r = ingest_files([FIX / "sglang_v0_4_3.log"])
    assert r.decode == [
        DecodeRecord(4, 3.12, None, None, 520.0, 0, "2025-02-10 08:00:05", 0, "v0.4.3"),
        DecodeRecord(8, 2.88, None, None, 960.0, 2, "2025-02-10 08:00:06", 0, "v0.4.3"),
    ]
    assert (r.lines_total, r.lines_skipped, r.lines_ignored) == (4, 0, 2)
    assert r.formats == {"sglang_decode": 2}
    # cycle = 1000 * accept_len * running_req / gen_throughput
    assert [p["cycle_ms"] for p in r.cycle_points()] == pytest.approx([24.0, 24.0])
    assert all(not p["baseline"] for p in r.cycle_points())


def test_decode_v0_4_6_no_trailing_comma() -> None:
    r = ingest_files([FIX / "sglang_v0_4_6.log"])
    assert [d.version_hint for d in r.decode] == ["v0.4.6", "v0.4.6"]
    assert [d.cuda_graph for d in r.decode] == [True, True]
    assert [d.accept_length for d in r.decode] == [2.5, 2.7]
    assert [d.queue_req for d in r.decode] == [0, 0]
    assert [p["cycle_ms"] for p in r.cycle_points()] == pytest.approx([25.0, 24.0])
    (row,) = r.summary()
    assert (row["source"], row["batch"], row["n"]) == ("decode", 16, 2)
    assert row["accept_length_mean"] == pytest.approx(2.6)
    assert row["cycle_ms_mean"] == pytest.approx(24.5)
    assert row["tok_s_mean"] == pytest.approx(1700.0)
    assert row["tok_s_per_req_mean"] == pytest.approx(1700.0 / 16)


def test_decode_v0_5_3_with_server_args_and_overlap() -> None:
    r = ingest_files([FIX / "sglang_v0_5_3.log"])
    assert r.spec_config == {"steps": 3, "topk": 1, "num_draft_tokens": 4}
    assert r.overlap_scheduler is False
    # the first window after start-up (0.39 tok/s: averaged over the idle time) is dropped
    assert r.lines_idle == 1
    second, fastrl, nonspec = r.decode
    assert second == DecodeRecord(1, 1.95, 0.49, True, 178.86, 0, "2025-10-22 10:27:57", 0, "v0.5.3")
    # python-logging style prefix: timestamp found, no TP rank
    assert (fastrl.timestamp, fastrl.tp_rank, fastrl.running_req) == ("2025-12-04 20:35:53", None, 48)
    assert (fastrl.accept_length, fastrl.cuda_graph) == (1.0, False)
    assert (nonspec.accept_length, nonspec.running_req, nonspec.queue_req) == (None, 233, 317)
    assert nonspec.timestamp is None
    assert (r.lines_total, r.lines_skipped, r.lines_ignored) == (7, 0, 3)
    groups = {(g["steps"], g["batch"]): g for g in r.summary()}
    assert groups[(3, 1)]["n"] == 1 and groups[(3, 1)]["accept_length_mean"] == pytest.approx(1.95)
    assert groups[(3, 48)]["topk"] == 1 and groups[(3, 48)]["num_draft_tokens"] == 4
    # a decode line without "accept len" is a plain decode step: baseline, steps 0
    assert groups[(0, 233)]["baseline"] is True
    base = [p for p in r.cycle_points() if p["baseline"]]
    assert len(base) == 1 and base[0]["cycle_ms"] == pytest.approx(1000 * 233 / 4594.01)


def test_decode_newest_iter_dp_hybrid_pd() -> None:
    r = ingest_files([FIX / "sglang_newest.log"])
    assert r.overlap_scheduler is True
    assert r.spec_config == {"steps": 4, "topk": 1, "num_draft_tokens": 5}
    assert [d.version_hint for d in r.decode] == ["newest"] * 4
    a, b, c, d = r.decode
    assert a == DecodeRecord(32, 3.2, 0.55, True, 3200.0, 0, "2026-01-15 09:05:00", 0, "newest")
    assert (b.tp_rank, b.running_req, b.queue_req) == (8, 30, 1)  # [.. DP1 TP8], #full token
    assert (c.cuda_graph, c.timestamp, c.accept_length) == (False, "2026-01-15 09:05:10.123", 2.4)
    assert (d.accept_length, d.running_req) == (4.0, 2)  # mamba variant
    assert [p["cycle_ms"] for p in r.cycle_points()] == pytest.approx([32.0, 30.0, 30.0, 20.0])
    assert {p["steps"] for p in r.cycle_points()} == {4}
    weights = [32, 30, 8, 2]
    expected = sum(w * x for w, x in zip(weights, [3.2, 3.0, 2.4, 4.0], strict=True)) / sum(weights)
    assert r.mean_accept_length() == pytest.approx(expected)


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        ("Decode batch. #running-req: 1, #token: 5, token usage: 0.00, accept len: 2.00, "
         "gen throughput (token/s): 10.00, #queue-req: 0, ", "v0.4.3"),
        ("Decode batch. #running-req: 1, #token: 5, token usage: 0.00, accept len: 2.00, "
         "cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0", "v0.4.6"),
        ("Decode batch. #running-req: 1, #token: 5, token usage: 0.00, accept len: 2.00, "
         "accept rate: 0.50, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0, ",
         "v0.5.3"),
        ("Decode batch, #running-req: 1, #token: 5, token usage: 0.00, accept len: 2.00, "
         "accept rate: 0.33, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0, ",
         "newest"),
        ("Decode batch [7], #running-req: 1, #token: 5, token usage: 0.00, cpu graph: False, "
         "gen throughput (token/s): 10.00, #queue-req: 0, ", "newest"),
        # newest reporter: no trailing comma, device label, optional MFU / occupancy tail
        ("Decode batch, #running-req: 1, #token: 5, token usage: 0.00, accept len: 2.00, "
         "accept rate: 0.33, npu graph: True, gen throughput (token/s): 10.00, #queue-req: 0, "
         "est. decode TFLOPS/s (per GPU): 1.25, est. read BW (GB/s per GPU): 812.40, "
         "est. write BW (GB/s per GPU): 3.10, fwd occupancy: 87.50%", "newest"),
    ],
)
def test_decode_version_hints(line: str, hint: str) -> None:
    (rec,) = ingest_text(line).decode
    assert rec.version_hint == hint
    assert rec.running_req == 1 and rec.gen_throughput_tok_s == 10.0


# ---- capture lines -------------------------------------------------------------------------


def test_capture_old_styles() -> None:
    r = ingest_files([FIX / "capture_old.log"])
    assert r.formats == {"sglang_capture": 9}
    assert (r.lines_total, r.lines_skipped, r.lines_ignored) == (10, 0, 1)  # tqdm bar ignored
    c = r.captures
    assert c[0] == CaptureRecord("target", "bs_list", None, None, None, (1, 2, 4, 8, 16, 24, 32))
    assert c[1] == CaptureRecord("target", "begin", 1.45, None, None, None)
    # ~Mar 2025 order: avail mem before mem usage
    assert c[2] == CaptureRecord("target", "end", 0.53, 0.93, 7.23, None)
    assert c[4] == CaptureRecord("target", "end", 16.74, 0.54, 12.11, None)
    assert c[6] == CaptureRecord("draft_decode", "end", 15.31, 0.21, 62.67, None)
    assert c[8] == CaptureRecord("draft_extend", "end", 15.19, 0.12, 3.05, None)
    assert [x.phase for x in c] == ["target"] * 5 + ["draft_decode"] * 2 + ["draft_extend"] * 2


def test_capture_new_phase_named() -> None:
    r = ingest_files([FIX / "capture_new.log"])
    c = r.captures
    assert len(c) == 8 and r.lines_ignored == 2
    assert c[0] == CaptureRecord("target_verify", "begin", 1.0, None, None, (1, 2, 64, 128))
    assert c[1] == CaptureRecord("target_verify", "end", 52.93, 0.14, 2.27, None)
    assert c[3] == CaptureRecord("draft_decode", "end", 52.66, 0.18, 0.98, None)
    assert (c[4].phase, c[4].event, c[4].batch_sizes) == ("draft_extend", "begin", (1, 2, 64, 128))
    assert c[5] == CaptureRecord("draft_extend", "end", 52.61, 0.05, 1.1, None)
    assert (c[6].phase, c[6].batch_sizes) == ("unknown", None)  # target prefill graph
    assert (c[7].phase, c[7].batch_sizes) == ("target", (1, 2))  # non-spec target decode graph
    assert r.summary() == [] and r.cycle_points() == []


# ---- benchmark JSON lines ------------------------------------------------------------------


def test_bench_speculative_values_summary_and_baseline() -> None:
    r = ingest_files([FIX / "bench_speculative.jsonl"])
    assert r.formats == {"bench_speculative": 6}
    assert r.bench[1] == BenchRecord("bench_speculative", 1, 3, 1, 4, 3.2, 16.0, 200.0, None, None)
    rows = r.summary()
    keys = [(g["steps"], g["topk"], g["num_draft_tokens"], g["batch"]) for g in rows]
    assert keys == [(0, 0, 0, 1), (0, 0, 0, 4), (3, 1, 4, 1), (3, 1, 4, 4), (5, 4, 8, 4)]
    grp = rows[3]
    assert grp["n"] == 2
    assert grp["accept_length_mean"] == pytest.approx(3.05)
    assert grp["cycle_ms_mean"] == pytest.approx(20.25)
    assert grp["tok_s_per_req_mean"] == pytest.approx((150.0 + 151.22) / 2)
    assert grp["tok_s_mean"] == pytest.approx(4 * (150.0 + 151.22) / 2)
    pts = r.cycle_points()
    assert [p["baseline"] for p in pts] == [True, False, True, False, False, False]
    assert pts[0] == {
        "steps": 0, "topk": 0, "num_draft_tokens": 0, "batch": 1, "accept_length": 1.0,
        "cycle_ms": 12.5, "tok_s": 80.0, "baseline": True, "source": "bench_speculative",
        "tok_s_per_req": 80.0, "cuda_graph": None,
    }
    # baseline steps are excluded from the mean accept length
    assert r.mean_accept_length() == pytest.approx((3.2 + 3.0 + 3.1 + 3.6) / 4)


def test_bench_serving() -> None:
    r = ingest_files([FIX / "bench_serving.jsonl"])
    spec, base, bare = r.bench
    assert spec == BenchRecord("bench_serving", 16, 3, 1, 4, 2.9, None, None, 1074.36, 42.1)
    assert base == BenchRecord("bench_serving", 16, 0, 0, 0, None, None, None, 800.0, 19.5)
    assert bare == BenchRecord("bench_serving", None, None, None, None, 2.5, None, None, 500.0, 10.0)
    pts = r.cycle_points()
    assert [(p["cycle_ms"], p["baseline"]) for p in pts] == [(42.1, False), (19.5, True), (10.0, False)]
    assert pts[0]["tok_s_per_req"] == pytest.approx(1074.36 / 16)


# ---- vLLM ----------------------------------------------------------------------------------


def test_vllm_old_and_new_metrics() -> None:
    r = ingest_files([FIX / "vllm.log"])
    assert r.formats == {"vllm_spec_v0": 2, "vllm_spec_v1": 3}
    assert (r.lines_total, r.lines_skipped, r.lines_ignored) == (9, 0, 4)  # idle nan line ignored
    v0a, v0b, v1a, v1b, v1c = r.vllm
    # V0: mean accept length = emitted * k / drafted (= system efficiency * (k + 1))
    assert v0a.mean_acceptance_length == pytest.approx(10616 * 3 / 13311)
    assert v0a.mean_acceptance_length == pytest.approx(0.598 * 4, abs=0.002)
    assert (v0a.num_spec_tokens, v0a.draft_acceptance_rate) == (3, 0.642)
    assert (v0a.accepted_tokens, v0a.drafted_tokens, v0a.per_position_rates) == (8547, 13311, None)
    assert v0b.mean_acceptance_length == pytest.approx(190541 * 5 / 248165)
    assert v1a == VllmSpecRecord(2.16, (0.543, 0.357, 0.264), 3, pytest.approx(0.388), 150, 387)
    assert v1b.per_position_rates == (0.781, 0.566, 0.4)
    assert v1b.draft_acceptance_rate == pytest.approx(0.582)
    assert (v1b.mean_acceptance_length, v1b.accepted_tokens, v1b.drafted_tokens) == (2.75, 1747, 3000)
    assert v1c.per_position_rates == (0.8, 0.6, 0.4)
    # conditional rates from the drafts-weighted mean of the unconditional vectors
    w = [387, 3000, 1500]
    vecs = [v1a.per_position_rates, v1b.per_position_rates, v1c.per_position_rates]
    u = [sum(wi * vec[i] for wi, vec in zip(w, vecs, strict=True)) / sum(w) for i in range(3)]
    assert r.acceptance_rates() == pytest.approx((u[0], u[1] / u[0], u[2] / u[1]))
    (row,) = [g for g in r.summary() if g["source"] == "vllm" and g["steps"] == 3]
    assert row["n"] == 4
    assert row["per_position_rates"] == pytest.approx(list(r.acceptance_rates()))


def test_vllm_per_position_rates_become_conditional() -> None:
    line = ("SpecDecoding metrics: Mean acceptance length: 2.80, Accepted: 900 tokens, "
            "Drafted: 1500 tokens, Per-position acceptance rate: 0.800, 0.600, 0.400, "
            "Avg Draft acceptance rate: 60.0%")
    r = ingest_text(line)
    assert r.vllm[0].per_position_rates == (0.8, 0.6, 0.4)  # stored as printed
    assert r.acceptance_rates() == pytest.approx((0.8, 0.75, 2 / 3))
    assert r.mean_accept_length() == pytest.approx(2.8)
    zero = ingest_text(line.replace("2.80", "1.80").replace("900", "600")
                       .replace("0.800, 0.600, 0.400", "0.800, 0.000, 0.000")
                       .replace("60.0%", "40.0%"))
    assert zero.acceptance_rates() == pytest.approx((0.8, 0.0, 0.0))


def test_no_vllm_records_means_no_rates() -> None:
    r = ingest_files([FIX / "bench_speculative.jsonl"])
    assert r.acceptance_rates() is None


# ---- corrupt input -------------------------------------------------------------------------


def test_mixed_file_truncated_garbage_and_bad_json() -> None:
    r = ingest_files([FIX / "mixed.log"])
    assert r.lines_total == 19
    assert r.lines_skipped == 11
    assert r.lines_ignored == 4
    assert _parsed_lines(r) == 4
    assert r.formats == {"sglang_decode": 2, "bench_speculative": 1, "vllm_spec_v1": 1}
    # the glued line yields the complete second record
    assert [(d.running_req, d.timestamp) for d in r.decode] == [
        (2, "2025-10-22 10:27:57"), (4, "2025-10-22 10:28:04")]
    assert r.bench[0].accept_length == 2.8
    _check_invariants(r)


@pytest.mark.parametrize(
    "line",
    [
        "Decode batch. #running-req: 2, #token: 300, token usage: 0.00, accept len: 2.50, "
        "cuda graph: maybe, gen throughput (token/s): 25.00, #queue-req: 0, ",
        "Decode batch. #running-req: 2, #token: 300, accept rate: 1.70, "
        "gen throughput (token/s): 25.00, #queue-req: 0, ",
        "Decode batch. #running-req: 2, #token: 300, gen throughput (token/s): nan, #queue-req: 0, ",
        "Decode batch. #token: 300, #running-req: 2, gen throughput (token/s): 2.0, #queue-req: 0, ",
        "Capture cuda graph bs [1, 2, 0]",
        "Capture cuda graph end. Time elapsed: -1.00 s. mem usage=0.54 GB. avail mem=16.74 GB.",
        '{"batch_size": 1, "steps": 3, "step_time": 0, "acc_length": 2.0, "speed": 1.0}',
        '{"batch_size": 1, "steps": 3, "step_time": NaN, "acc_length": 2.0, "speed": 1.0}',
        '{"batch_size": true, "steps": 3, "step_time": 0.01, "acc_length": 2.0, "speed": 1.0}',
        '{"output_throughput": -3.0, "median_itl_ms": 10.0}',
        '{"output_throughput": "fast"}',
        "SpecDecoding metrics: Mean acceptance length: 0.50, Accepted: 1 tokens, Drafted: 3 tokens",
        "SpecDecoding metrics: Mean acceptance length: 2.00, Accepted: 9 tokens, Drafted: 3 tokens",
        "SpecDecoding metrics: Mean acceptance length: 2.00, Accepted: 3 tokens, Drafted: 9 tokens, "
        "Per-position acceptance rate: 0.300, 0.500, 0.200",
        "Speculative metrics: Draft acceptance rate: 1.642, System efficiency: 0.598, "
        "Number of speculative tokens: 3.",
    ],
)
def test_out_of_range_or_malformed_lines_are_skipped(line: str) -> None:
    good = ("Decode batch. #running-req: 1, #token: 5, token usage: 0.00, cuda graph: True, "
            "gen throughput (token/s): 10.00, #queue-req: 0, ")
    r = ingest_text(f"{line}\n{good}\n")
    assert len(r.decode) == 1 and r.decode[0].running_req == 1
    assert (r.lines_total, r.lines_skipped, r.lines_ignored) == (2, 1, 0)
    assert len(r.captures) == len(r.bench) == len(r.vllm) == 0


def _valid_lines() -> list[str]:
    """Every fixture line (except the corrupt-on-purpose mixed.log) that parses on its own."""
    return [
        line
        for path in ALL_FIXTURES
        if path.name != "mixed.log"
        for line in path.read_text(encoding="utf-8").splitlines()
        if _parsed_lines_safe(line)
    ]


def _parsed_lines_safe(line: str) -> bool:
    try:
        return _parsed_lines(ingest_text(line)) == 1
    except IngestError:
        return False


def _records(r: IngestResult) -> list[object]:
    return [*r.decode, *r.captures, *r.bench, *r.vllm]


def _same_up_to_truncation(a: object, b: object) -> bool:
    """A cut line may only lose information that cannot be checked (the last number)."""
    if isinstance(a, DecodeRecord) and isinstance(b, DecodeRecord):
        return (a.running_req, a.accept_length, a.gen_throughput_tok_s, a.cuda_graph) == (
            b.running_req, b.accept_length, b.gen_throughput_tok_s, b.cuda_graph)
    if isinstance(a, VllmSpecRecord) and isinstance(b, VllmSpecRecord):
        if (a.mean_acceptance_length, a.accepted_tokens, a.drafted_tokens) != (
                b.mean_acceptance_length, b.accepted_tokens, b.drafted_tokens):
            return False
        if b.draft_acceptance_rate is not None and a.draft_acceptance_rate != b.draft_acceptance_rate:
            return False
        pa, pb = a.per_position_rates, b.per_position_rates
        return pb is None or pa == pb or (
            pa is not None and len(pa) == len(pb)
            and all(abs(x - y) < 0.01 for x, y in zip(pa, pb, strict=True)))
    return a == b


VALID_LINES = _valid_lines()


def test_every_fixture_line_is_parsed_alone() -> None:
    assert len(VALID_LINES) >= 40


@pytest.mark.parametrize("line", VALID_LINES, ids=[f"line{i}" for i in range(len(VALID_LINES))])
def test_truncated_valid_lines_never_give_wrong_records(line: str) -> None:
    (full,) = _records(ingest_text(line))
    for cut in range(len(line)):
        try:
            r = ingest_text(line[:cut])
        except IngestError:
            continue
        recs = _records(r)
        assert len(recs) == 1, (cut, line[:cut])
        assert _same_up_to_truncation(full, recs[0]), (cut, line[:cut], recs[0])


# ---- errors --------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.log"
    with pytest.raises(IngestError, match=r"^file: .*nope\.log does not exist$"):
        ingest_files([FIX / "vllm.log", missing])


def test_empty_and_unrecognised_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(IngestError, match=r"^file: no recognisable SGLang/vLLM records in .*empty\.log "
                                          r"\(0 lines read, 0 skipped as corrupt, 0 unrelated\)"):
        ingest_files([empty])
    junk = tmp_path / "junk.log"
    junk.write_text('hello\n{"not": "bench"}\nDecode batch. #running-req: 1, #tok\n')
    with pytest.raises(IngestError, match=r"\(3 lines read, 2 skipped as corrupt, 1 unrelated\); allowed: ") as exc:
        ingest_files([junk, empty])
    assert "\n" not in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_directory_and_no_paths(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="is a directory"):
        ingest_files([tmp_path])
    with pytest.raises(IngestError):
        ingest_files([])
    with pytest.raises(IngestError, match="no recognisable"):
        ingest_text("")


# ---- multiple files / serialisation ----------------------------------------------------------


def test_all_fixtures_together() -> None:
    r = ingest_files(ALL_FIXTURES)
    assert r.files == [str(p) for p in ALL_FIXTURES]
    assert r.formats == {
        "sglang_decode": 2 + 2 + 4 + 4 + 2 - 1,  # minus the warm-up line of sglang_v0_5_3.log
        "sglang_capture": 17,
        "bench_speculative": 7,
        "bench_serving": 3,
        "vllm_spec_v0": 2,
        "vllm_spec_v1": 4,
    }
    # the first server-args dump wins; each file's decode lines keep their own config
    assert r.spec_config == {"steps": 4, "topk": 1, "num_draft_tokens": 5}
    decode_steps = {(g["steps"], g["batch"]) for g in r.summary() if g["source"] == "decode"}
    assert (4, 32) in decode_steps and (3, 48) in decode_steps and (None, 4) in decode_steps
    assert r.overlap_scheduler is True  # first explicit message (newest file sorts first)
    _check_invariants(r)
    d = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert d["lines_total"] == r.lines_total and len(d["decode"]) == len(r.decode)
    assert d["captures"][0]["batch_sizes"] == [1, 2, 64, 128]


def test_ingest_text_name_in_error() -> None:
    with pytest.raises(IngestError, match="in my.log "):
        ingest_text("nothing here\n", name="my.log")


def test_files_with_invalid_utf8_are_read(tmp_path: Path) -> None:
    p = tmp_path / "bin.log"
    good = (b"[2025-10-22 10:27:57 TP3] Decode batch. #running-req: 2, #token: 3, token usage: 0.00, "
            b"accept len: 2.50, accept rate: 0.62, cuda graph: True, gen throughput (token/s): 250.00, "
            b"#queue-req: 0, ")
    p.write_bytes(b"\x00\xff\xfe\xfd\n" + good + b"\n\x80\x80Decode batch. \xff\n")
    r = ingest_files([p])
    assert [d.tp_rank for d in r.decode] == [3]
    assert (r.lines_total, r.lines_skipped, r.lines_ignored) == (3, 1, 1)


# ---- property tests -------------------------------------------------------------------------

_ALPHABET = st.sampled_from(list("0123456789.,:;[]{}()\"' -#%=/\n\tabcdeGBTPs\x00\ufffd\u0663"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=_ALPHABET, max_size=300) | st.text(max_size=200))
def test_random_text_only_raises_ingest_error(text: str) -> None:
    try:
        r = ingest_text(text)
    except IngestError:
        return
    _check_invariants(r)


@st.composite
def _mutated(draw: st.DrawFn) -> str:
    line = draw(st.sampled_from(VALID_LINES))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["cut", "delete", "insert", "replace", "dup"]))
        i = draw(st.integers(0, len(line)))
        j = draw(st.integers(i, min(len(line), i + 12)))
        junk = draw(st.text(alphabet=_ALPHABET, max_size=6))
        if op == "cut":
            line = line[:i]
        elif op == "delete":
            line = line[:i] + line[j:]
        elif op == "insert":
            line = line[:i] + junk + line[i:]
        elif op == "replace":
            line = line[:i] + junk + line[j:]
        else:
            line = line + line[i:j]
    return line


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_mutated(), min_size=1, max_size=5))
def test_mutated_valid_lines_only_raise_ingest_error(lines: list[str]) -> None:
    try:
        r = ingest_text("\n".join(lines))
    except IngestError:
        return
    _check_invariants(r)
    assert r.lines_total == len("\n".join(lines).splitlines())


# ---- block-level fast path (ingest_files / ingest_text) == per-line path ----------------------


def _synthetic_lines(seed: int, n: int) -> list[str]:
    """SGLang decode lines of several layouts with the cases the block path must treat exactly as
    the per-line path: idle gaps, running-req 0, warm-up, values outside the fast layout, CRLF,
    corrupt lines, spec changes and other formats between them."""
    import random

    rng = random.Random(seed)
    out: list[str] = []
    t = 0
    for i in range(n):
        t += rng.choice((1, 1, 2, 45))  # an occasional idle gap
        ts = f"2025-10-22 {(t // 3600) % 24:02d}:{(t // 60) % 60:02d}:{t % 60:02d}"
        batch = rng.choice((0, 1, 4, 4, 8, 8, 8))
        acc = rng.choice(("2.40", "1.00", "3.10", "01.50", "1.0000000000000000000001", "2.5"))
        rate = rng.choice(("0.60", "1.00", "1.0", "0.7", "00.3"))
        gen = rng.choice(("250.00", "512.00", "30.10", "2.00", "0.00", "1000", "0.39"))
        k = rng.random()
        if k < 0.45:
            line = (f"[{ts} TP0] Decode batch. #running-req: {batch}, #token: 900, token usage: 0.10, "
                    f"accept len: {acc}, accept rate: {rate}, cuda graph: True, gen throughput (token/s): {gen}, "
                    f"#queue-req: 0, ")
        elif k < 0.6:
            line = (f"[{ts} DP0 TP1] Decode batch [{i}], #running-req: {batch}, #token: 900, token usage: 0.12, "
                    f"accept len: {acc}, cuda graph: False, gen throughput (token/s): {gen}, #queue-req: 1")
        elif k < 0.68:
            line = (f"[{ts}] Decode batch. #running-req: {batch}, #token: 9, token usage: 0.01, "
                    f"gen throughput (token/s): {gen}, #queue-req: 0")
        elif k < 0.72:
            line = (f"{ts} INFO Decode batch. #running-req: {batch}, #token: 9, token usage: 0.01, "
                    f"accept len: {acc}, gen throughput (token/s): {gen}, #queue-req: 0")
        elif k < 0.75:
            line = (f"[{ts} TP0] Decode batch. #running-req: {batch}, #token: 900, token usage: 0.10, "
                    f"accept len: {acc}, gen throughput (token/s): {gen}, #queue-req: 0, \r")
        elif k < 0.78:
            line = f"[{ts} TP0] Decode batch. #running-req: {batch}, #token: 900, token usage: 0.1"  # cut
        elif k < 0.8:
            steps = rng.choice((0, 3, 5))
            line = (f"[{ts}] server_args=ServerArgs(speculative_algorithm='EAGLE3', "
                    f"speculative_num_steps={steps}, speculative_eagle_topk=1, speculative_num_draft_tokens=4)")
        elif k < 0.81:
            line = f"[{ts}] Overlap scheduler is disabled"
        elif k < 0.9:
            line = (f"[{ts} TP0] Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 0, "
                    f"token usage: 0.01, #running-req: {batch}, #queue-req: 0, ")
        elif k < 0.95:
            line = f'[{ts}] INFO:     127.0.0.1:51234 - "POST /generate HTTP/1.1" 200 OK'
        elif k < 0.97:
            line = ""
        else:
            line = '{"batch_size": 4, "steps": 3, "topk": 1, "acc_length": 2.5, "step_time": 0.02, "speed": 90}'
        out.append(line)
    return out


def _line_path(lines: list[str]) -> IngestResult:
    state = ingest_mod._State()
    state.new_file()
    state.feed_many([ln[:-1] if ln.endswith("\r") else ln for ln in lines])
    return state.result(["x"], allow_empty=True)


@pytest.fixture()
def _small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reach the block path (stored records full), the reservoir and short runs on small inputs."""
    monkeypatch.setattr(ingest_mod, "MAX_STORED_RECORDS", 3)
    monkeypatch.setattr(ingest_mod, "MEDIAN_SAMPLE", 7)
    monkeypatch.setattr(ingest_mod, "_MIN_RUN", 2)


@pytest.mark.parametrize("seed", range(6))
def test_block_path_gives_the_line_path_result(seed: int, tmp_path: Path, _small_limits: None) -> None:
    lines = _synthetic_lines(seed, 3000)
    if seed == 0:  # every fixture line in the middle as well
        fix = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in ALL_FIXTURES).splitlines()
        lines = lines[:1500] + [ln.rstrip("\r") for ln in fix] + lines[1500:]
    want = _line_path(lines).to_dict()
    p = tmp_path / "mixed.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="")
    got = ingest_files([p], allow_empty=True).to_dict()
    got_text = ingest_text("\n".join(lines), allow_empty=True).to_dict()
    for d in (got, got_text):
        d["files"] = want["files"]
        assert d == want
    assert want["lines_idle"] > 0 and want["records_not_stored"] > 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10**6), st.integers(1, 400))
def test_block_path_property(_small_limits: None, seed: int, n: int) -> None:
    text = "\n".join(ln.rstrip("\r") for ln in _synthetic_lines(seed, n))
    want = _line_path(text.splitlines()).to_dict()
    got = ingest_text(text, allow_empty=True).to_dict()
    got["files"] = want["files"]
    assert got == want


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([b"a", b"bb", b"\n", b"\r\n", b"x" * 9, b"\xff", b"\n" * 3]), max_size=60),
       st.integers(1, 12), st.integers(1, 10))
def test_iter_blocks_gives_the_lines_of_iter_lines(tmp_path_factory: pytest.TempPathFactory, parts: list[bytes],
                                                   chunk: int, max_line: int) -> None:
    from specsim.io.safe_read import LONG_LINE, iter_blocks, iter_lines

    p = tmp_path_factory.mktemp("blocks") / "f.log"
    p.write_bytes(b"".join(parts))
    want = [ln for batch in iter_lines(p, chunk=chunk, max_line=max_line) for ln in batch]
    got: list[str] = []
    for block in iter_blocks(p, chunk=chunk, max_line=max_line):
        got.extend([block] if block == LONG_LINE else ingest_mod._split_lines(block))
    assert got == want
