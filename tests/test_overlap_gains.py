"""Published SGLang v1 -> spec-v2 pairs (``overlap_gains`` of the published dataset): the model's gain from the
overlap scheduler alone, zero-shot, against the published one."""

from __future__ import annotations

import json

import pytest

from specsim.analysis.predict import predict
from specsim.analysis.validate_sweeps import score_overlap_gains, validate_sweeps
from specsim.io.presets import data_root

ROW = {"id": "mine", "model": "llama-3.1-8b", "gpu": "h200", "tp": 1, "engine": "sglang", "steps": 3, "topk": 1,
       "batch": 32, "accept_length": 3.0, "v1_tok_s": 2000.0, "v2_tok_s": 2400.0}


def _shipped() -> list[dict]:
    d = json.loads(data_root("calibration").joinpath("datasets", "published_batch_sweeps.json").read_text(encoding="utf-8"))
    return d.get("overlap_gains", [])


def test_a_gain_is_the_overlap_scheduler_alone():
    """The modeled pair is the same scenario with the overlap scheduler off, then on: the v1 side is the sglang
    preset's own prediction (it runs speculation on v1), and the gain only hides host work (>= 1)."""
    (g,) = score_overlap_gains([ROW])
    v1 = predict(model="llama-3.1-8b", gpu="h200", tp=1, engine="sglang", steps=3, topk=1, batch=32, ctx=512, accept=3.0)
    assert g["modeled_v1_tok_s"] == pytest.approx(v1.tok_s, rel=1e-12)
    assert g["modeled_v2_tok_s"] > g["modeled_v1_tok_s"]
    assert g["published_gain"] == pytest.approx(1.2) and g["error_pct"] == pytest.approx(100 * (g["modeled_gain"] / 1.2 - 1))


def test_the_modeled_gain_grows_with_the_host_work_it_hides():
    """More requests, more per-request host work in a v1 cycle: the gain grows with the batch (1.14 -> 1.42 from
    one request to 64 here)."""
    gains = [g["modeled_gain"] for g in score_overlap_gains([{**ROW, "batch": b} for b in (1, 8, 64)])]
    assert 1.0 < gains[0] < gains[1] < gains[2]


def test_a_row_the_presets_cannot_express_is_skipped_and_said():
    (g,) = score_overlap_gains([{**ROW, "model": "no-such-model"}])
    assert g["skipped"] and "model" in g["skipped"] and "modeled_gain" not in g


@pytest.mark.parametrize("bad,field", [({"accept_length": 4.5}, "overlap_gains.0.accept_length"),
                                       ({"accept_length": None}, "overlap_gains.0.accept_length"),
                                       ({"v1_tok_s": 0}, "overlap_gains.0.v1_tok_s"),
                                       ({"v2_tok_s": float("nan")}, "overlap_gains.0.v2_tok_s"),
                                       ({"steps": 0}, "overlap_gains.0.steps"),
                                       ({"batch": True}, "overlap_gains.0.batch"),
                                       ({"model": 3}, "overlap_gains.0.model"),
                                       ({"engine": "vllm"}, "overlap_gains.0.engine"),
                                       ({"requests": 5}, "overlap_gains.0.requests"),
                                       ({"max_running_requests": 1}, "overlap_gains.0.max_running_requests")])
def test_hostile_overlap_rows_are_one_line(run_cli, tmp_path, bad, field):
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"kind": "throughput_sweeps", "overlap_gains": [{**ROW, **bad}]}))
    code, out, err = run_cli("validate", str(f))
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and not out and len(lines) == 1 and field in lines[0], err


def test_a_user_overlap_dataset_round_trips(run_json, run_cli, tmp_path):
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"kind": "throughput_sweeps", "overlap_gains": [ROW]}))
    (g,) = run_json("validate", str(f))["overlap_gains"]
    assert g["id"] == "mine" and g["skipped"] is None and g["published_gain"] == pytest.approx(1.2)
    code, out, _ = run_cli("validate", str(f), "--format", "md")
    assert code == 0 and "Overlap gains (zero-shot): 1 rows" in out and "2,000.0 -> 2,400.0" in out


def test_shipped_pairs_quote_their_numbers():
    """Each shipped pair carries its source, and the quote holds both published throughputs as written."""
    rows = _shipped()
    assert rows, "the published dataset has overlap_gains"
    for r in rows:
        src = r["source"]
        assert src["url"].startswith("https://") and src["quote"], r["id"]
        for k in ("v1_tok_s", "v2_tok_s"):
            v = r[k]
            assert any(t in src["quote"] for t in (f"{v:g}", f"{v:,g}", f"{v:.1f}", f"{v:.2f}", f"{v:,.1f}", f"{v:,.2f}")), (r["id"], k)


def test_shipped_pairs_are_scored():
    v = validate_sweeps()
    scored = [g for g in v.overlap_gains if not g["skipped"]]
    assert len(scored) >= 1 and len(v.overlap_gains) == len(_shipped())
