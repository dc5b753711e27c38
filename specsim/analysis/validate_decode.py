"""Score plain decode (no speculation) against published serving benchmarks at each concurrency (``decode_steps`` of a
throughput-sweeps dataset): the denominator of every speedup, at the batches and contexts a service runs.

A group is one published serving benchmark of one deployment (model, GPU, TP, engine preset): fixed-length requests
(``input_len`` prompt, ``output_len`` generated tokens) kept ``concurrency`` at a time by a closed-loop client, with the
median inter-token latency of each point. At steady state the median ITL is one decode step of the running batch at
the mean context ``input_len + output_len / 2``; the model's is ``baseline_step_ms`` at that batch and context, the
engine's KV pool holding what it holds (``baseline_running_requests``). A point may give instead the whole run's
output throughput (``output_tok_s``, the run's output tokens over its wall time) or its requests' mean time per output
token after the first (``tpot_mean_ms``, as serving benchmarks report TPOT): it is scored as the finite run it was,
``requests_per_slot x concurrency`` requests on ``concurrency`` slots, each prompt's prefill counted
(:func:`~specsim.analysis.run.predict_run`), their lengths spread by the group's ``output_spread``. Zero-shot: the
presets alone, nothing fitted.

A new request joins the running batch every ``output_len / running`` steps (``running``: the requests the engine runs at
once, the concurrency or fewer where the KV pool holds fewer) and its prefill rides in the step that takes it. Where that
is one step in two or more (``running / output_len >= 0.5``), the median step carries a prefill as well as the decodes
and is no longer a decode step: such median-ITL points are shown, not scored.

Errors are in the speed sense for both metrics, as the baselines' and sweeps' are: modeled speed over published, less
1 (a median ITL's speed is 1 / ITL), so a negative error is a model slower than the measurement.
"""

from __future__ import annotations

from ..errors import SpecsimError

MAX_GROUPS = 100
MAX_POINTS = 1000
METRICS = {"itl_median_ms": "median ITL, ms", "output_tok_s": "output tok/s, whole run",
           "tpot_mean_ms": "mean TPOT, ms, whole run"}
RUN_METRICS = ("output_tok_s", "tpot_mean_ms")  # scored as the finite run the benchmark was
TIME_METRICS = ("itl_median_ms", "tpot_mean_ms")  # a time: its speed is its inverse
PREFILL_SHARE_MAX = 0.5  # new requests per step past which the median step carries a prefill (module docstring)
WITHIN_PCT = 10.0  # the zero-shot baseline bar of the serving-batch issue
SERVING_BATCH_MAX = 64  # the serving batches the bar covers ("every batch up to 64")


def prefill_share(running: float, output_len: float) -> float:
    """New requests per decode step of a closed-loop run of fixed-length requests, ``running`` of them at once:
    running / output_len."""
    return float(running) / float(output_len)


def check_decode_steps(groups: object) -> None:
    """Every field scoring reads, checked once at the boundary: one-line errors naming the field."""
    from ..io.checks import check_int, check_number
    from ..io.presets import engine_names, preset_key
    from ..physics.schema import Parallel, Workload, field_range
    from .build import DTYPES
    from .run import MAX_REQUESTS, check_run_lengths
    from .validate_sweeps import MAX_REQUESTS_PER_SLOT, check_deployment_head

    if not isinstance(groups, list) or len(groups) > MAX_GROUPS:
        raise SpecsimError("dataset.decode_steps", type(groups).__name__ if not isinstance(groups, list) else len(groups),
                           f"allowed: a list of at most {MAX_GROUPS} objects")
    ctx_hi = field_range(Workload, "ctx")[1]
    for i, g in enumerate(groups):
        f = f"dataset.decode_steps.{i}"
        if not isinstance(g, dict):
            raise SpecsimError(f, g, "allowed: an object")
        check_deployment_head(g, f)
        cmp = g.get("compare_engine")
        if cmp is not None and (not isinstance(cmp, str) or preset_key("engines", cmp) is None):
            raise SpecsimError(f"{f}.compare_engine", cmp, f"allowed: an engine preset ({', '.join(engine_names())})")
        check_int(g.get("tp", 1), f"{f}.tp", *field_range(Parallel, "tp"))
        if g.get("dtype") is not None and g["dtype"] not in DTYPES:
            raise SpecsimError(f"{f}.dtype", g["dtype"], f"allowed: {', '.join(DTYPES)} (the weights' dtype, as --dtype)")
        if g.get("requests_per_slot") is not None:
            check_int(g["requests_per_slot"], f"{f}.requests_per_slot", 1, MAX_REQUESTS_PER_SLOT)
        if g.get("output_spread") is not None:
            from .run import check_spread

            check_spread(g["output_spread"], f"{f}.output_spread")
            if not any(isinstance(p, dict) and any(p.get(m) is not None for m in RUN_METRICS) for p in g.get("points") or []):
                raise SpecsimError(f"{f}.output_spread", g["output_spread"], "allowed with whole-run points only "
                                   "(output_tok_s, tpot_mean_ms: a finite run's lengths; a median ITL is one step)")
        pts = g.get("points")
        if not isinstance(pts, list) or not 1 <= len(pts) <= MAX_POINTS:
            raise SpecsimError(f"{f}.points", type(pts).__name__ if not isinstance(pts, list) else len(pts),
                               f"allowed: a list of 1 to {MAX_POINTS} objects")
        for j, p in enumerate(pts):
            h = f"{f}.points.{j}"
            if not isinstance(p, dict):
                raise SpecsimError(h, p, "allowed: an object")
            if p.get("workload") is not None and not isinstance(p["workload"], str):
                raise SpecsimError(f"{h}.workload", p["workload"], "allowed: a name (text)")
            check_int(p.get("concurrency"), f"{h}.concurrency", *field_range(Workload, "batch"))
            check_number(p.get("input_len"), f"{h}.input_len", 0, ctx_hi)
            if any(p.get(m) is not None for m in RUN_METRICS):  # a finite run of these lengths: the run's own bounds
                check_run_lengths(p["input_len"], p.get("output_len"), (f"{h}.input_len", f"{h}.output_len"))
            check_number(p.get("output_len"), f"{h}.output_len", 1, ctx_hi)
            if float(p["input_len"]) + float(p["output_len"]) > ctx_hi:
                raise SpecsimError(f"{h}.output_len", p["output_len"], f"allowed: input_len + output_len <= {ctx_hi:g} tokens")
            given = [m for m in METRICS if p.get(m) is not None]
            if len(given) != 1:
                raise SpecsimError(f"{h}", ", ".join(given) or "neither", f"allowed: exactly one of {', '.join(METRICS)}",
                                   show_value=bool(given))
            m = given[0]
            check_number(p[m], f"{h}.{m}", 0, 1e6 if m in TIME_METRICS else 1e9, lo_open=True)
            if m in RUN_METRICS:
                if g.get("requests_per_slot") is None:
                    raise SpecsimError(f"{f}.requests_per_slot", None, f"missing: a point gives a whole run's {m}, "
                                       "so give the requests the run sent per concurrent slot", show_value=False)
                n = int(g["requests_per_slot"]) * int(p["concurrency"])
                if n > MAX_REQUESTS:
                    raise SpecsimError(f"{h}.concurrency", p["concurrency"], f"allowed: requests_per_slot x concurrency "
                                       f"<= {MAX_REQUESTS:,} requests in a run (here {n:,})")


def work_units(groups: list) -> float:
    """Model evaluations scoring takes: one per median-ITL point and engine reading, a finite run's two per point (its
    prefill and its decode)."""
    return float(sum(sum(2 if any(p.get(m) is not None for m in RUN_METRICS) else 1 for p in g["points"])
                     * (2 if g.get("compare_engine") else 1) for g in groups))


def _metric(p: dict) -> str:
    return next(m for m in METRICS if p.get(m) is not None)


def _modeled(g: dict, engine: str, p: dict):
    """(mean context, the modeled value of the point's metric, requests running at once) on ``engine``."""
    from .predict import predict
    from .run import predict_run, run_ctx

    ctx = run_ctx(p["input_len"], p["output_len"])
    kw = {"model": g["model"], "gpu": g["gpu"], "tp": int(g.get("tp", 1)), "engine": engine, "batch": int(p["concurrency"]),
          "ctx": ctx}
    if g.get("mem_fraction") is not None:
        kw["mem_fraction"] = float(g["mem_fraction"])
    if g.get("dtype") is not None:
        kw["dtype"] = g["dtype"]
    if _metric(p) == "itl_median_ms":
        r = predict(**kw)
        return ctx, r.baseline_step_ms, r.baseline_running_requests
    run = predict_run(int(g["requests_per_slot"]) * int(p["concurrency"]), prompt_tokens=float(p["input_len"]),
                      output_tokens=float(p["output_len"]), accept_spread=0.0,
                      output_spread=float(g.get("output_spread") or 0.0), **kw)
    running = (run.baseline_waves or run.waves)[0][0]  # the plain run's first wave: the requests it runs at once
    return ctx, run.baseline_tok_s if _metric(p) == "output_tok_s" else run.baseline_tpot_ms, running


def score_decode_steps(groups: list[dict]) -> list[dict]:
    """Each group's points: the modeled plain decode step against the published median ITL (zero-shot); a group the
    presets cannot express is returned with ``skipped``."""
    out = []
    for i, g in enumerate(groups):
        gid = g.get("id") or f"decode_steps.{i}"
        setup = f"{g['model']} {g['gpu']} TP{int(g.get('tp', 1))} {g['engine']}" + (f" {g['dtype']}" if g.get("dtype") else "")
        rows = []
        try:
            for p in g["points"]:
                metric = _metric(p)
                pub = float(p[metric])
                ctx, x, running = _modeled(g, g["engine"], p)
                itl = metric == "itl_median_ms"
                running = min(int(running), int(p["concurrency"]))
                row = {"workload": p.get("workload"), "input_len": float(p["input_len"]), "output_len": float(p["output_len"]),
                       "concurrency": int(p["concurrency"]), "ctx": ctx, "metric": metric, "published": pub,
                       "predicted": x, "error_pct": speed_error_pct(metric, x, pub), "running_requests": running,
                       "scored": not itl or prefill_share(running, p["output_len"]) < PREFILL_SHARE_MAX,
                       "kind": f"modeled vs published ({METRICS[metric]})"}
                if g.get("compare_engine"):
                    x2 = _modeled(g, g["compare_engine"], p)[1]
                    row["compare_predicted"], row["compare_error_pct"] = x2, speed_error_pct(metric, x2, pub)
                rows.append(row)
        except SpecsimError as exc:
            out.append({"id": gid, "setup": setup, "skipped": f"not expressible with the presets ({exc})", "rows": []})
            continue
        out.append({"id": gid, "setup": setup, "engine": g["engine"], "compare_engine": g.get("compare_engine"),
                    "skipped": None, "rows": rows, **summary(rows)})
    return out


def speed_error_pct(metric: str, modeled: float, published: float) -> float:
    """Modeled speed over published, less 1, in %: a time (median ITL) is inverted first."""
    ratio = published / modeled if metric in TIME_METRICS else modeled / published
    return 100 * (ratio - 1)


def summary(rows: list[dict]) -> dict:
    """The scored points' count, MAPE, worst and count within 10 %, and the same for the comparison engine."""
    sc = [r for r in rows if r["scored"]]
    errs = [abs(r["error_pct"]) for r in sc]
    upto = [abs(r["error_pct"]) for r in sc if r["concurrency"] <= SERVING_BATCH_MAX]
    out = {"points_scored": len(sc), "mape_pct": sum(errs) / len(errs) if errs else None,
           "worst_pct": max(errs, default=None), "within_10_pct": sum(e <= WITHIN_PCT for e in errs),
           "points_to_batch_64": len(upto), "within_10_pct_to_batch_64": sum(e <= WITHIN_PCT for e in upto),
           "worst_to_batch_64_pct": max(upto, default=None)}
    cmp_errs = [abs(r["compare_error_pct"]) for r in sc if "compare_error_pct" in r]
    if cmp_errs:
        out.update(compare_mape_pct=sum(cmp_errs) / len(cmp_errs), compare_worst_pct=max(cmp_errs))
    return out


def _line(s: dict) -> str:
    if not s["points_scored"]:
        return "no point scored"
    out = (f"{s['points_scored']} points scored, {s['within_10_pct']} within {WITHIN_PCT:g} %, MAPE {s['mape_pct']:.1f} %, "
           f"worst {s['worst_pct']:.1f} %")
    if s["points_to_batch_64"] and s["points_to_batch_64"] < s["points_scored"]:
        out += (f" (to {SERVING_BATCH_MAX} requests: {s['within_10_pct_to_batch_64']} of {s['points_to_batch_64']} within "
                f"{WITHIN_PCT:g} %, worst {s['worst_to_batch_64_pct']:.1f} %)")
    if s.get("compare_mape_pct") is not None:
        out += f"; as {s['compare_engine']}: MAPE {s['compare_mape_pct']:.1f} %, worst {s['compare_worst_pct']:.1f} %"
    return out


def _cells(r: dict) -> list:
    return [r["workload"] or "-", r["concurrency"], r["ctx"], METRICS[r["metric"]], r["published"], r["predicted"],
            r["error_pct"], r["running_requests"], r.get("compare_error_pct", "-"),
            "held out" if r["scored"] else "shown: a prefill in half the steps or more"]


HEADERS = ["workload", "concurrency", "ctx", "metric", "published", "modeled", "error % (speed)", "running (modeled)",
           "error % (compare)", ""]


def decode_steps_text(groups: list[dict]) -> list[str]:
    """One text table per scored group, then a line for each group the presets cannot express."""
    from ..output.render import printable, table_text

    parts = []
    for g in groups:
        if g["skipped"]:
            parts.append(printable(f"decode steps not scored: {g['id']} ({g['skipped']})"))
            continue
        title = (f"{g['id']}: {g['setup']}, plain decode against the published serving benchmark (zero-shot; compare: "
                 f"{g['compare_engine'] or '-'}): {_line(g)}")
        parts.append(table_text(HEADERS, [_cells(r) for r in g["rows"]], title))
    return parts


def decode_steps_markdown(groups: list[dict]) -> list[str]:
    """The README's table: per group and workload, the published / modeled step at each concurrency."""
    from ..output.render import table_markdown

    rows = []
    for g in groups:
        if g["skipped"]:
            continue
        for w in dict.fromkeys((r["workload"], r["ctx"]) for r in g["rows"]):
            pts = [r for r in g["rows"] if (r["workload"], r["ctx"]) == w]
            for metric in dict.fromkeys(r["metric"] for r in pts):
                pm = [r for r in pts if r["metric"] == metric]
                cells = ", ".join(f"{r['concurrency']}: {r['published']:.4g} / {r['predicted']:.4g} "
                                  f"({r['error_pct']:+.0f} %{'' if r['scored'] else ', shown'})" for r in pm)
                rows.append([g["id"], g["setup"], f"{w[0] or '-'} (ctx {w[1]})", METRICS[metric], cells,
                             _line(summary(pm) | {"compare_engine": g["compare_engine"]})])
    if not rows:
        return []
    return [table_markdown(["plain decode at serving concurrency (zero-shot)", "setup", "workload", "metric",
                            "concurrency: published / modeled (speed error)", "scored points"], rows)]
