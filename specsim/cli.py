"""Command line: parse, call the library, render. Bad input -> one line on stderr, exit 2."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="specsim: predict speculative-decoding (EAGLE-3) tok/s from physics, calibrated by a few timings.",
)
scenario_app = typer.Typer(no_args_is_help=True, help="Show or dump scenarios as JSON.")
app.add_typer(scenario_app, name="scenario")
whatif_app = typer.Typer(no_args_is_help=True, help="Before/after what-if analysis of one lever (modeled).")
app.add_typer(whatif_app, name="whatif")


class Fmt(str, Enum):
    text = "text"
    markdown = "markdown"
    md = "md"
    json = "json"


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def _floats(text: str | None, field: str) -> list[float] | None:
    if text is None:
        return None
    try:
        vals = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        _fail(f"{field}: got {text!r}; expected comma-separated numbers, e.g. 0.8,0.6,0.4")
    if not vals:
        _fail(f"{field}: got {text!r}; expected at least one number")
    return vals


def _ints(text: str, field: str) -> list[int]:
    """Comma list of integers and inclusive ranges (1-10)."""
    out: list[int] = []
    try:
        for part in text.replace(" ", "").split(","):
            if not part:
                continue
            if "-" in part[1:]:
                a, b = part.split("-", 1)
                lo, hi = int(a), int(b)
                if hi < lo:
                    _fail(f"{field}: got range {part!r}; the end must be >= the start")
                out.extend(range(lo, hi + 1))
            else:
                out.append(int(part))
    except ValueError:
        _fail(f"{field}: got {text!r}; expected integers or ranges, e.g. 1,3,6 or 1-10")
    if not out:
        _fail(f"{field}: got {text!r}; expected at least one integer")
    return out


def _json_safe(obj):
    """NaN/inf are not JSON: emit null instead, so jq and browsers can read the output."""
    import math

    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        return _json_safe(obj.item())
    return obj


def _samples(text: str | float, field: str) -> float:
    """A sample count with an optional K/M/B suffix: 37K, 1.4M, 2e6."""
    t = str(text).strip().upper().replace(",", "").replace("_", "")
    mult = {"K": 1e3, "M": 1e6, "B": 1e9}.get(t[-1:], 1.0)
    try:
        v = float(t[:-1] if t[-1:] in "KMB" else t) * mult
    except ValueError:
        _fail(f"{field}: got {text!r}; expected a number of samples such as 37000, 37K or 1.4M")
    if not v > 0:
        _fail(f"{field}: got {text!r}; training samples must be > 0")
    return v


def _emit(obj: dict) -> None:
    typer.echo(json.dumps(_json_safe(obj), indent=2, allow_nan=False))


ScenarioOpt = typer.Option(None, "--scenario", "-s", help="built-in scenario name or scenario JSON file")
ModelOpt = typer.Option(None, "--model", help="model preset or path to a Hugging Face config.json")
GpuOpt = typer.Option(None, "--gpu", help="GPU preset (h100, h200, b200, h20, a100)")
TpOpt = typer.Option(None, "--tp", help="tensor-parallel size")
BatchOpt = typer.Option(None, "--batch", help="concurrent requests")
CtxOpt = typer.Option(None, "--ctx", help="context length in tokens")


@app.command()
def predict(
    scenario: str | None = ScenarioOpt,
    model: str | None = ModelOpt,
    gpu: str | None = GpuOpt,
    tp: int | None = TpOpt,
    steps: int | None = typer.Option(None, "--steps", help="draft steps (tree depth)"),
    topk: int | None = typer.Option(None, "--topk", help="branching per draft step (1 = chain)"),
    draft_tokens: int | None = typer.Option(None, "--draft-tokens", help="verify width; topk=1 forces steps+1"),
    accept: float | None = typer.Option(None, "--accept", help="accept length tau at these steps (bonus included)"),
    accept_rates: str | None = typer.Option(None, "--accept-rates", help="conditional acceptance per position, e.g. 0.8,0.6"),
    batch: int | None = BatchOpt,
    ctx: int | None = CtxOpt,
    engine: str | None = typer.Option(None, "--engine", help="engine preset (sglang, sglang-v2, vllm)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object"),
    fmt: Fmt = typer.Option(Fmt.text, "--format", help="text, markdown (md) or json"),
) -> None:
    """Predict speculative tok/s, speedup and where the cycle time goes."""
    from .analysis.predict import predict as _predict

    res = _predict(
        scenario, model=model, gpu=gpu, tp=tp, steps=steps, topk=topk, draft_tokens=draft_tokens, accept=accept,
        accept_rates=_floats(accept_rates, "accept-rates"), batch=batch, ctx=ctx,
        engine=engine,
    )
    if as_json or fmt == Fmt.json:
        _emit(res.to_dict())
    elif fmt in (Fmt.markdown, Fmt.md):
        typer.echo(res._repr_markdown_())
    else:
        typer.echo(repr(res))


@app.command()
def verify(
    tokens: str = typer.Option("1,2,3,4,6,8,16,32,64", "--tokens", help="verify widths, e.g. 1,3,6,16 or 1-8"),
    scenario: str | None = ScenarioOpt,
    model: str | None = ModelOpt,
    gpu: str | None = GpuOpt,
    tp: int | None = TpOpt,
    batch: int | None = BatchOpt,
    ctx: int | None = CtxOpt,
    as_json: bool = typer.Option(False, "--json"),
    fmt: Fmt = typer.Option(Fmt.text, "--format"),
) -> None:
    """Target verify forward time (ms) per number of draft tokens per request."""
    from .analysis.predict import verify_ms
    from .output.render import verify_markdown

    curve = verify_ms(_ints(tokens, "tokens"), scenario, model=model, gpu=gpu, tp=tp, batch=batch, ctx=ctx)
    if as_json or fmt == Fmt.json:
        _emit(curve.to_dict())
    elif fmt in (Fmt.markdown, Fmt.md):
        typer.echo(verify_markdown(curve))
    else:
        typer.echo(repr(curve))


@app.command()
def scenarios(as_json: bool = typer.Option(False, "--json")) -> None:
    """List the built-in scenarios (the first is the default)."""
    from .io.presets import DEFAULT_SCENARIO, builtin_scenarios, gpu_names, model_names

    sc = builtin_scenarios()
    if as_json:
        _emit({"default": DEFAULT_SCENARIO, "scenarios": sc, "models": model_names(), "gpus": gpu_names()})
        return
    for name, desc in sorted(sc.items(), key=lambda kv: kv[0] != DEFAULT_SCENARIO):
        mark = " (default)" if name == DEFAULT_SCENARIO else ""
        typer.echo(f"{name}{mark}: {desc}")
    typer.echo(f"\nmodel presets: {', '.join(model_names())}\nGPU presets: {', '.join(gpu_names())}")


def _scenario_for(scenario, model, gpu, tp, steps, topk, accept, batch, ctx):
    from .analysis.predict import build_scenario

    return build_scenario(scenario, model=model, gpu=gpu, tp=tp, steps=steps, topk=topk, accept=accept, batch=batch, ctx=ctx)


@scenario_app.command("show")
def scenario_show(
    scenario: str | None = typer.Argument(None, help="built-in name or file (default: kimi-k2.5-seed)"),
    model: str | None = ModelOpt,
    gpu: str | None = GpuOpt,
    tp: int | None = TpOpt,
    steps: int | None = typer.Option(None, "--steps"),
    topk: int | None = typer.Option(None, "--topk"),
    accept: float | None = typer.Option(None, "--accept"),
    batch: int | None = BatchOpt,
    ctx: int | None = CtxOpt,
) -> None:
    """Readable summary of a scenario's inputs and their sources."""
    from .output.render import table_text

    sc = _scenario_for(scenario, model, gpu, tp, steps, topk, accept, batch, ctx)
    rows = [
        ["scenario", sc.name], ["description", sc.description],
        ["GPU", f"{sc.gpu.name}: {sc.gpu.hbm_bytes_per_s / 1e12:.2f} TB/s, {sc.gpu.peak_flops['bf16'] / 1e12:.0f} TFLOP/s bf16"],
        ["TP", sc.parallel.tp],
        ["all-reduce (graph)", f"{sc.parallel.allreduce.name}, alpha {sc.parallel.allreduce.alpha_at(sc.parallel.tp):.1f} us"],
    ]
    if sc.parallel.allreduce_eager:
        ae = sc.parallel.allreduce_eager
        rows.append(["all-reduce (eager)", f"{ae.name}, alpha {ae.alpha_at(sc.parallel.tp):.1f} us"])
    t = sc.target
    moe = f", MoE {t.moe.num_experts}x top-{t.moe.experts_per_token}" if t.moe else ", dense"
    rows += [
        ["target", f"{t.name}: {t.num_layers} layers, hidden {t.hidden}, {t.attention.kind.upper()}{moe}"],
        ["draft", f"{sc.draft.name}: hidden {sc.draft.hidden}, vocab {sc.draft.draft_vocab}"],
        ["engine", f"{sc.engine.name}; graphs decode={sc.engine.graph_decode} verify={sc.engine.graph_verify} "
                   f"draft={sc.engine.graph_draft} extend={sc.engine.graph_draft_extend}; overlap={sc.engine.overlap_scheduler}"],
        ["speculation", f"steps={sc.speculation.steps} topk={sc.speculation.topk} draft_tokens={sc.speculation.num_draft_tokens}"],
        ["acceptance", sc.acceptance.model_dump(exclude_none=True)],
        ["workload", f"batch={sc.workload.batch} ctx={sc.workload.ctx}"],
    ]
    typer.echo(table_text(["field", "value"], rows))
    srcs = []
    for comp in ("gpu", "target", "draft", "engine"):
        for k, v in getattr(sc, comp).sources.items():
            srcs.append([f"{comp}.{k}", v])
    if srcs:
        typer.echo("\n" + table_text(["number", "source"], srcs, "sources"))
    for k in ("assumptions",):
        for a in sc.provenance.get(k, []) or []:
            typer.echo(f"assumption: {a}")


@scenario_app.command("dump")
def scenario_dump(
    scenario: str | None = typer.Argument(None, help="built-in name or file (default: kimi-k2.5-seed)"),
    model: str | None = ModelOpt,
    gpu: str | None = GpuOpt,
    tp: int | None = TpOpt,
    steps: int | None = typer.Option(None, "--steps"),
    topk: int | None = typer.Option(None, "--topk"),
    accept: float | None = typer.Option(None, "--accept"),
    batch: int | None = BatchOpt,
    ctx: int | None = CtxOpt,
    out: Path | None = typer.Option(None, "--out", "-o", help="write to this file (atomically) instead of stdout"),
) -> None:
    """The full scenario as JSON (editable, and accepted back by --scenario FILE)."""
    from .io.files import write_atomic

    sc = _scenario_for(scenario, model, gpu, tp, steps, topk, accept, batch, ctx)
    text = sc.model_dump_json(indent=1)
    if out:
        write_atomic(out, text + "\n")
        typer.echo(f"wrote {out}", err=True)
    else:
        typer.echo(text)


@app.command()
def calibrate(
    model: str = typer.Option(..., "--model", help="model preset or path to a Hugging Face config.json"),
    gpu: str = typer.Option(..., "--gpu", help="GPU preset"),
    tp: int = typer.Option(..., "--tp", help="tensor-parallel size"),
    point: list[str] = typer.Option([], "--point", help="measured verify K=MS (K tokens per request, MS ms); repeat"),
    dtype: str | None = typer.Option(None, "--dtype", help="weight dtype: bf16, fp8 or int4 (int4: routed experts of MoE)"),
    ctx: int | None = CtxOpt,
    batch: int | None = BatchOpt,
    moe_kernel: str | None = typer.Option(None, "--moe-kernel", help="fused or per-token"),
    graph: bool | None = typer.Option(None, "--graph/--eager", help="verify replays a CUDA graph, or runs eagerly"),
    engine: str = typer.Option("sglang", "--engine", help="engine preset"),
    baseline_tok_s: float | None = typer.Option(None, "--baseline-tok-s", help="measured plain-decode tok/s"),
    from_log: list[Path] = typer.Option([], "--from-log", help="SGLang/vLLM log or bench JSONL; repeat"),
    bootstrap: int = typer.Option(0, "--bootstrap", help="N refits for the uncertainty (default: Jacobian covariance)"),
    out: Path = typer.Option(..., "--out", "-o", help="scenario JSON to write"),
    as_json: bool = typer.Option(False, "--json", help="print the fit as JSON"),
) -> None:
    """Fit the cost model to measured verify timings; write a scenario with uncertainty."""
    from .analysis.calibrate import base_scenario, fit, parse_point
    from .io.files import write_atomic
    from .output.render import table_text

    if batch is not None and batch < 1:
        _fail(f"batch: got {batch}; must be an integer >= 1")
    if ctx is not None and ctx < 0:
        _fail(f"ctx: got {ctx}; must be an integer >= 0")
    pts = [parse_point(x) for x in point]
    sc = base_scenario(model, gpu, tp, dtype=dtype, ctx=ctx, batch=batch, moe_kernel=moe_kernel, graph=graph, engine=engine)
    cycles: list[dict] = []
    ingest_note = ""
    if from_log:
        from .io.ingest import ingest_files

        res = ingest_files([str(f) for f in from_log])
        for c in res.cycle_points():
            if c.get("baseline"):
                if baseline_tok_s is None and c.get("tok_s"):
                    baseline_tok_s = float(c["tok_s"]) / max(float(c.get("batch") or 1), 1.0) * sc.workload.batch
            elif c.get("cycle_ms") and c.get("accept_length") and c.get("steps"):
                cycles.append(c)
        rates = res.acceptance_rates()
        tau = res.mean_accept_length()
        data = sc.model_dump()
        if rates:
            data["acceptance"] = {"rates": list(rates), "source": f"ingested from {', '.join(map(str, from_log))}"}
        elif tau:
            steps = data["speculation"]["steps"]
            data["acceptance"] = {"accept_length": min(tau, steps + 1), "source": f"ingested from {', '.join(map(str, from_log))}"}
        from .io.presets import scenario_from_dict

        sc = scenario_from_dict(data)
        ingest_note = f"ingested {len(from_log)} file(s): {len(cycles)} cycle point(s), {res.lines_skipped} line(s) skipped"
    if bootstrap < 0:
        _fail(f"bootstrap: got {bootstrap}; must be 0 (Jacobian) or >= 10 resamples")
    result = fit(sc, pts, baseline_tok_s=baseline_tok_s, cycles=cycles, bootstrap=bootstrap)
    text = result.scenario.model_dump_json(indent=1) + "\n"
    if as_json:
        _emit(result.to_dict())
    else:
        typer.echo(table_text(["parameter", "fitted", "unit", "prior", "90% range", "pinned by data"], result.table_rows(),
                              f"calibrated {result.scenario.name}"))
        typer.echo("")
        typer.echo(table_text(["point", "measured ms", "model ms", "residual %"],
                              [[r["what"], r["ms"], r["model_ms"], r["error_pct"]] for r in result.residuals], "residuals"))
        if ingest_note:
            typer.echo(ingest_note)
        for w in result.warnings:
            typer.echo(f"warning: {w}", err=True)
    write_atomic(out, text)
    typer.echo(f"wrote {out}", err=True)


@app.command()
def validate(
    dataset: str = typer.Argument(..., help="dataset JSON (or built-in name, e.g. kimi-k2.5-seed)"),
    fit_tokens: str = typer.Option("3,6", "--fit", help="token counts to calibrate on"),
    max_mape: float | None = typer.Option(None, "--max-mape", help="exit 1 if the MAPE (%) exceeds this"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Calibrate on a subset of measured points and score the prediction of all of them."""
    from .analysis.calibrate import validate as _validate
    from .output.render import table_text

    if max_mape is not None and not max_mape >= 0:
        _fail(f"max-mape: got {max_mape}; must be a percentage >= 0")
    v = _validate(dataset, _ints(fit_tokens, "fit"))
    if as_json:
        _emit(v.to_dict())
    else:
        rows = [[r["tokens"], r["measured_ms"], r["predicted_ms"], r["error_pct"], "fit" if r["in_fit"] else ""] for r in v.rows]
        typer.echo(table_text(["tokens", "measured ms", "predicted ms", "error %", ""], rows, f"{v.dataset}: fit on {v.fit_tokens}"))
        scope = "held-out points" if v.held_out else "all points (every point was in the fit)"
        typer.echo(f"MAPE {v.mape_pct:.2f}%  median {v.median_ape_pct:.2f}%  worst {v.max_ape_pct:.2f}%  over {scope}"
                   f"; all points: MAPE {v.mape_all_pct:.2f}%")
    if max_mape is not None and v.mape_pct > max_mape:
        typer.echo(f"error: MAPE {v.mape_pct:.2f}% exceeds --max-mape {max_mape}", err=True)
        raise typer.Exit(1)


@app.command()
def ingest(
    files: list[Path] = typer.Argument(..., help="SGLang server logs, bench_speculative/bench_serving JSONL, vLLM logs"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Summarise engine output: accept length, throughput, step time, per-position rates."""
    from .io.ingest import ingest_files
    from .output.render import table_text

    res = ingest_files([str(f) for f in files])
    if as_json:
        d = res.to_dict()
        d["summary"] = res.summary()
        d["cycle_points"] = res.cycle_points()
        _emit(d)
        return
    summ = res.summary()
    if summ:
        keys = list(summ[0].keys())
        typer.echo(table_text(keys, [[r.get(k) if r.get(k) is not None else "" for k in keys] for r in summ], "summary"))
    rates = res.acceptance_rates()
    if rates:
        typer.echo("per-position conditional acceptance: " + ", ".join(f"{r:.3f}" for r in rates))
    typer.echo(f"formats: {res.formats}; lines: {res.lines_total} read, {res.lines_skipped} skipped (corrupt), "
               f"{res.lines_ignored} unrelated")


def _float_list(text: str | None, field: str) -> list[float] | None:
    """Comma list of floats and inclusive ranges START:STOP:STEP (e.g. 1.5:3.5:0.25)."""
    if text is None:
        return None
    out: list[float] = []
    try:
        for part in text.replace(" ", "").split(","):
            if not part:
                continue
            if ":" in part:
                a, b, step = (float(x) for x in part.split(":"))
                if step <= 0 or b < a:
                    _fail(f"{field}: got {part!r}; need START:STOP:STEP with STOP >= START and STEP > 0")
                n = int(round((b - a) / step)) + 1
                if n > 100_000:
                    _fail(f"{field}: got {part!r}; at most 100000 values per range")
                out.extend(a + i * step for i in range(n) if a + i * step <= b + 1e-9)
            else:
                out.append(float(part))
    except ValueError:
        _fail(f"{field}: got {text!r}; expected numbers or START:STOP:STEP ranges")
    if not out:
        _fail(f"{field}: got {text!r}; the range is empty")
    return out


@app.command()
def sweep(
    scenario: str | None = ScenarioOpt,
    steps: str | None = typer.Option(None, "--steps", help="e.g. 1-10 or 1,2,4"),
    topk: str | None = typer.Option(None, "--topk", help="e.g. 1,2,4"),
    draft_tokens: str | None = typer.Option(None, "--draft-tokens", help="verify widths for topk > 1"),
    accept: str | None = typer.Option(None, "--accept", help="accept lengths at --accept-at-steps, e.g. 1.5:3.5:0.5"),
    accept_at_steps: int | None = typer.Option(None, "--accept-at-steps", help="steps the --accept values refer to"),
    accept_rates: str | None = typer.Option(None, "--accept-rates", help="profiles separated by ';', e.g. '0.8,0.6;0.7,0.5'"),
    tp: str | None = typer.Option(None, "--tp", help="e.g. 4,8"),
    batch: str | None = typer.Option(None, "--batch", help="e.g. 1,8,32 or 1-64"),
    ctx: str | None = typer.Option(None, "--ctx", help="context lengths"),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU presets, e.g. h100,h200,b200"),
    allreduce_scale: str | None = typer.Option(None, "--allreduce-scale", help="all-reduce latency multipliers"),
    top: int = typer.Option(15, "--top", help="rows in the ranked table"),
    as_json: bool = typer.Option(False, "--json"),
    csv: Path | None = typer.Option(None, "--csv", help="write every configuration as CSV ('-' for stdout)"),
    fmt: Fmt = typer.Option(Fmt.text, "--format"),
) -> None:
    """Sweep configurations (vectorised); print the best and a ranked table."""
    from .output.render import table_markdown
    from .analysis.sweep import COLUMNS
    from .analysis.sweep import sweep as _sweep

    profiles = None
    if accept_rates is not None:
        profiles = [_floats(x, "accept-rates") for x in accept_rates.split(";") if x.strip()]
        if not profiles:
            _fail(f"accept-rates: got {accept_rates!r}; expected at least one profile")
    res = _sweep(
        scenario,
        steps=_ints(steps, "steps") if steps else None, topk=_ints(topk, "topk") if topk else None,
        draft_tokens=_ints(draft_tokens, "draft-tokens") if draft_tokens else None,
        accept=_float_list(accept, "accept"), accept_at_steps=accept_at_steps, accept_rates=profiles,
        tp=_ints(tp, "tp") if tp else None, batch=_ints(batch, "batch") if batch else None,
        ctx=_ints(ctx, "ctx") if ctx else None,
        gpu=[g for g in gpu.split(",") if g.strip()] if gpu is not None else None,
        allreduce_scale=_float_list(allreduce_scale, "allreduce-scale"),
    )
    if csv is not None:
        if str(csv) == "-":
            typer.echo(res.to_csv(), nl=False)
            return
        from .io.files import write_atomic

        write_atomic(csv, res.to_csv())
        typer.echo(f"wrote {res.n:,} rows to {csv}", err=True)
    if as_json or fmt == Fmt.json:
        _emit(res.to_dict(top))
    elif fmt in (Fmt.markdown, Fmt.md):
        b = res.best()
        typer.echo(f"**Best of {res.n:,} configurations (modeled):** steps={b['steps']}, topk={b['topk']}, "
                   f"draft tokens={b['draft_tokens']}, TP={b['tp']}, batch={b['batch']}, GPU={b['gpu']}: "
                   f"{b['tok_s']:.1f} tok/s ({b['speedup']:.3f}x)\n")
        typer.echo(table_markdown(list(COLUMNS), [[r[c] for c in COLUMNS] for r in res.ranked(top)]))
    else:
        typer.echo(repr(res))


def _show_whatif(res, as_json: bool, fmt: Fmt) -> None:
    if as_json or fmt == Fmt.json:
        _emit(res.to_dict())
    elif fmt in (Fmt.markdown, Fmt.md):
        typer.echo(res.markdown())
    else:
        typer.echo(repr(res))


JsonOpt = typer.Option(False, "--json")
FmtOpt = typer.Option(Fmt.text, "--format")


@whatif_app.command("training")
def whatif_training_cmd(
    scenario: str | None = ScenarioOpt,
    target_samples: str = typer.Option("1.4M", "--target-samples", help="draft training samples to evaluate, e.g. 1.4M"),
    current_samples: str | None = typer.Option(None, "--current-samples", help="samples of today's draft (default 37K)"),
    data: list[str] = typer.Option([], "--data", help="extra point SAMPLES=TAU[@STEPS], e.g. 100K=2.6; repeat"),
    only_data: bool = typer.Option(False, "--only-data", help="fit to the --data points alone (no published drafts)"),
    gpu_hours_per_100k: float | None = typer.Option(None, "--gpu-hours-per-100k", help="data generation + training cost"),
    fleet_tokens_per_day: float = typer.Option(1e9, "--fleet-tokens-per-day", help="tokens served per day"),
    gpus_per_replica: int | None = typer.Option(None, "--gpus-per-replica", help="default: the scenario's TP"),
    max_steps: int = typer.Option(10, "--max-steps"),
    as_json: bool = JsonOpt,
    fmt: Fmt = FmtOpt,
) -> None:
    """Accept length vs draft training samples (fitted, with band), tok/s and payback."""
    from .analysis.training import whatif_training

    res = whatif_training(
        scenario, target_samples=_samples(target_samples, "target-samples"),
        current_samples=_samples(current_samples, "current-samples") if current_samples is not None else None,
        data=data or None, max_steps=max_steps,
        gpu_hours_per_100k_samples=gpu_hours_per_100k, fleet_tokens_per_day=fleet_tokens_per_day,
        gpus_per_replica=gpus_per_replica, use_default_data=not only_data,
    )
    if as_json or fmt == Fmt.json:
        _emit(res.to_dict())
    elif fmt in (Fmt.markdown, Fmt.md) and hasattr(res, "markdown"):
        typer.echo(res.markdown())
    else:
        typer.echo(repr(res))


@whatif_app.command("allreduce")
def whatif_allreduce_cmd(
    scenario: str | None = ScenarioOpt,
    scale: float | None = typer.Option(None, "--scale", help="multiply all-reduce latency"),
    impl: str | None = typer.Option(None, "--impl", help="all-reduce preset (nccl-nvlink4, sglang-custom-nvlink4, nvls, ...)"),
    alpha_us: float | None = typer.Option(None, "--alpha-us", help="set all-reduce latency (us) at the scenario's TP"),
    seed_tuning: bool = typer.Option(False, "--seed-nccl-tuning", help="the founding case: untuned -> tuned NCCL"),
    steps: int | None = typer.Option(None, "--steps"),
    as_json: bool = JsonOpt,
    fmt: Fmt = FmtOpt,
) -> None:
    """All-reduce latency or implementation (e.g. the seed's NCCL tuning)."""
    from .analysis.whatif import seed_nccl_tuning, whatif_allreduce

    if seed_tuning and any(x is not None for x in (scenario, scale, impl, alpha_us, steps)):
        _fail("seed-nccl-tuning: compares the two built-in seed scenarios; it takes no --scenario, --scale, --impl, "
              "--alpha-us or --steps")
    res = seed_nccl_tuning() if seed_tuning else whatif_allreduce(scenario, scale=scale, impl=impl, alpha_us=alpha_us, steps=steps)
    _show_whatif(res, as_json, fmt)


@whatif_app.command("gpu")
def whatif_gpu_cmd(
    to: str = typer.Option(..., "--to", help="GPU preset to move to"),
    scenario: str | None = ScenarioOpt,
    steps: int | None = typer.Option(None, "--steps"),
    as_json: bool = JsonOpt,
    fmt: Fmt = FmtOpt,
) -> None:
    """Swap the GPU of the same deployment (its numbers and default graph all-reduce; engine kept)."""
    from .analysis.whatif import whatif_gpu

    _show_whatif(whatif_gpu(scenario, to=to, steps=steps), as_json, fmt)


@whatif_app.command("tp")
def whatif_tp_cmd(
    to: int = typer.Option(..., "--to", help="TP size to move to"),
    scenario: str | None = ScenarioOpt,
    steps: int | None = typer.Option(None, "--steps"),
    as_json: bool = JsonOpt,
    fmt: Fmt = FmtOpt,
) -> None:
    """Change the tensor-parallel size."""
    from .analysis.whatif import whatif_tp

    _show_whatif(whatif_tp(scenario, to=to, steps=steps), as_json, fmt)


@whatif_app.command("quant")
def whatif_quant_cmd(
    dtype: str = typer.Option(..., "--dtype", help="bf16, fp8, int8, int4 or fp4"),
    target: str = typer.Option("routed_experts", "--target", help="routed_experts, shared_experts, attention, dense_mlp, all"),
    scenario: str | None = ScenarioOpt,
    steps: int | None = typer.Option(None, "--steps"),
    as_json: bool = JsonOpt,
    fmt: Fmt = FmtOpt,
) -> None:
    """Quantise the experts (or other weights)."""
    from .analysis.whatif import whatif_quant

    _show_whatif(whatif_quant(scenario, dtype=dtype, target=target, steps=steps), as_json, fmt)


@whatif_app.command("graph")
def whatif_graph_cmd(
    phase: str = typer.Option(..., "--phase", help="decode, verify, draft or draft_extend"),
    on: bool | None = typer.Option(None, "--on/--off", help="capture the phase in a CUDA graph, or run it eagerly (required)"),
    scenario: str | None = ScenarioOpt,
    steps: int | None = typer.Option(None, "--steps"),
    as_json: bool = JsonOpt,
    fmt: Fmt = FmtOpt,
) -> None:
    """Turn CUDA-graph capture of one phase on or off."""
    from .analysis.whatif import whatif_graph

    if on is None:
        _fail("on/off: say --on or --off")
    _show_whatif(whatif_graph(scenario, phase=phase, on=on, steps=steps), as_json, fmt)


@whatif_app.command("overlap")
def whatif_overlap_cmd(
    on: bool | None = typer.Option(None, "--on/--off", help="overlap scheduler for speculative cycles (required)"),
    scenario: str | None = ScenarioOpt,
    steps: int | None = typer.Option(None, "--steps"),
    as_json: bool = JsonOpt,
    fmt: Fmt = FmtOpt,
) -> None:
    """Overlap scheduler on or off (SGLang spec v2 vs v1)."""
    from .analysis.whatif import whatif_overlap

    if on is None:
        _fail("on/off: say --on or --off")
    _show_whatif(whatif_overlap(scenario, on=on, steps=steps), as_json, fmt)


class ExplainFmt(str, Enum):
    markdown = "markdown"
    md = "md"
    latex = "latex"
    text = "text"
    json = "json"


@app.command()
def explain(
    scenario: str | None = ScenarioOpt,
    steps: int | None = typer.Option(None, "--steps"),
    accept: float | None = typer.Option(None, "--accept"),
    batch: int | None = BatchOpt,
    fmt: ExplainFmt = typer.Option(ExplainFmt.markdown, "--format", help="markdown, latex, text or json"),
) -> None:
    """Closed forms (sympy): break-even accept length, optimal steps, elasticities, with numbers."""
    from .analysis.symbolic import closed_forms
    from .analysis.symbolic import explain as _explain

    kw = {k: v for k, v in dict(steps=steps, accept=accept, batch=batch).items() if v is not None}
    if fmt == ExplainFmt.json:
        _emit(closed_forms(scenario, **kw).to_dict())
        return
    typer.echo(_explain(scenario, fmt="markdown" if fmt == ExplainFmt.md else fmt.value, **kw))


@app.command()
def report(
    scenario: str | None = ScenarioOpt,
    model: str | None = ModelOpt,
    gpu: str | None = GpuOpt,
    tp: int | None = TpOpt,
    batch: int | None = BatchOpt,
    ctx: int | None = CtxOpt,
    sweep: str = typer.Option("1-10", "--sweep", help="draft steps to sweep, e.g. 1-10 or 1,2,4"),
    accept_lengths: str | None = typer.Option(None, "--accept-lengths", help="extra accept lengths (tau at the scenario's steps), e.g. 1.7,2.5"),
    whatif: str = typer.Option("1.4M", "--whatif", help="draft training samples for the training what-if, e.g. 1.4M"),
    out: Path = typer.Option(..., "--out", "-o", help="report file (written atomically)"),
    fmt: str | None = typer.Option(None, "--format", help="html or md (default: from the --out suffix)"),
) -> None:
    """One self-contained report: summary, cycle, steps sweep, verify curve, training what-if, sensitivity, inputs."""
    from .analysis.predict import build_scenario
    from .output.report import write_report

    samples = _samples(whatif, "whatif")
    suffix = out.suffix.lower()
    if fmt is None and suffix not in (".html", ".htm", ".md", ".markdown"):
        _fail(f"out: got {str(out)!r}; use a .html or .md file name, or give --format html|md")
    sc = build_scenario(scenario, model=model, gpu=gpu, tp=tp, batch=batch, ctx=ctx)
    used = write_report(out, fmt=fmt, scenario=sc, sweep_steps=_ints(sweep, "sweep"),
                        accept_lengths=_floats(accept_lengths, "accept-lengths"), training_target_samples=samples)
    typer.echo(f"wrote {out} ({used})", err=True)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: SpecsimError and click usage errors exit 2 with one line, no traceback."""
    from .errors import SpecsimError, one_line

    try:
        rv = app(args=argv, standalone_mode=False, prog_name="specsim")
    except SpecsimError as exc:
        typer.echo(f"error: {one_line(exc)}", err=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except Exception as exc:  # click usage errors (vendored by typer) and bad files: one line, exit 2
        if hasattr(exc, "format_message"):
            msg = one_line(exc.format_message())
            if msg:  # no-args help has already been shown and carries no message
                typer.echo(f"error: {msg}", err=True)
            sys.exit(getattr(exc, "exit_code", 2) or 2)
        if isinstance(exc, (OSError, ValueError)):
            typer.echo(f"error: {one_line(exc)}", err=True)
            sys.exit(2)
        raise
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
