"""Score the plain decode step against published decode-step times at each concurrency (``decode_steps`` of a
throughput-sweeps dataset): the denominator of every speedup, at the batches and contexts a service runs.

A group is one published serving benchmark of one deployment (model, GPU, TP, engine preset): fixed-length requests
(``input_len`` prompt, ``output_len`` generated tokens) kept ``concurrency`` at a time by a closed-loop client, with the
median inter-token latency of each point. At steady state the median ITL is one decode step of the running batch at
the mean context ``input_len + output_len / 2``; the model's is ``baseline_step_ms`` at that batch and context, the
engine's KV pool holding what it holds (``baseline_running_requests``). Zero-shot: the presets alone, nothing fitted.

A new request arrives every ``output_len / concurrency`` steps and its prefill rides in the step that takes it. Where
that is one step in two or more (``concurrency / output_len >= 0.5``), the median step carries a prefill as well as the
decodes and is no longer a decode step: such points are shown, not scored.
"""

from __future__ import annotations

from ..errors import SpecsimError

MAX_GROUPS = 100
MAX_POINTS = 1000
PREFILL_SHARE_MAX = 0.5  # new requests per step past which the median step carries a prefill (module docstring)
WITHIN_PCT = 10.0  # the zero-shot baseline bar of the serving-batch issue
DTYPES = ("bf16", "fp8", "int4")  # the weight dtypes --dtype takes
SERVING_BATCH_MAX = 64  # the serving batches the bar covers ("every batch up to 64")


def prefill_share(concurrency: float, output_len: float) -> float:
    """New requests per decode step of a closed-loop run of fixed-length requests: concurrency / output_len."""
    return float(concurrency) / float(output_len)


def check_decode_steps(groups: object) -> None:
    """Every field scoring reads, checked once at the boundary: one-line errors naming the field."""
    from ..io.checks import check_int, check_number
    from ..physics.schema import Engine, Parallel, Workload, field_range

    if not isinstance(groups, list) or len(groups) > MAX_GROUPS:
        raise SpecsimError("dataset.decode_steps", type(groups).__name__ if not isinstance(groups, list) else len(groups),
                           f"allowed: a list of at most {MAX_GROUPS} objects")
    ctx_hi = field_range(Workload, "ctx")[1]
    for i, g in enumerate(groups):
        f = f"dataset.decode_steps.{i}"
        if not isinstance(g, dict):
            raise SpecsimError(f, g, "allowed: an object")
        if g.get("id") is not None and not isinstance(g["id"], str):
            raise SpecsimError(f"{f}.id", g["id"], "allowed: a name (text)")
        for k in ("model", "gpu", "engine"):
            if not isinstance(g.get(k), str) or not g[k].strip():
                raise SpecsimError(f"{f}.{k}", g.get(k), "allowed: a preset name (text)")
        for k in ("compare_engine",):
            if g.get(k) is not None and (not isinstance(g[k], str) or not g[k].strip()):
                raise SpecsimError(f"{f}.{k}", g[k], "allowed: a preset name (text)")
        check_int(g.get("tp", 1), f"{f}.tp", *field_range(Parallel, "tp"))
        if g.get("dtype") is not None and g["dtype"] not in DTYPES:
            raise SpecsimError(f"{f}.dtype", g["dtype"], f"allowed: {', '.join(DTYPES)} (the weights' dtype, as --dtype)")
        if g.get("mem_fraction") is not None:
            check_number(g["mem_fraction"], f"{f}.mem_fraction", *field_range(Engine, "kv_memory_fraction"))
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
            check_number(p.get("output_len"), f"{h}.output_len", 1, ctx_hi)
            if float(p["input_len"]) + float(p["output_len"]) > ctx_hi:
                raise SpecsimError(f"{h}.output_len", p["output_len"], f"allowed: input_len + output_len <= {ctx_hi:g} tokens")
            check_number(p.get("itl_median_ms"), f"{h}.itl_median_ms", 0, 1e6, lo_open=True)


def work_units(groups: list) -> float:
    """Model evaluations scoring takes: one per point and engine reading."""
    return float(sum(len(g["points"]) * (2 if g.get("compare_engine") else 1) for g in groups))


def _step(g: dict, engine: str, p: dict):
    from .predict import predict

    ctx = int(round(float(p["input_len"]) + float(p["output_len"]) / 2))
    kw = {"mem_fraction": float(g["mem_fraction"])} if g.get("mem_fraction") is not None else {}
    if g.get("dtype") is not None:
        kw["dtype"] = g["dtype"]
    r = predict(model=g["model"], gpu=g["gpu"], tp=int(g.get("tp", 1)), engine=engine, batch=int(p["concurrency"]),
                ctx=ctx, **kw)
    return ctx, r.baseline_step_ms, r.baseline_running_requests


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
                ctx, ms, running = _step(g, g["engine"], p)
                share = prefill_share(p["concurrency"], p["output_len"])
                row = {"workload": p.get("workload"), "input_len": float(p["input_len"]), "output_len": float(p["output_len"]),
                       "concurrency": int(p["concurrency"]), "ctx": ctx, "published_step_ms": float(p["itl_median_ms"]),
                       "predicted_step_ms": ms, "error_pct": 100 * (ms / float(p["itl_median_ms"]) - 1),
                       "running_requests": int(running), "scored": share < PREFILL_SHARE_MAX,
                       "kind": "modeled vs published (median ITL)"}
                if g.get("compare_engine"):
                    ms2 = _step(g, g["compare_engine"], p)[1]
                    row["compare_step_ms"], row["compare_error_pct"] = ms2, 100 * (ms2 / float(p["itl_median_ms"]) - 1)
                rows.append(row)
        except SpecsimError as exc:
            out.append({"id": gid, "setup": setup, "skipped": f"not expressible with the presets ({exc})", "rows": []})
            continue
        out.append({"id": gid, "setup": setup, "engine": g["engine"], "compare_engine": g.get("compare_engine"),
                    "skipped": None, "rows": rows, **summary(rows)})
    return out


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
    return [r["workload"] or "-", r["concurrency"], r["ctx"], r["published_step_ms"], r["predicted_step_ms"], r["error_pct"],
            r["running_requests"], r.get("compare_error_pct", "-"),
            "held out" if r["scored"] else "shown: a prefill in most steps"]


HEADERS = ["workload", "concurrency", "ctx", "published ms", "modeled ms", "error %", "running (modeled)",
           "error % (compare)", ""]


def decode_steps_text(groups: list[dict]) -> list[str]:
    """One text table per scored group, then a line for each group the presets cannot express."""
    from ..output.render import printable, table_text

    parts = []
    for g in groups:
        if g["skipped"]:
            parts.append(printable(f"decode steps not scored: {g['id']} ({g['skipped']})"))
            continue
        title = (f"{g['id']}: {g['setup']}, plain decode step against the published median ITL (zero-shot; compare: "
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
        for w in dict.fromkeys(r["workload"] for r in g["rows"]):
            pts = [r for r in g["rows"] if r["workload"] == w]
            cells = ", ".join(f"{r['concurrency']}: {r['published_step_ms']:.2f} / {r['predicted_step_ms']:.2f} "
                              f"({r['error_pct']:+.0f} %{'' if r['scored'] else ', shown'})" for r in pts)
            rows.append([g["id"], g["setup"], f"{w} (ctx {pts[0]['ctx']})", cells,
                         _line(summary(pts) | {"compare_engine": g["compare_engine"]})])
    if not rows:
        return []
    return [table_markdown(["decode steps (zero-shot)", "setup", "workload", "concurrency: published / modeled ms (error)",
                            "scored points"], rows)]
