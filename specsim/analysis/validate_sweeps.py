"""Score the model on published batch sweeps and batch-1 baselines (held-out data).

Protocol (the same for every sweep, as in the issue that asked for it): the accept length is
fixed once, at the smallest published batch, so the modeled speedup matches there; every
larger batch is then predicted with that accept length. Only the first row of each sweep is
used to fit anything (one number: tau); the rest are held out. Baselines are zero-shot: the
presets alone, nothing fitted. Configurations (``configs``: published runs that state their
accept length with each step count, tree shape and batch) are zero-shot too: the measured accept
length goes in, the speedup comes out. Overlap gains (``overlap_gains``: published runs of one
SGLang deployment with speculation on the v1 path and again with the overlap scheduler, spec v2)
are zero-shot too: the model's gain from hiding the cycle's host work against the published one.
Decode steps (``decode_steps``: a plain-decode benchmark's median inter-token latency at each concurrency) are
zero-shot too, scored in :mod:`.validate_decode`. The dataset is ``calibration/datasets/published_batch_sweeps.json``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import SpecsimError

DEFAULT_DATASET = "published_batch_sweeps"
DEFAULT_CTX = 512  # MT-Bench-like prompts plus half the generated tokens, when a sweep states none (assumed)


@dataclass
class SweepScore:
    id: str
    setup: str
    tau: float | None
    rows: list[dict] = field(default_factory=list)
    skipped: str | None = None
    #: a sweep whose source does not state its running-requests cap, scored again under each other reading of it
    #: (``max_running_requests_readings``): {reading: {rows, mape_pct, worst_pct, rows_to_batch_64,
    #: within_12_pct_to_batch_64, held_out: [{batch, error_pct}]}}; not scores
    readings: dict[str, dict] | None = None
    #: the reading scored (the sweep's own ``max_running_requests``), named as in ``readings``
    cap_reading: str | None = None

    @property
    def worst_pct(self) -> float | None:
        held = [abs(r["error_pct"]) for r in self.rows if not r["fitted"]]
        return max(held) if held else None


@dataclass
class ConfigScore:
    """One group of published configurations with measured accept lengths, scored zero-shot."""

    id: str
    setup: str
    rows: list[dict] = field(default_factory=list)
    skipped: str | None = None
    #: a group whose TP the source does not record, scored at each candidate TP: {tp: {rows, mape_pct, worst_pct}}
    tp_range: dict[int, dict] | None = None
    #: the source itself reports these runs as a performance bug: rows shown, kept out of the held-out scores
    source_reports_bug: str | None = None

    @property
    def worst_pct(self) -> float | None:
        """The worst held-out row (rows fitted or filed as a bug by their source are not scores)."""
        return max((abs(r["error_pct"]) for r in self.rows if not r["fitted"] and not r["reported_as_bug"]), default=None)


@dataclass
class SweepValidation:
    dataset: str
    sweeps: list[SweepScore]
    baselines: list[dict]
    configs: list[ConfigScore] = field(default_factory=list)
    #: published v1 -> spec-v2 (overlap scheduler) gains against the modeled ones (:func:`score_overlap_gains`)
    overlap_gains: list[dict] = field(default_factory=list)
    #: published plain decode steps at each concurrency against the modeled ones (:mod:`.validate_decode`)
    decode_steps: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"kind": "validation", "dataset": self.dataset,
                "protocol": "accept length fixed at the smallest batch of each sweep (fitted row); other rows held out; "
                            "baselines zero-shot from presets; configs zero-shot with their measured accept length; "
                            "overlap gains zero-shot (the overlap scheduler on against off, nothing else changed); "
                            "decode steps zero-shot (the plain decode step against the published median ITL)",
                "sweeps": [{"id": s.id, "setup": s.setup, "tau_fitted": s.tau, "skipped": s.skipped,
                            "worst_held_out_error_pct": s.worst_pct, "rows": s.rows,
                            **({"cap_scored": s.cap_reading, "cap_readings": s.readings} if s.readings else {})}
                           for s in self.sweeps],
                "baselines": self.baselines,
                "configs": [{"id": c.id, "setup": c.setup, "skipped": c.skipped, "worst_error_pct": c.worst_pct,
                             "rows": c.rows, **({"tp_range": {str(k): v for k, v in c.tp_range.items()}}
                                                if c.tp_range else {}),
                             **({"source_reports_bug": c.source_reports_bug} if c.source_reports_bug else {})}
                            for c in self.configs],
                "overlap_gains": self.overlap_gains, "decode_steps": self.decode_steps}


def _ctx(sw: dict) -> int:
    if sw.get("ctx"):
        return int(sw["ctx"])
    inp, out = sw.get("input_len"), sw.get("output_len")
    if isinstance(inp, (int, float)) and isinstance(out, (int, float)):
        from .run import run_ctx

        return run_ctx(inp, out)
    return DEFAULT_CTX


def _presets(it: dict) -> tuple[str, str]:
    """(GPU, engine) preset names of a sweep, baseline or configs group: the ``*_preset`` field where the
    source's own name is not a preset."""
    return it.get("gpu_preset") or it["gpu"], it.get("engine_preset") or it["engine"]


def _scenario_kw(it: dict, spec: dict | None = None) -> dict:
    """The one mapping from a dataset item (sweep, configs group or overlap pair) to the model's keyword arguments:
    presets, TP, context, stop strings and the speculation settings, read from ``spec`` (a configs row) or the item
    itself. A tree's verify width is the stated ``num_draft_tokens``, else the engine rule's default for its steps and
    topk (:func:`~specsim.physics.rules.draft_tokens_for`, as ``predict`` derives it); a chain's is steps + 1. Settings
    the source does not state raise a :class:`SpecsimError` naming them, so the item is listed as not scored."""
    gpu, engine = _presets(it)
    spec = it if spec is None else spec
    if spec.get("steps") is None:
        raise SpecsimError(f"{it.get('id', '?')}.steps", None, "the source does not state the draft steps")
    topk = int(spec.get("topk") or 1)
    tokens = spec.get("num_draft_tokens")
    return dict(model=it["model"], gpu=gpu, tp=int(it.get("tp") or 1), engine=engine,
                steps=int(spec["steps"]), topk=topk, ctx=_ctx(it), stop_strings=bool(it.get("stop_strings", False)),
                **({"draft_tokens": int(tokens)} if topk > 1 and tokens is not None else {}),
                **({"mem_fraction": float(it["mem_fraction"])} if it.get("mem_fraction") is not None else {}))


def _running_cap(it: dict, batch: int) -> dict:
    """The ``max_running_requests`` override of a sweep or configs group at ``batch``: the launch's cap when the
    source gives one or it is inferred (``"batch"``: raised to each row's batch, as SpecForge's bench_eagle3
    launches; an integer: that many at once in both runs), else (absent or ``"preset"``) the engine preset's
    default (SGLang: 48 with speculation on, the plain run uncapped)."""
    v = it.get("max_running_requests")
    return {} if v in (None, "preset") else {"max_running_requests": int(batch) if v == "batch" else int(v)}


def _cap_text(it: dict) -> str:
    v = it.get("max_running_requests")
    return ("" if v in (None, "preset") else ", running-requests cap raised to the batch" if v == "batch"
            else f", at most {v} running in both runs")


def _reading_name(v) -> str:
    """A running-cap reading as the sensitivity table names it (absent: the engine preset's default)."""
    if v is None or isinstance(v, str):
        return {"batch": "raised to the batch"}.get(v, "the engine preset's default")
    return f"{int(v)} in both runs"


def _check_cap(v, f: str, readings: bool = False) -> None:
    from ..io.checks import check_int
    from ..physics.schema import Engine, field_range

    if v == "batch" or (readings and v == "preset"):
        return
    if isinstance(v, str):
        allowed = "'batch', 'preset' or " if readings else "'batch' or "
        raise SpecsimError(f, v, f"allowed: {allowed}an integer number of requests")
    check_int(v, f, *field_range(Engine, "max_running_requests"))


MAX_CAP_READINGS = 8
MAX_REQUESTS_PER_SLOT = 1000  # a client's requests per concurrent slot (InferenceX sends 10)


def _scorings(it: dict) -> int:
    """How many times a sweep's rows are scored: once, and once more under each other cap reading it lists."""
    r = it.get("max_running_requests_readings")
    return 1 + (min(len(r), MAX_CAP_READINGS) if isinstance(r, list) else 0)


MAX_SWEEPS = 1000
TOK_S_RANGE = (1e-3, 1e9)  # a published throughput: tok/s, inclusive (a ratio of two stays finite)
MAX_ROWS = 10_000
MAX_SCORED_ROWS = 20_000  # rows of all sweeps, configs and overlap gains together: each is one or two model evaluations


def check_deployment_head(it: dict, f: str) -> None:
    """The fields every dataset item that names a deployment shares: its ``id`` (text), the ``model``, ``gpu`` and
    ``engine`` preset names, and the launch's ``mem_fraction``; one-line errors naming the field ``f.<key>``."""
    from ..io.checks import check_number
    from ..physics.schema import Engine, field_range

    if it.get("id") is not None and not isinstance(it["id"], str):
        raise SpecsimError(f"{f}.id", it["id"], "allowed: a name (text)")
    for k in ("model", "gpu", "engine"):
        if not isinstance(it.get(k), str) or not it[k].strip():
            raise SpecsimError(f"{f}.{k}", it.get(k), "allowed: a preset name (text)")
    if it.get("mem_fraction") is not None:
        check_number(it["mem_fraction"], f"{f}.mem_fraction", *field_range(Engine, "kv_memory_fraction"))


def check_sweeps_dataset(d: dict) -> None:
    """Every field scoring reads, checked once at the boundary: one-line errors naming the field."""
    from ..io.checks import check_int, check_number
    from ..physics.schema import Parallel, Speculation, Workload, field_range

    if d.get("kind") != "throughput_sweeps":
        raise SpecsimError("dataset.kind", d.get("kind"), "allowed: 'throughput_sweeps' (see calibration/README.md)")
    sweeps, bases, configs = d.get("sweeps", []), d.get("baselines", []), d.get("configs", [])
    gains = d.get("overlap_gains", [])
    total = sum(len(x["rows"]) * _scorings(x) for items in (sweeps, configs) if isinstance(items, list)
                for x in items if isinstance(x, dict) and isinstance(x.get("rows"), list))
    total += len(gains) if isinstance(gains, list) else 0  # each pair: one scenario, two evaluations
    if total > MAX_SCORED_ROWS:
        raise SpecsimError("dataset.rows", total, f"rows in all sweeps, configs and overlap gains; allowed: at most {MAX_SCORED_ROWS}")
    for key, items, cap in (("sweeps", sweeps, MAX_SWEEPS), ("baselines", bases, MAX_ROWS), ("configs", configs, MAX_SWEEPS),
                            ("overlap_gains", gains, MAX_ROWS)):
        if not isinstance(items, list) or len(items) > cap:
            raise SpecsimError(f"dataset.{key}", type(items).__name__ if not isinstance(items, list) else len(items),
                               f"allowed: a list of at most {cap} objects")
        for i, it in enumerate(items):
            if not isinstance(it, dict):
                raise SpecsimError(f"dataset.{key}.{i}", it, "allowed: an object")
            f = f"dataset.{key}.{i}"
            check_deployment_head(it, f)
            for k in ("engine_preset", "gpu_preset"):
                if it.get(k) is not None and not isinstance(it[k], str):
                    raise SpecsimError(f"{f}.{k}", it[k], "allowed: a preset name (text)")
            if it.get("tp") is not None:
                check_int(it["tp"], f"{f}.tp", *field_range(Parallel, "tp"))
            for k in ("ctx", "input_len", "output_len"):
                if it.get(k) is not None:
                    check_number(it[k], f"{f}.{k}", 0, field_range(Workload, "ctx")[1])
            if it.get("requests") is not None:
                check_int(it["requests"], f"{f}.requests", 1, 10_000_000)
            for k in ("requests_per_slot", "prefill_counted"):
                if it.get(k) is not None and key != "sweeps":
                    raise SpecsimError(f"{f}.{k}", it[k], "allowed only on a sweep (a finite run of each batch)")
            if it.get("static_batch") and (it.get("requests") is not None or it.get("requests_per_slot") is not None):
                raise SpecsimError(f"{f}.static_batch", True, "allowed: a static batch (one wave of each batch) or a "
                                   "finite run (requests, requests_per_slot), not both", show_value=False)
            if it.get("requests_per_slot") is not None:
                from .run import MAX_REQUESTS

                if it.get("requests") is not None:
                    raise SpecsimError(f"{f}.requests_per_slot", it["requests_per_slot"], "allowed: either requests (one "
                                       "run length for every batch) or requests_per_slot, not both")
                check_int(it["requests_per_slot"], f"{f}.requests_per_slot", 1, MAX_REQUESTS_PER_SLOT)
                most = max((r.get("batch") for _, r in _rows(it, f) if isinstance(r.get("batch"), int)), default=1)
                if int(it["requests_per_slot"]) * most > MAX_REQUESTS:
                    raise SpecsimError(f"{f}.requests_per_slot", it["requests_per_slot"], f"allowed: requests_per_slot x "
                                       f"the largest batch ({most}) <= {MAX_REQUESTS:,} requests in a run")
            if it.get("prefill_counted") is not None:
                if not isinstance(it["prefill_counted"], bool):
                    raise SpecsimError(f"{f}.prefill_counted", it["prefill_counted"], "allowed: true or false")
                if it["prefill_counted"] and not (it.get("requests") or it.get("requests_per_slot")):
                    raise SpecsimError(f"{f}.prefill_counted", True, "allowed with a finite run: give requests or "
                                       "requests_per_slot (a static_batch counts its prefill already)", show_value=False)
                if it["prefill_counted"] and not all(isinstance(it.get(k), (int, float)) and not isinstance(it.get(k), bool)
                                                     for k in ("input_len", "output_len")):
                    raise SpecsimError(f"{f}.prefill_counted", True, "a run that counts its prefill needs input_len and "
                                       "output_len (tokens per request)", show_value=False)
                if it["prefill_counted"]:
                    from .run import check_run_lengths

                    check_run_lengths(it["input_len"], it["output_len"], (f"{f}.input_len", f"{f}.output_len"))
            if it.get("output_spread") is not None:
                from .run import check_spread

                check_spread(it["output_spread"], f"{f}.output_spread")
            if it.get("stop_strings") is not None and not isinstance(it["stop_strings"], bool):
                raise SpecsimError(f"{f}.stop_strings", it["stop_strings"], "allowed: true or false")
            if it.get("static_batch") is not None and not isinstance(it["static_batch"], bool):
                raise SpecsimError(f"{f}.static_batch", it["static_batch"], "allowed: true or false")
            if it.get("max_running_requests") is not None:
                _check_cap(it["max_running_requests"], f"{f}.max_running_requests")
            readings = it.get("max_running_requests_readings")
            if readings is not None:
                if key != "sweeps":
                    raise SpecsimError(f"{f}.max_running_requests_readings", "present", "allowed only on a sweep")
                if not isinstance(readings, list) or not 1 <= len(readings) <= MAX_CAP_READINGS:
                    raise SpecsimError(f"{f}.max_running_requests_readings", readings if not isinstance(readings, list)
                                       else f"{len(readings)} readings", f"allowed: a list of 1 to {MAX_CAP_READINGS} readings")
                for j, v in enumerate(readings):
                    _check_cap(v, f"{f}.max_running_requests_readings.{j}", readings=True)
            _check_dataset_lengths(it, f)
            if key == "configs":
                cands = it.get("tp_candidates")
                if cands is not None:
                    if not isinstance(cands, list) or not 1 <= len(cands) <= 8:
                        raise SpecsimError(f"{f}.tp_candidates", cands, "allowed: a list of 1 to 8 TP sizes")
                    for j, t in enumerate(cands):
                        check_int(t, f"{f}.tp_candidates.{j}", *field_range(Parallel, "tp"))
                bug = it.get("source_reports_bug")
                if bug is not None and (not isinstance(bug, dict) or not isinstance(bug.get("url"), str)
                                        or not isinstance(bug.get("quote"), str)):
                    raise SpecsimError(f"{f}.source_reports_bug", bug, "allowed: an object with a 'url' and a 'quote' (text)")
                _check_config_rows(it, f)
                continue
            if key == "overlap_gains":
                _check_overlap_gain(it, f, _presets(it)[1])
                continue
            if key == "baselines":
                if it.get("batch") is not None:
                    check_int(it["batch"], f"{f}.batch", *field_range(Workload, "batch"))
                if it.get("tok_s") is not None:
                    check_number(it["tok_s"], f"{f}.tok_s", *TOK_S_RANGE)
                continue
            for k in ("steps", "topk", "num_draft_tokens"):  # steps unknown (None): the sweep is skipped, said so
                if it.get(k) is not None:
                    check_int(it[k], f"{f}.{k}", *field_range(Speculation, k))
            for j, r in _rows(it, f):
                check_int(r.get("batch"), f"{f}.rows.{j}.batch", *field_range(Workload, "batch"))
                if r.get("speedup") is not None:
                    check_number(r["speedup"], f"{f}.rows.{j}.speedup", 0, 1e4, lo_open=True)
    from .validate_decode import check_decode_steps, work_units

    decode = d.get("decode_steps", [])
    check_decode_steps(decode)
    work = _work_units(sweeps, configs, gains, bases) + work_units(decode)
    if work > MAX_WORK_UNITS:
        raise SpecsimError("dataset", f"{work:,.0f} units of work", f"the model evaluations its scoring takes (a chain "
                           f"row scored once: 1; a tree of S steps x topk K: 1 + S K^2 / 1000; a sweep's accept-length "
                           f"fit: {FIT_EVALS} of its evaluations); allowed at most {MAX_WORK_UNITS:,}")


MAX_WORK_UNITS = 20_000  # ~1 ms each on one core: a dataset is scored in about 20 s at the most (the
#                          shipped published_batch_sweeps: ~3,100 units, 2.6 s)
FIT_EVALS = 14  # a sweep part's accept-length fit: two endpoints and brentq at xtol 1e-6 (8-13 evaluations counted)


def _eval_units(steps, topk) -> float:
    """One evaluation of a row in chain evaluations: a tree's acceptance and operators grow with steps x topk^2 (timed
    on one core: ~1 ms for a chain, 21 ms at 8 steps x topk 64, 250 ms at 64 x 64)."""
    return 1.0 + int(steps or 1) * int(topk or 1) ** 2 / 1000.0


def _work_units(sweeps: list, configs: list, gains: list, bases: list) -> float:
    """What scoring a checked dataset costs, in chain evaluations: every sweep part (one per dataset of its rows) is
    fitted and its rows scored once and again under each cap reading; a configs group's rows at its TP or at each
    distinct TP candidate; an overlap pair twice; a baseline once."""
    work = float(len(bases))
    for sw in sweeps:
        if sw.get("steps") is None:
            continue  # skipped, said so: nothing is evaluated
        parts = len({r.get("dataset") for r in sw.get("rows", [])}) or 1
        work += _scorings(sw) * (parts * FIT_EVALS + len(sw.get("rows", []))) * _eval_units(sw["steps"], sw.get("topk"))
    for g in configs:
        tps = 1 if g.get("tp") else len(set(g.get("tp_candidates") or []))
        work += tps * sum(_eval_units(r["steps"], r["topk"]) for r in g.get("rows", []))
    return work + sum(2 * _eval_units(g["steps"], g.get("topk")) for g in gains)


MAX_DATASET_LENGTHS = 1000


def _check_dataset_lengths(it: dict, f: str) -> None:
    """``dataset_lengths``: per dataset of the rows, the mean prompt and output tokens per request; a
    ``static_batch`` sweep needs them (or sweep-level ``input_len`` and ``output_len``) for every dataset it scores,
    each a run length :func:`~specsim.analysis.run.predict_run` accepts."""
    from .run import check_run_lengths

    dl = it.get("dataset_lengths")
    if not isinstance(it.get("rows", []), list):
        raise SpecsimError(f"{f}.rows", type(it["rows"]).__name__, f"allowed: a list of at most {MAX_ROWS} objects")
    rows = [r for r in it.get("rows") or [] if isinstance(r, dict)]
    for j, r in enumerate(rows):  # a dataset name keys its lengths and its own accept length: text only
        if r.get("dataset") is not None and not isinstance(r["dataset"], str):
            raise SpecsimError(f"{f}.rows.{j}.dataset", r["dataset"], "allowed: a dataset name (text)")
    if dl is not None:
        if not isinstance(dl, dict) or len(dl) > MAX_DATASET_LENGTHS:
            raise SpecsimError(f"{f}.dataset_lengths", type(dl).__name__ if not isinstance(dl, dict) else len(dl),
                               f"allowed: an object of at most {MAX_DATASET_LENGTHS} datasets")
        names = {r.get("dataset") for r in rows}
        for name, v in dl.items():
            g = f"{f}.dataset_lengths.{str(name)[:60]}"
            if not isinstance(v, dict):
                raise SpecsimError(g, v, "allowed: an object with input_len and output_len (tokens)")
            if name not in names:
                raise SpecsimError(g, name, "no row of this sweep names this dataset", show_value=False)
            check_run_lengths(v.get("input_len"), v.get("output_len"), (f"{g}.input_len", f"{g}.output_len"))
            if v.get("input_len") is None:
                raise SpecsimError(f"{g}.input_len", None, "missing: give input_len and output_len", show_value=False)
    if it.get("static_batch"):
        names = [r.get("dataset") for r in rows] or [None]
        for name in dict.fromkeys(names):
            if name is not None and name in (dl or {}):
                continue  # its own lengths, checked above
            lengths = (it.get("input_len"), it.get("output_len"))
            where = f"{f}.dataset_lengths.{str(name)[:60]}" if name is not None and dl is not None else f
            if lengths[0] is None or lengths[1] is None:
                raise SpecsimError(f"{f}.static_batch", True, f"a static batch counts its prefill: give {where}"
                                   + (" (input_len, output_len)" if where != f else " input_len and output_len"),
                                   show_value=False)
            check_run_lengths(*lengths, (f"{where}.input_len", f"{where}.output_len"))


def _rows(it: dict, f: str):
    """``(index, row)`` of a sweep's or configs group's ``rows``, each checked as it comes: a list of at
    most MAX_ROWS objects."""
    rows = it.get("rows", [])
    if not isinstance(rows, list) or len(rows) > MAX_ROWS:
        raise SpecsimError(f"{f}.rows", type(rows).__name__, f"allowed: a list of at most {MAX_ROWS} objects")
    for j, r in enumerate(rows):
        if not isinstance(r, dict):
            raise SpecsimError(f"{f}.rows.{j}", r, "allowed: an object")
        yield j, r


def _check_config_rows(it: dict, f: str) -> None:
    """The rows of one ``configs`` group: a benchmark name, the speculation settings, the measured accept
    length and both throughputs (or, where the source prints only the ratio, its ``speedup``), each in its
    schema range."""
    from ..io.checks import check_int, check_number
    from ..physics.schema import Speculation, Workload, field_range

    for j, r in _rows(it, f):
        g = f"{f}.rows.{j}"
        if r.get("benchmark") is not None and not isinstance(r["benchmark"], str):
            raise SpecsimError(f"{g}.benchmark", r["benchmark"], "allowed: a name (text)")
        check_int(r.get("batch"), f"{g}.batch", *field_range(Workload, "batch"))
        for k in ("steps", "topk", "num_draft_tokens"):
            check_int(r.get(k), f"{g}.{k}", *field_range(Speculation, k))
        check_number(r.get("accept_length"), f"{g}.accept_length", 1.0, float(r["steps"]) + 1)
        if r.get("speedup") is not None:  # a ratio printed without its throughputs (a figure's read-out)
            given = [k for k in ("baseline_tok_s", "spec_tok_s") if r.get(k) is not None]
            if given:
                raise SpecsimError(f"{g}.{given[0]}", r[given[0]], "allowed: either both throughputs or the speedup, "
                                   "not both (the speedup is their ratio)")
            check_number(r["speedup"], f"{g}.speedup", 0, 1e4, lo_open=True)
            continue
        for k in ("baseline_tok_s", "spec_tok_s"):
            check_number(r.get(k), f"{g}.{k}", *TOK_S_RANGE)


OVERLAP_ENGINES = ("sglang", "sglang-v2")  # the engines whose v1 and spec-v2 paths the pairs compare
OVERLAP_IGNORED = ("requests", "max_running_requests", "static_batch")  # a pair is one steady-state batch


def _check_overlap_gain(it: dict, f: str, engine: str) -> None:
    """One ``overlap_gains`` row: an SGLang engine preset, the speculation settings, the batch, the measured accept
    length (of the v1 run) and both published throughputs, each in its schema range; no run or cap fields (the
    pair is scored as one steady-state batch, so they would be ignored)."""
    from ..io.checks import check_int, check_number
    from ..io.presets import preset_key
    from ..physics.schema import Speculation, Workload, field_range

    if preset_key("engines", engine) not in OVERLAP_ENGINES:
        raise SpecsimError(f"{f}.engine", engine, f"allowed: an SGLang engine preset ({', '.join(OVERLAP_ENGINES)}): "
                           "the pairs compare SGLang's v1 speculative path with spec v2")
    for k in OVERLAP_IGNORED:
        if it.get(k) is not None:
            raise SpecsimError(f"{f}.{k}", it[k], "allowed only on sweeps and configs: an overlap pair is scored as "
                               "one steady-state batch")
    check_int(it.get("batch"), f"{f}.batch", *field_range(Workload, "batch"))
    for k in ("steps", "topk", "num_draft_tokens"):  # num_draft_tokens optional: derived from steps and topk
        if k != "num_draft_tokens" or it.get(k) is not None:
            check_int(it.get(k), f"{f}.{k}", *field_range(Speculation, k))
    check_number(it.get("accept_length"), f"{f}.accept_length", 1.0, float(it["steps"]) + 1)
    for k in ("v1_tok_s", "v2_tok_s"):
        check_number(it.get(k), f"{f}.{k}", *TOK_S_RANGE)


def _by_dataset(sw: dict) -> list[dict]:
    """A sweep whose rows name several datasets is one sweep per dataset (each has its own accept length)."""
    names = [r.get("dataset") for r in sw.get("rows", [])]
    if not any(names):
        return [sw]
    out = []
    lengths = sw.get("dataset_lengths") or {}
    for name in dict.fromkeys(names):
        sub = {**sw, "id": f"{sw.get('id', '?')}/{name}", "rows": [r for r in sw["rows"] if r.get("dataset") == name]}
        if name in lengths:  # this dataset's mean prompt and output tokens
            sub.update(input_len=lengths[name]["input_len"], output_len=lengths[name]["output_len"], ctx=None)
        out.append(sub)
    return out


def _run_spread(it: dict) -> dict:
    """The per-request spreads a finite run is scored with. Only a run that states its output-length spread
    (``output_spread``: 0 where every request decodes the same fixed length) takes the acceptance prior
    (:data:`~specsim.analysis.run.ACCEPT_SPREAD_PRIOR`); elsewhere the unstated length spread would drain both runs and
    the requests are scored equal, as before."""
    from .run import ACCEPT_SPREAD_PRIOR

    v = it.get("output_spread")
    return {"accept_spread": 0.0, "output_spread": 0.0} if v is None else \
        {"accept_spread": ACCEPT_SPREAD_PRIOR, "output_spread": float(v)}


def _spread_text(it: dict) -> str:
    from .run import ACCEPT_SPREAD_PRIOR

    v = it.get("output_spread")
    return "" if v is None else f", per-request spread: output {float(v):g}, acceptance (prior) {ACCEPT_SPREAD_PRIOR:g}"


def score_sweep(sw: dict) -> SweepScore:
    """Fit tau at the smallest batch, predict the rest; a sweep the presets cannot express is skipped."""
    from ..io.presets import get_engine, get_gpu, get_model
    from ..physics.roots import brentq
    from .predict import predict
    from .run import predict_run

    sid = sw.get("id", "?")
    try:
        gpu, engine = _presets(sw)
        get_model(sw["model"]), get_gpu(gpu), get_engine(engine)
        kw = _scenario_kw(sw)
    except (SpecsimError, KeyError, TypeError, ValueError) as exc:
        return SweepScore(sid, str(sw.get("model")), None, skipped=f"not expressible with the presets ({exc})")
    rows = sorted((r for r in sw.get("rows", []) if r.get("speedup") and r.get("batch")), key=lambda r: r["batch"])
    if len(rows) < 2:
        return SweepScore(sid, str(sw.get("model")), None, skipped="fewer than two batch sizes")
    b0 = rows[0]
    # a static batch (offline LLM.generate of one batch at a time) with known lengths: each batch is one wave whose
    # prefill counts in the wall time
    lengths = (sw.get("input_len"), sw.get("output_len"))
    static = bool(sw.get("static_batch")) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in lengths)
    setup = (f"{kw['model']} {kw['gpu']} TP{kw['tp']} {kw['engine']} steps={kw['steps']} topk={kw['topk']} ctx={kw['ctx']}"
             + (" stop strings" if kw.get("stop_strings") else "")
             + (f", a run of {sw['requests']} requests" if sw.get("requests") else "")
             + (f", runs of {sw['requests_per_slot']} x batch requests" if sw.get("requests_per_slot") else "")
             + (f" of {lengths[0]:g} + {lengths[1]:g} tokens, prefill counted" if sw.get("prefill_counted") else "")
             + (f", static batches of {lengths[0]:g} + {lengths[1]:g} tokens, prefill counted" if static else "")
             + _spread_text(sw) + _cap_text(sw))
    hi = kw["steps"] + 1.0  # at most steps + 1 tokens commit per cycle, chain or tree

    requests = sw.get("requests")  # a finite closed-loop run (the benchmark's own), else a steady stream
    per_slot = sw.get("requests_per_slot")  # a run whose client sends that many requests per concurrent slot
    spread = _run_spread(sw)
    prefill = ({"prompt_tokens": float(lengths[0]), "output_tokens": float(lengths[1])}
               if sw.get("prefill_counted") else {})

    def speedup(batch: int, tau: float) -> float:
        cap = _running_cap(sw, batch)
        if static:
            return predict_run(batch, batch=batch, accept=tau, prompt_tokens=float(lengths[0]),
                               output_tokens=float(lengths[1]), **spread, **kw, **cap).speedup
        if requests or per_slot:
            n = int(requests) if requests else int(per_slot) * int(batch)
            return predict_run(n, batch=batch, accept=tau, **prefill, **spread, **kw, **cap).speedup
        return predict(batch=batch, accept=tau, **kw, **cap).speedup

    def miss(tau):
        return speedup(int(b0["batch"]), tau) - float(b0["speedup"])

    lo_m, hi_m = miss(1.0), miss(hi)
    tau = 1.0 if lo_m >= 0 else hi if hi_m <= 0 else brentq(miss, 1.0, hi, xtol=1e-6)
    out = SweepScore(sid, setup, float(tau))
    first = True
    for r in rows:
        x = speedup(int(r["batch"]), tau)
        fitted = first or r["batch"] == b0["batch"]
        out.rows.append({"batch": int(r["batch"]), "published_speedup": float(r["speedup"]),
                         "predicted_speedup": x, "error_pct": 100 * (x / float(r["speedup"]) - 1),
                         "fitted": bool(fitted), "kind": "modeled vs published"})
        first = False
    if sw.get("max_running_requests_readings"):
        out.readings = _cap_readings(sw)
        out.cap_reading = _reading_name(sw.get("max_running_requests"))
    return out


def _cap_readings(sw: dict) -> dict[str, dict]:
    """The sweep scored again under each other reading of its unstated running-requests cap (tau refitted at the
    smallest batch each time): its held-out rows' MAPE, worst and count within 12 %, all and up to batch 64."""
    base = {k: v for k, v in sw.items() if k != "max_running_requests_readings"}
    scored = _reading_name(sw.get("max_running_requests"))
    out = {}
    for v in sw["max_running_requests_readings"]:
        name = _reading_name(v)
        if name in out or name == scored:  # the scored reading, or one listed twice
            continue
        s = score_sweep({**base, "max_running_requests": v})
        held = [r for r in s.rows if not r["fitted"]]
        agg = held_out_aggregate([(r["batch"], abs(r["error_pct"])) for r in held])
        out[name] = {"rows": agg["rows"], "mape_pct": agg["mape_pct"], "worst_pct": agg["worst_pct"],
                     "rows_to_batch_64": agg["rows_to_batch_64"], "within_12_pct_to_batch_64": agg["within_to_batch_64"],
                     "held_out": [{"batch": r["batch"], "error_pct": r["error_pct"]} for r in held]}
    return out


def held_out_aggregate(errs: list[tuple[int, float]]) -> dict:
    """Held-out rows as (batch, absolute % error): their count, MAPE and worst, and the same up to batch 64 with the
    count within 12 % (None where there is no row); the one summary of cap readings in JSON and in the text table."""
    all_e = [e for _, e in errs]
    upto = [e for b, e in errs if b <= SERVING_BATCH_MAX]
    return {"rows": len(all_e), "mape_pct": sum(all_e) / len(all_e) if all_e else None, "worst_pct": max(all_e, default=None),
            "rows_to_batch_64": len(upto), "within_to_batch_64": sum(e <= WITHIN_PCT for e in upto),
            "mape_to_batch_64_pct": sum(upto) / len(upto) if upto else None, "worst_to_batch_64_pct": max(upto, default=None)}


def score_baselines(baselines: list[dict]) -> list[dict]:
    """Zero-shot batch-1 baselines from presets vs published tok/s (rows the presets cannot express are skipped)."""
    from ..output.render import printable
    from .predict import predict

    out = []
    for b in baselines:
        tok = b.get("tok_s")
        if not isinstance(tok, (int, float)) or not math.isfinite(tok) or tok <= 0:
            continue
        try:
            gpu, engine = _presets(b)
            p = predict(model=b["model"], gpu=gpu, tp=int(b.get("tp") or 1), engine=engine,
                        batch=int(b.get("batch") or 1), ctx=int(b.get("ctx") or DEFAULT_CTX))
        except (SpecsimError, KeyError, TypeError, ValueError):
            continue
        out.append({"id": b.get("id"), "setup": f"{b['model']} {gpu} TP{b.get('tp') or 1} {engine}",
                    "published_tok_s": float(tok), "predicted_tok_s": p.baseline_tok_s,
                    "error_pct": 100 * (p.baseline_tok_s / float(tok) - 1), "fitted": False,
                    **({"caveat": printable(str(b["caveat"])[:500])} if b.get("caveat") else {})})
    return out


def score_overlap_gains(items: list[dict]) -> list[dict]:
    """Zero-shot: each published v1 -> spec-v2 pair against the model's gain from the overlap scheduler alone (the
    same scenario with ``overlap_scheduler`` off, then on), at the row's batch and accept length. Rows the presets
    cannot express (a model, GPU or engine without a preset) are returned with ``skipped`` and no score."""
    from .build import build_scenario
    from .predict import evaluate
    from .whatif import edit_scenario

    out = []
    for i, it in enumerate(items):
        kw = _scenario_kw(it)  # steps, topk and the rest were checked at the boundary
        row = {"id": it.get("id") or f"overlap_gains.{i}", "setup": f"{it['model']} {kw['gpu']} TP{kw['tp']} {kw['engine']} "
               f"steps={kw['steps']} topk={kw['topk']}" + (f" tokens={kw['draft_tokens']}" if "draft_tokens" in kw else "")
               + f", batch {it['batch']}", "batch": int(it["batch"]), "accept_length": float(it["accept_length"]),
               "published_gain": float(it["v2_tok_s"]) / float(it["v1_tok_s"]), "kind": "modeled vs published"}
        try:
            sc = build_scenario(None, batch=int(it["batch"]), accept=float(it["accept_length"]), **kw)
        except SpecsimError as exc:
            out.append({**row, "skipped": f"not expressible with the presets ({exc})"})
            continue
        off, on = (evaluate(edit_scenario(sc, lambda d, v=v: d["engine"].update(overlap_scheduler=v))) for v in (False, True))
        gain = on.tok_s / off.tok_s
        out.append({**row, "modeled_gain": gain, "error_pct": 100 * (gain / row["published_gain"] - 1),
                    "modeled_v1_tok_s": off.tok_s, "modeled_v2_tok_s": on.tok_s,
                    "published_v1_tok_s": float(it["v1_tok_s"]), "published_v2_tok_s": float(it["v2_tok_s"]),
                    "skipped": None})
    return out


def _config_rows(group: dict, tp: int) -> list[dict]:
    """The rows of a ``configs`` group scored at ``tp``: each measured accept length in, the speedup out."""
    from .predict import predict
    from .run import predict_run

    requests = group.get("requests")
    fit = group.get("fit") if isinstance(group.get("fit"), dict) else {}
    fitted_trees = fit.get("rows") == "trees"  # those rows set an engine parameter: not held out
    out = []
    for r in group.get("rows", []):
        kw = {**_scenario_kw(group, r), "tp": tp, "batch": int(r["batch"]), "accept": float(r["accept_length"]),
              **_running_cap(group, int(r["batch"]))}
        x = (predict_run(int(requests), **kw, **_run_spread(group)) if requests else predict(**kw)).speedup
        pub = float(r["speedup"]) if r.get("speedup") is not None else float(r["spec_tok_s"]) / float(r["baseline_tok_s"])
        out.append({"benchmark": r.get("benchmark"), "batch": int(r["batch"]), "steps": int(r["steps"]),
                    "topk": int(r["topk"]), "num_draft_tokens": int(r["num_draft_tokens"]),
                    "accept_length": float(r["accept_length"]), "published_speedup": pub,
                    "predicted_speedup": x, "error_pct": 100 * (x / pub - 1),
                    "fitted": bool(fitted_trees and int(r["topk"]) > 1), "reported_as_bug": False,
                    "kind": "modeled vs published (measured accept length)"})
    return out


def score_configs(group: dict) -> ConfigScore:
    """Every row of a ``configs`` group, zero-shot: its measured accept length in, the speedup out (a
    finite run when the group states its ``requests``). A group without a stated TP is not scored; with
    ``tp_candidates`` (the TPs its weights fit) its error at each of them is reported as a range."""
    from ..io.presets import get_engine, get_gpu, get_model

    gid = group.get("id", "?")
    tp, requests = group.get("tp"), group.get("requests")
    gpu, engine = _presets(group)
    setup = (f"{group['model']} {gpu} TP{tp if tp else '?'} {engine}" + (f", ctx {group['ctx']}" if group.get("ctx") else "")
             + (f", a run of {requests} requests" if requests else "") + _spread_text(group) + _cap_text(group))
    try:
        get_model(group["model"]), get_gpu(gpu), get_engine(engine)
    except (SpecsimError, KeyError, TypeError, ValueError) as exc:
        return ConfigScore(gid, setup, skipped=f"not expressible with the presets ({exc})")
    bug = group.get("source_reports_bug")
    bug_text = f"{bug['url']}: {bug['quote']}" if bug else None
    if tp:
        try:
            rows = _config_rows(group, int(tp))
        except SpecsimError as exc:  # e.g. a TP that does not divide the heads: the group, not the run, fails
            return ConfigScore(gid, setup, skipped=f"not expressible with the presets ({exc})")
        for r in rows:
            r["reported_as_bug"] = bool(bug)
        return ConfigScore(gid, setup, rows, source_reports_bug=bug_text)
    out = ConfigScore(gid, setup, skipped=f"TP not recorded: {group.get('tp_note') or 'no tp field'}",
                      source_reports_bug=bug_text)
    cands = list(dict.fromkeys(group.get("tp_candidates") or []))  # a TP given twice is scored once
    if cands:
        out.tp_range = {}
        for t in cands:
            try:
                errs = [abs(r["error_pct"]) for r in _config_rows(group, int(t))]
            except SpecsimError as exc:
                out.tp_range[int(t)] = {"rows": 0, "mape_pct": None, "worst_pct": None, "error": str(exc)}
                continue
            out.tp_range[int(t)] = {"rows": len(errs), "mape_pct": sum(errs) / len(errs) if errs else None,
                                    "worst_pct": max(errs, default=None)}
    return out


def validate_sweeps(dataset: str | None = None) -> SweepValidation:
    """Score every sweep and baseline of a throughput-sweeps dataset (built-in by default)."""
    from pathlib import Path

    from ..io.presets import data_root
    from ..io.safe_read import loads_bounded, read_json_file

    name = dataset or DEFAULT_DATASET
    if name == "published-batch-sweeps" and not Path(name).exists():  # the alias is_sweeps_dataset takes
        name = DEFAULT_DATASET
    if Path(name).exists():
        d = read_json_file(name, "dataset")
    else:
        cand = data_root("calibration").joinpath("datasets", f"{name}.json")
        if not cand.is_file():
            from ..io.packagedata import unknown_dataset

            raise unknown_dataset(name)
        d = loads_bounded(cand.read_text(encoding="utf-8"), "dataset", name)
    if not isinstance(d, dict):
        raise SpecsimError("dataset", name, "must be a JSON object")
    check_sweeps_dataset(d)
    if d.get("kind") != "throughput_sweeps":
        raise SpecsimError("dataset", dataset, "is not a throughput_sweeps dataset (see calibration/README.md)")
    from .validate_decode import score_decode_steps

    sweeps = [score_sweep(part) for sw in d.get("sweeps", []) for part in _by_dataset(sw)]
    return SweepValidation(d.get("name", dataset or DEFAULT_DATASET), sweeps, score_baselines(d.get("baselines", [])),
                           [score_configs(g) for g in d.get("configs", [])], score_overlap_gains(d.get("overlap_gains", [])),
                           score_decode_steps(d.get("decode_steps", [])))


def is_sweeps_dataset(name: str) -> bool:
    """Whether ``name`` (built-in name or path) is a throughput-sweeps dataset."""
    from pathlib import Path

    if name in (DEFAULT_DATASET, "published-batch-sweeps"):
        return True
    f = Path(name)
    if not f.is_file() or f.stat().st_size > 64 * 2**20:
        return False
    try:
        with open(f, "rb") as fh:
            head = fh.read(4096).decode("utf-8", "replace")
    except OSError:
        return False
    return '"throughput_sweeps"' in head


SERVING_BATCH_MAX = 64  # the batches the serving-batch issue scores (its "every batch up to 64")
WITHIN_PCT = 12.0


def held_out_errors(v: SweepValidation, max_batch: int | None = None) -> list[float]:
    """Absolute % errors of every held-out sweep row (up to ``max_batch`` requests when given)."""
    return [abs(r["error_pct"]) for s in v.sweeps for r in s.rows
            if not r["fitted"] and (max_batch is None or r["batch"] <= max_batch)]


def held_out_summary(v: SweepValidation) -> str:
    """One line: every held-out sweep row, and those up to batch 64 with how many are within 12 %."""
    errs, upto = held_out_errors(v), held_out_errors(v, SERVING_BATCH_MAX)
    if not errs:
        return ""
    out = f"held-out sweep rows: {len(errs)}, MAPE {sum(errs) / len(errs):.1f} %, worst {max(errs):.1f} %"
    if upto:
        within = sum(e <= WITHIN_PCT for e in upto)
        out += (f"; up to batch {SERVING_BATCH_MAX}: {len(upto)} rows, {within} within {WITHIN_PCT:g} %, "
                f"MAPE {sum(upto) / len(upto):.1f} %, worst {max(upto):.1f} %")
    return out


def config_errors(v: SweepValidation, tree: bool | None = None, groups: list[ConfigScore] | None = None) -> list[float]:
    """Absolute % errors of every held-out configuration (of ``groups``, default all); ``tree``: only topk > 1
    (True) or chains (False)."""
    return [abs(r["error_pct"]) for c in (v.configs if groups is None else groups) for r in c.rows
            if not r["fitted"] and not r["reported_as_bug"] and (tree is None or (r["topk"] > 1) == tree)]


def cap_reading_summary(v: SweepValidation) -> list[tuple[str, list[list]]]:
    """The sweeps whose running-requests cap is not stated, grouped by the readings they list: per group a title
    and, per reading (the scored one first), the held-out rows up to batch 64 within 12 %, their MAPE and worst,
    and the MAPE of every held-out row."""
    groups: dict[tuple, list[SweepScore]] = {}
    for s in v.sweeps:
        if s.readings:
            groups.setdefault((s.cap_reading, *s.readings), []).append(s)
    out = []
    for sweeps in groups.values():
        agg: dict[str, list] = {}
        for s in sweeps:
            held = [r for r in s.rows if not r["fitted"]]
            agg.setdefault(f"{s.cap_reading} (scored)", []).extend((r["batch"], abs(r["error_pct"])) for r in held)
            for name, x in s.readings.items():
                agg.setdefault(name, []).extend((r["batch"], abs(r["error_pct"])) for r in x["held_out"])
        rows = []
        for name, errs in agg.items():
            a = held_out_aggregate(errs)
            rows.append([name, f"{a['within_to_batch_64']} of {a['rows_to_batch_64']}",
                         f"{a['mape_to_batch_64_pct']:.1f} / {a['worst_to_batch_64_pct']:.1f}" if a["rows_to_batch_64"] else "-",
                         f"{a['mape_pct']:.1f}" if a["rows"] else "-"])
        bases = list(dict.fromkeys(s.id.split("/")[0] for s in sweeps))
        title = (f"{bases[0]}" if len(bases) == 1 else f"{bases[0]} and {len(bases) - 1} more") + f" ({len(sweeps)} series)"
        out.append((title, rows))
    return out


CAP_HEADERS = ["running-requests cap (not stated: each reading)", f"held out to batch {SERVING_BATCH_MAX} within {WITHIN_PCT:g} %",
               f"MAPE / worst % to batch {SERVING_BATCH_MAX}", "MAPE % of all held-out rows"]


OVERLAP_SKIPPED = "overlap gains not scored: "
OVERLAP_HEADERS = ["pair", "setup", "accept (measured)", "published v1 -> v2 tok/s", "published gain %", "modeled gain %",
                   "error % (v2/v1)"]
OVERLAP_TITLE = ("SGLang speculation on the v1 path, then with the overlap scheduler (spec v2): the published gain "
                 "against the model's, the overlap scheduler alone switched (zero-shot, nothing fitted)")


def _overlap_cells(g: dict) -> list:
    return [g["id"], g["setup"], f"{g['accept_length']:.2f}",
            f"{g['published_v1_tok_s']:,.1f} -> {g['published_v2_tok_s']:,.1f}", f"{100 * (g['published_gain'] - 1):+.1f}",
            f"{100 * (g['modeled_gain'] - 1):+.1f}", f"{g['error_pct']:+.1f}"]


def _row_status(r: dict) -> str:
    return "fit" if r["fitted"] else ("bug (source)" if r["reported_as_bug"] else "held out")


def _tp_range_text(c: ConfigScore) -> str:
    return ", ".join(f"TP{t}: {x['mape_pct']:.1f} / {x['worst_pct']:.1f}" for t, x in sorted(c.tp_range.items())
                     if x["mape_pct"] is not None)


def _mape(errs: list[float]) -> str:
    return f"{len(errs)} rows, MAPE {sum(errs) / len(errs):.1f} %, worst {max(errs):.1f} %" if errs else "no rows"


def sweeps_text(v: SweepValidation) -> str:
    """Text tables: each sweep's rows (fitted row marked) and the zero-shot baselines."""
    import textwrap

    from ..output.render import printable, table_text

    parts = []
    for s in v.sweeps:
        if s.skipped:
            continue
        rows = [[r["batch"], r["published_speedup"], r["predicted_speedup"], r["error_pct"], "fit" if r["fitted"] else "held out"]
                for r in s.rows]
        parts.append(table_text(["batch", "published x", "modeled x", "error %", ""], rows,
                                f"{s.id}: {s.setup}, tau fitted at the smallest batch = {s.tau:.2f}"))
    skipped = [s for s in v.sweeps if s.skipped]
    if v.baselines:
        rows = [[b["setup"], b["published_tok_s"], b["predicted_tok_s"], b["error_pct"]] for b in v.baselines]
        parts.append(table_text(["baseline (batch 1)", "published tok/s", "modeled tok/s", "error %"], rows,
                                "zero-shot baselines from presets (nothing fitted)")
                     + "".join("\n" + textwrap.fill(f"caveat, {b['setup']}: {b['caveat']}", 100, initial_indent="  ",
                                                     subsequent_indent="    ") for b in v.baselines if b.get("caveat")))
    for c in v.configs:
        if c.skipped:
            continue
        rows = [[r["benchmark"] or "-", r["batch"], f"{r['steps']},{r['topk']},{r['num_draft_tokens']}", r["accept_length"],
                 r["published_speedup"], r["predicted_speedup"], r["error_pct"], _row_status(r)]
                for r in c.rows]
        note = "; its source reports these runs as a performance bug: shown, not scored" if c.source_reports_bug else ""
        parts.append(table_text(["benchmark", "batch", "steps,topk,tokens", "accept (measured)", "published x", "modeled x",
                                 "error %", ""], rows, f"{c.id}: {c.setup}, the measured accept length in{note}"))
    gains = [g for g in v.overlap_gains if not g["skipped"]]
    if gains:
        parts.append(table_text(OVERLAP_HEADERS, [_overlap_cells(g) for g in gains], OVERLAP_TITLE))
    from .validate_decode import decode_steps_text

    parts += decode_steps_text(v.decode_steps)
    summary = held_out_summary(v)
    if summary:
        parts.append(summary)
    if gains:
        parts.append(f"overlap gains (zero-shot): {_mape([abs(g['error_pct']) for g in gains])}")
    if any(c.rows for c in v.configs):
        parts.append(f"configurations held out (measured accept length): {_mape(config_errors(v))}; chains "
                     f"{_mape(config_errors(v, False))}; trees (topk > 1) {_mape(config_errors(v, True))}")
    skipped_c = [c for c in v.configs if c.skipped]
    if skipped_c:
        parts.append(printable("configuration groups not scored: " + "; ".join(f"{c.id} ({c.skipped})" for c in skipped_c)))
    ranged = [c for c in v.configs if c.tp_range]
    if ranged:
        parts.append(table_text(["group (TP not recorded)", "at each TP that fits: MAPE / worst %"],
                                [[c.id, _tp_range_text(c)] for c in ranged],
                                "sensitivity only, not counted as held-out scores"))
    for title, rows in cap_reading_summary(v):
        parts.append(table_text(CAP_HEADERS, rows, f"{title}: the running-requests cap is not stated; the scored reading, "
                                "then the others as a sensitivity, not scores (--json: each series)"))
    if skipped:
        parts.append(f"skipped {len(skipped)} sweeps the presets cannot express: " + printable(", ".join(s.id for s in skipped))
                     + " (--json gives each reason)")
    skipped_g = [g for g in v.overlap_gains if g["skipped"]]
    if skipped_g:
        parts.append(printable(OVERLAP_SKIPPED + "; ".join(f"{g['id']} ({g['skipped']})" for g in skipped_g)))
    return "\n\n".join(parts)


def sweeps_markdown(v: SweepValidation) -> str:
    """The README's accuracy tables: each expressible sweep's rows, then the zero-shot baselines (Markdown)."""
    from ..output.render import table_markdown

    parts = []
    rows = []
    for s in v.sweeps:
        if s.skipped:
            continue
        held = [r for r in s.rows if not r["fitted"]]
        cells = ", ".join(f"{r['batch']}: {r['published_speedup']:.2f} / {r['predicted_speedup']:.2f} ({r['error_pct']:+.0f} %)"
                          for r in s.rows)
        worst = max((abs(r["error_pct"]) for r in held), default=float("nan"))
        rows.append([s.id, s.setup, f"{s.tau:.2f}", cells, f"{worst:.1f}"])
    if rows:
        parts.append(table_markdown(["sweep", "setup", "tau (fitted at smallest batch)",
                                     "batch: published / modeled speedup (error)", "worst held-out %"], rows))
    if v.baselines:
        parts.append(table_markdown(["batch-1 baseline (zero-shot)", "published tok/s", "modeled tok/s", "error %"],
                                    [[b["setup"], b["published_tok_s"], b["predicted_tok_s"], b["error_pct"]] for b in v.baselines]))
    summary = held_out_summary(v)
    if summary:
        parts.append(summary[0].upper() + summary[1:] + ".")
    scored = [c for c in v.configs if not c.skipped]
    if scored:
        rows = []
        for c in scored:
            if c.source_reports_bug:
                shown = _mape([abs(r["error_pct"]) for r in c.rows])  # shown, not a held-out score
                rows.append([c.id, c.setup, f"the source reports a performance bug, not scored ({shown})", "-"])
                continue
            ch, tr = config_errors(v, False, [c]), config_errors(v, True, [c])
            fitted = sum(r["fitted"] for r in c.rows)
            rows.append([c.id, c.setup, _mape(ch), _mape(tr) if tr or not fitted else f"{fitted} rows fitted"])
        parts.append(table_markdown(["configurations (measured accept length)", "setup", "chains (topk 1), held out",
                                     "trees (topk > 1), held out"], rows))
    gains = [g for g in v.overlap_gains if not g["skipped"]]
    if gains:
        parts.append(f"*{OVERLAP_TITLE}*\n\n" + table_markdown(OVERLAP_HEADERS, [_overlap_cells(g) for g in gains])
                     + f"\n\nOverlap gains (zero-shot): {_mape([abs(g['error_pct']) for g in gains])}.")
    skipped_g = [g for g in v.overlap_gains if g["skipped"]]
    if skipped_g:
        parts.append(table_markdown(["overlap pair not scored", "why"], [[g["id"], g["skipped"]] for g in skipped_g]))
    for title, rows in cap_reading_summary(v):
        parts.append(table_markdown([f"{title}: {CAP_HEADERS[0]}", *CAP_HEADERS[1:]], rows))
    ranged = [c for c in v.configs if c.tp_range]
    if ranged:
        parts.append(table_markdown(["TP not recorded (sensitivity, not scored)", "setup", "speedup MAPE / worst % at each TP that fits"],
                                    [[c.id, c.setup, _tp_range_text(c)] for c in ranged]))
    from .validate_decode import decode_steps_markdown

    parts += decode_steps_markdown(v.decode_steps)
    return "\n\n".join(parts)
