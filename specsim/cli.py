"""Command line: parse, call the library, render. Bad input -> one line on stderr, exit 2."""

from __future__ import annotations

import json
import os
import sys
from enum import Enum

import typer

from .io.args import install_click_number_checks, split_items  # noqa: E402

install_click_number_checks()  # every float flag finite, every int flag bounded (one place)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="specsim: predict speculative-decoding (EAGLE-3) tok/s from physics, calibrated by a few timings.",
)

MAX_RESIDUAL_ROWS = 40  # residual rows calibrate prints (a log can give one point per record)
MAX_REPORT_ACCEPT_LENGTHS = 64  # accept lengths one report compares
MAX_CLI_POINTS = 10_000  # calibrate --point values (a fit's residuals; ~4 s at this many on one core)
MAX_LOGS = 100  # calibrate --from-log files


def _mount_measure() -> None:
    """``specsim measure ...``: the GPU micro-benchmarks (torch is imported only when one runs)."""
    from .measure.cli import app as measure_app

    app.add_typer(measure_app, name="measure", help="micro-benchmarks on this machine's GPU -> a hardware profile "
                                                    "(needs the [measure] extra: torch)")


_mount_measure()
scenario_app = typer.Typer(no_args_is_help=True, help="Show or dump scenarios as JSON.")
app.add_typer(scenario_app, name="scenario")
whatif_app = typer.Typer(no_args_is_help=True, help="Before/after what-if analysis of one lever (modeled).")
app.add_typer(whatif_app, name="whatif")


class Fmt(str, Enum):
    text = "text"
    markdown = "markdown"
    md = "md"
    json = "json"


def _json_out(fmt, as_json: bool) -> bool:
    """Whether a command prints JSON: ``--json`` or ``--format json``; ``--json`` beside another --format is refused
    (both choose what standard output prints)."""
    if as_json and fmt.value not in ("json", "text"):
        _fail(f"format: got {fmt.value!r}; --json prints one JSON object: give --json or --format, not both")
    return as_json or fmt.value == "json"


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def _floats(text: str | None, field: str) -> list[float] | None:
    """Comma list of finite numbers (specsim.io.args)."""
    from .io.args import parse_floats

    return None if text is None else parse_floats(text, field)


def _ints(text: str, field: str, lo: int | None = None, hi: int | None = None) -> list[int]:
    """Comma list of integers and inclusive ranges (1-10), sized before expansion (specsim.io.args)."""
    from .io.args import parse_int_list

    return parse_int_list(text, field, lo=lo, hi=hi)


def _samples(text: str | float, field: str) -> float:
    """A sample count with an optional K/M/B suffix: 37K, 1.4M, 2e6 (finite, > 0)."""
    from .io.args import parse_samples

    return parse_samples(text, field)


def _emit(obj: dict) -> None:
    from .output.render import json_safe

    typer.echo(json.dumps(json_safe(obj), indent=2, allow_nan=False))


def _flag_without_type(self, ctx):
    """Flags (--json, --on/--off, --help) take no value: show no <bool> type column for them."""
    if getattr(self, "is_flag", False):
        return None
    return _typer_display_type(self, ctx)


try:  # typer >= 0.20 prints a type column for every option, flags included
    from typer.core import TyperOption as _TyperOption

    _typer_display_type = _TyperOption.display_type_rich
    _TyperOption.display_type_rich = _flag_without_type  # type: ignore[method-assign]
except (ImportError, AttributeError):  # pragma: no cover - older typer
    pass

# ---- the one shared set of deployment options: predict, verify, sweep, every whatif, explain, report ----
GraphMaxOpt = typer.Option(None, "--graph-max", help="largest captured CUDA-graph size (requests; tokens for vLLM): "
                           "bigger batches run eagerly (default: the engine preset's list)")
ProfileOpt = typer.Option(None, "--profile", help="hardware profile JSON from `specsim measure gpu`: its fits replace "
                          "the GPU preset's (e.g. models/profiles/h200.json)")
ScenarioOpt = typer.Option(None, "--scenario", "-s", help="built-in scenario name or scenario JSON file "
                           "(default kimi-k2.5-seed)")
ModelOpt = typer.Option(None, "--model", help="model preset (see `specsim scenarios`) or path to a Hugging Face "
                        "config.json; a new deployment built from presets")
GpuOpt = typer.Option(None, "--gpu", help="GPU preset: h100, h100-pcie, h200, b200, h20, a100, rtx3090")
TpOpt = typer.Option(None, "--tp", help="tensor-parallel size (must divide the attention heads)")
EngineOpt = typer.Option(None, "--engine", help="engine preset: sglang, sglang-v2, vllm, vllm-async, vllm-v0, hf-transformers, "
                         "torch-graph (a new deployment)")
DtypeOpt = typer.Option(None, "--dtype", help="weight dtype: bf16, fp8 or int4 (int4: routed experts of a MoE)")
BatchOpt = typer.Option(None, "--batch", help="concurrent requests (batch size)")
CtxOpt = typer.Option(None, "--ctx", help="context length per request, tokens")
StepsOpt = typer.Option(None, "--steps", help="draft steps per cycle (chain length, tree depth)")
TopkOpt = typer.Option(None, "--topk", help="branching per draft step (1 = chain)")
DraftTokensOpt = typer.Option(None, "--draft-tokens", help="tokens verified per request (topk=1 forces steps+1)")
AcceptOpt = typer.Option(None, "--accept", help="accept length tau at these steps, bonus token included")
AcceptRatesOpt = typer.Option(None, "--accept-rates", help="conditional acceptance per draft position, e.g. 0.8,0.6,0.4")
StopStringsOpt = typer.Option(None, "--stop-strings/--no-stop-strings", help="requests carry stop strings (SGLang "
                              "frontend programs add their chat template's): the engine decodes the output tail at "
                              "every finish check (default: the scenario's workload)")
MaxRunningOpt = typer.Option(None, "--max-running-requests", help="the launch's cap on requests run at once "
                             "(SGLang's flag of that name); batch past it waits in the queue (default: the engine "
                             "preset's; SGLang runs 48 at once with speculation on)")
RoutingSkewOpt = typer.Option(None, "--routing-skew", help="a MoE router's skew across its experts: the CV of an "
                              "expert's token share, in [0, 3] (default: the prior 1.13 from public decode traces; "
                              "0: uniform; `specsim routing` reads yours from SGLang's expert counts)")
KvPoolOpt = typer.Option(None, "--kv-pool-tokens", help="KV-cache tokens per GPU as your launch's log gives them "
                         "(SGLang max_total_num_tokens, vLLM 'GPU KV cache size'): requests past what they hold at "
                         "the context wait in the queue (default: modeled from the engine's memory rule)")
MemFractionOpt = typer.Option(None, "--mem-fraction", help="the launch's share of GPU memory for weights and KV cache "
                              "(SGLang --mem-fraction-static, vLLM --gpu-memory-utilization), in [0.01, 1] (default: "
                              "the engine's own rule)")
JsonOpt = typer.Option(False, "--json", help="print one JSON object instead of text")

_DEPLOYMENT = (  # (parameter, type, option): one definition, reused by every planning command
    ("scenario", str | None, ScenarioOpt), ("model", str | None, ModelOpt), ("gpu", str | None, GpuOpt),
    ("tp", int | None, TpOpt), ("engine", str | None, EngineOpt), ("dtype", str | None, DtypeOpt),
    ("batch", int | None, BatchOpt), ("ctx", int | None, CtxOpt), ("steps", int | None, StepsOpt),
    ("topk", int | None, TopkOpt), ("draft_tokens", int | None, DraftTokensOpt),
    ("accept", float | None, AcceptOpt), ("accept_rates", str | None, AcceptRatesOpt),
    ("profile", str | None, ProfileOpt), ("graph_max", int | None, GraphMaxOpt),
    ("stop_strings", bool | None, StopStringsOpt), ("max_running_requests", int | None, MaxRunningOpt),
    ("routing_skew", float | None, RoutingSkewOpt), ("kv_pool_tokens", int | None, KvPoolOpt),
    ("mem_fraction", float | None, MemFractionOpt),
)


def deployment_options(*, skip: tuple[str, ...] = ()):
    """Add the shared deployment options to a command; it receives them as ``deploy`` (a dict of the
    ``build_scenario`` overrides that were given, plus ``scenario``). ``skip`` leaves some out
    (e.g. sweep takes lists for steps/topk/tp/...)."""
    import functools
    import inspect

    def deco(fn):
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != "deploy"]
        names = [n for n, _, _ in _DEPLOYMENT if n not in skip]
        extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=o, annotation=t)
                 for n, t, o in _DEPLOYMENT if n in names]

        @functools.wraps(fn)
        def wrapper(**kw):
            given = {n: kw.pop(n) for n in names}
            return fn(**kw, deploy=_deploy_kwargs(given))

        wrapper.__signature__ = sig.replace(parameters=own + extra)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in own + extra}
        return wrapper

    return deco


def _deploy_kwargs(given: dict) -> dict:
    """The deployment options that were given, parsed (accept-rates -> floats)."""
    out = {k: v for k, v in given.items() if v is not None}
    if "accept_rates" in out:
        out["accept_rates"] = _floats(out["accept_rates"], "accept-rates")
    return out


def _input_files(deploy: dict | None, *more) -> list:
    """The files a command's deployment options make it read (a scenario that is not a built-in name, a model
    given as a config.json path, a profile), and ``more``: an output path must not be one of them."""
    from .io.packagedata import builtin_scenario_names, names_a_file

    d = deploy or {}
    scenario, model = d.get("scenario"), d.get("model")
    return [scenario if scenario is not None and scenario not in builtin_scenario_names() else None,
            model if model is not None and names_a_file(model) else None, d.get("profile"), *more]


def _split_scenario(deploy: dict) -> tuple[str | None, dict]:
    d = dict(deploy)
    return d.pop("scenario", None), d


@app.command()
@deployment_options()
def predict(
    fmt: Fmt = typer.Option(Fmt.text, "--format", help="text, markdown (md) or json"),
    as_json: bool = JsonOpt,
    requests: int | None = typer.Option(None, "--requests", help="a finite benchmark run of this many equal requests "
                                        "on --batch client slots: also the whole run's tok/s (the batch drains in waves)"),
    prompt_tokens: float | None = typer.Option(None, "--prompt-tokens", help="with --requests: prompt tokens per request; "
                                               "each wave's prefill then counts in the run (give --output-tokens too)"),
    output_tokens: float | None = typer.Option(None, "--output-tokens", help="with --requests: output tokens per request"),
    accept_spread: float | None = typer.Option(None, "--accept-spread", help="with --requests: per-request spread (coefficient "
                                               "of variation) of decode cycles per token from acceptance; equal-length "
                                               "requests then finish unevenly and the batch drains (default: the prior "
                                               "0.12, measured; 0: equal requests)"),
    output_spread: float | None = typer.Option(None, "--output-spread", help="with --requests: per-request spread (CV) of "
                                               "output tokens, both runs (default 0: equal lengths)"),
    deploy: dict | None = None,
) -> None:
    """Predict speculative tok/s, speedup and where the cycle time goes.

    Example: specsim predict --model llama-3.1-70b --gpu h100 --tp 4 --steps 3 --accept 2.8
    """
    from .analysis.build import build_scenario, build_view
    from .analysis.predict import evaluate

    scenario, kw = _split_scenario(deploy or {})
    if requests is None and (prompt_tokens is not None or output_tokens is not None):
        _fail(f"{'prompt' if prompt_tokens is not None else 'output'}-tokens: --prompt-tokens and --output-tokens "
              "describe a run: give --requests too")
    if requests is None and (accept_spread is not None or output_spread is not None):
        _fail(f"{'accept' if accept_spread is not None else 'output'}-spread: --accept-spread and --output-spread "
              "describe a run: give --requests too")
    if requests is not None:
        from .analysis.run import ACCEPT_SPREAD_PRIOR, check_run_lengths, check_spread, predict_run, run_ctx

        check_run_lengths(prompt_tokens, output_tokens)
        accept_spread = ACCEPT_SPREAD_PRIOR if accept_spread is None else check_spread(accept_spread)
        output_spread = 0.0 if output_spread is None else check_spread(output_spread, "output-spread")
        if prompt_tokens is not None and "ctx" not in kw:
            kw["ctx"] = run_ctx(prompt_tokens, output_tokens)  # the run's mean decode context, unless --ctx says otherwise
    sc = build_scenario(scenario, **kw) if requests is not None else build_view(scenario, **kw)
    res = evaluate(sc)
    run = None
    if requests is not None:
        run = predict_run(requests, sc, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                          accept_spread=accept_spread, output_spread=output_spread)
    if _json_out(fmt, as_json):
        _emit({**res.to_dict(), **({"run": run.to_dict()} if run else {})})
        return
    typer.echo(res._repr_markdown_() if fmt in (Fmt.markdown, Fmt.md) else repr(res))
    if run is not None:
        shape = " + ".join(f"{c} x {n}" for n, c in run.waves)
        if run.baseline_waves:
            shape += "; baseline " + " + ".join(f"{c} x {n}" for n, c in run.baseline_waves)
        pre = (f", {run.prompt_tokens:g} prompt + {run.output_tokens:g} output tokens each, prefill counted, "
               f"decode at ctx {sc.workload.ctx}" if run.prompt_tokens is not None else "")
        drain = (f"; per-request spread: acceptance {run.accept_spread:g}, output {run.output_spread:g}, so the batch "
                 f"drains gradually (mean in flight {run.spec_concurrency:.1f}, baseline {run.baseline_concurrency:.1f})"
                 if run.accept_spread or run.output_spread else "")
        ttft = (f", TTFT {run.ttft_ms:,.1f} ms vs {run.baseline_ttft_ms:,.1f}" if run.ttft_ms is not None else "")
        typer.echo(f"run of {run.requests} requests on {run.slots} slots ({'equal waves' if not drain else 'waves if equal'}: "
                   f"{shape}){pre}{drain}, modeled: "
                   f"{run.tok_s:,.1f} tok/s vs {run.baseline_tok_s:,.1f} baseline = {run.speedup:.3f}x; per request: "
                   f"TPOT {run.tpot_ms:.2f} ms vs {run.baseline_tpot_ms:.2f} baseline{ttft}")


@app.command()
@deployment_options()
def verify(
    tokens: str = typer.Option("1,2,3,4,6,8,16,32,64", "--tokens", help="verify widths, e.g. 1,3,6,16 or 1-8"),
    fmt: Fmt = typer.Option(Fmt.text, "--format", help="text, markdown (md) or json"),
    as_json: bool = JsonOpt,
    breakdown: bool = typer.Option(False, "--breakdown", help="per-operator table (kernels, bytes, FLOPs, ms) for each width"),
    deploy: dict | None = None,
) -> None:
    """Target verify forward time (ms) per number of draft tokens per request.

    Example: specsim verify --model llama-3.1-70b --gpu h100 --tp 4 --tokens 1,4,8,16
    Example: specsim verify --tokens 4 --batch 32 --breakdown
    """
    from collections import Counter

    from .analysis.predict import verify_ms
    from .output.render import verify_markdown

    scenario, kw = _split_scenario(deploy or {})
    widths = _ints(tokens, "tokens", lo=1, hi=65536)
    twice = next((w for w, n in Counter(widths).items() if n > 1), None)
    if twice is not None:  # as sweep: a width twice would print the same row (or table) twice
        _fail(f"tokens: got {twice} twice; give each width once")
    if breakdown:
        from .analysis.predict import operator_table

        if len(widths) > 16:
            _fail(f"tokens: got {len(widths)} widths; --breakdown prints at most 16 tables")
        from .output.render import fit_width, warning_lines

        tables = [operator_table(w, scenario, **kw) for w in widths]
        warnings = tables[0].warnings  # one deployment: said once, after the tables
        if _json_out(fmt, as_json):
            _emit({"kind": "modeled", "breakdowns": [t.to_dict() for t in tables], "warnings": warnings})
        elif fmt in (Fmt.markdown, Fmt.md):
            typer.echo("\n\n".join(t._repr_markdown_() for t in tables) + warning_lines(warnings, "markdown"))
        else:
            typer.echo("\n\n".join(repr(t) for t in tables) + fit_width(warning_lines(warnings)))
        return
    curve = verify_ms(widths, scenario, **kw)
    if _json_out(fmt, as_json):
        _emit(curve.to_dict())
    elif fmt in (Fmt.markdown, Fmt.md):
        typer.echo(verify_markdown(curve))
    else:
        typer.echo(repr(curve))


@app.command()
def scenarios(as_json: bool = JsonOpt) -> None:
    """List the built-in scenarios (the first is the default) and the presets.

    Example: specsim scenarios --json
    """
    from .io.presets import DEFAULT_SCENARIO, builtin_scenarios, engine_names, gpu_names, model_names

    sc = builtin_scenarios()
    if as_json:
        _emit({"default": DEFAULT_SCENARIO, "scenarios": sc, "models": model_names(), "gpus": gpu_names(),
               "engines": engine_names()})
        return
    for name, desc in sorted(sc.items(), key=lambda kv: kv[0] != DEFAULT_SCENARIO):
        mark = " (default)" if name == DEFAULT_SCENARIO else ""
        typer.echo(f"{name}{mark}: {desc}")
    typer.echo(f"\nmodel presets: {', '.join(model_names())}\nGPU presets: {', '.join(gpu_names())}"
               f"\nengine presets: {', '.join(engine_names())}")


def _scenario_for(scenario, deploy):
    from .analysis.build import build_scenario

    return build_scenario(scenario, **{k: v for k, v in (deploy or {}).items() if k != "scenario"})


ScenarioArg = typer.Argument(None, help="built-in name or file (default: kimi-k2.5-seed); or give --scenario")


def _one_scenario(argument: str | None, option: str | None) -> str | None:
    """The scenario ``scenario show/dump`` take, as an argument or as ``--scenario`` (as every other command takes
    it); both, naming different ones, is refused."""
    if argument is not None and option is not None and argument != option:
        _fail(f"scenario: got {argument!r} and --scenario {option!r}; give one scenario")
    return option if option is not None else argument


@scenario_app.command("show")
@deployment_options(skip=("scenario",))
def scenario_show(
    scenario: str | None = ScenarioArg,
    scenario_opt: str | None = ScenarioOpt,
    deploy: dict | None = None,
) -> None:
    """Readable summary of a scenario's inputs and their sources.

    Example: specsim scenario show --model llama-3.1-70b --gpu h100 --tp 4
    Example: specsim scenario show --scenario my-box.json
    """
    from .output.render import scenario_text

    scenario = _one_scenario(scenario, scenario_opt)
    typer.echo(scenario_text(_scenario_for(scenario, deploy)))


@scenario_app.command("dump")
@deployment_options(skip=("scenario",))
def scenario_dump(
    scenario: str | None = ScenarioArg,
    scenario_opt: str | None = ScenarioOpt,
    out: str | None = typer.Option(None, "--out", "-o", help="write to this file (atomically) instead of stdout"),
    deploy: dict | None = None,
) -> None:
    """The full scenario as JSON (editable, and accepted back by --scenario FILE).

    Example: specsim scenario dump --model llama-3.1-70b --gpu h100 --tp 4 -o llama70b.json
    """
    from .io.files import check_output, write_atomic

    scenario = _one_scenario(scenario, scenario_opt)
    check_output(out, _input_files({**(deploy or {}), "scenario": scenario}))
    sc = _scenario_for(scenario, deploy)
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
    allreduce: str | None = typer.Option(None, "--allreduce", help="all-reduce path of the verify: custom (engine's "
                                         "one-shot kernel) or nccl; default: nccl with --eager, else the engine's"),
    profile: str | None = ProfileOpt,
    baseline_tok_s: float | None = typer.Option(None, "--baseline-tok-s", help="measured plain-decode tok/s"),
    from_log: list[str] = typer.Option([], "--from-log", help="SGLang/vLLM log or bench JSONL; repeat"),
    bootstrap: int = typer.Option(0, "--bootstrap", help="N refits for the uncertainty (default: Jacobian covariance)"),
    out: str = typer.Option(..., "--out", "-o", help="scenario JSON to write ('-': standard output, the fit's "
                            "tables then go to standard error)"),
    as_json: bool = typer.Option(False, "--json", help="print the fit as JSON"),
) -> None:
    """Fit the cost model to measured verify timings; write a scenario with uncertainty.

    Example: specsim calibrate --model llama-3.1-8b --gpu h100 --tp 1 --point 4=7.6 --out my-box.json
    """
    from .analysis.calibrate import MAX_BOOTSTRAP, base_scenario, fit, parse_point
    from .io.files import check_output, write_atomic
    from .output.render import table_text

    check_output(out, _input_files({"model": model, "profile": profile}, *from_log))  # before any work or output
    to_stdout = str(out) == "-"
    if to_stdout and as_json:
        _fail("out: got '-'; --json prints the fit on standard output: write the scenario to a file, or leave out --json")
    if bootstrap < 0 or bootstrap > MAX_BOOTSTRAP:
        _fail(f"bootstrap: got {bootstrap}; allowed 0 (Jacobian) or 10..{MAX_BOOTSTRAP} resamples")
    if len(point) > MAX_CLI_POINTS:  # each is a residual of every fit iteration
        _fail(f"point: got {len(point):,} --point values; allowed at most {MAX_CLI_POINTS:,} (more: a dataset, "
              "specsim validate)")
    if len(from_log) > MAX_LOGS:
        _fail(f"from-log: got {len(from_log):,} files; allowed at most {MAX_LOGS}")
    logs = [os.path.realpath(f) for f in from_log]
    twice = next((f for i, f in enumerate(from_log) if logs[i] in logs[:i]), None)
    if twice is not None:  # its cycles would count twice in the fit
        _fail(f"from-log: got {twice!r} twice; allowed: each log once")
    from .physics.rules import check_limit

    for name, value in (("Workload.batch", batch), ("Workload.ctx", ctx)):  # the ranges predict's flags are held to
        if value is not None:
            check_limit(name, value)
    pts = [parse_point(x) for x in point]
    sc = base_scenario(model, gpu, tp, dtype=dtype, ctx=ctx, batch=batch, moe_kernel=moe_kernel, graph=graph, engine=engine,
                       allreduce=allreduce)
    if profile is not None:
        from .analysis.profile_fit import apply_profile

        sc = apply_profile(sc, profile)
    cycles: list[dict] = []
    ingest_note = ""
    baseline_from = "baseline-tok-s"
    if from_log:
        from .io.ingest import IngestError, ingest_files

        try:
            res = ingest_files([str(f) for f in from_log])
        except IngestError as exc:  # a file that cannot be read or holds no record: name the flag
            _fail(f"from-log: {' '.join(str(exc).split())}")
        ingest_idle = res.lines_idle
        for c in res.cycle_points():
            if c.get("baseline"):
                if baseline_tok_s is None and c.get("tok_s"):
                    baseline_tok_s = float(c["tok_s"]) / max(float(c.get("batch") or 1), 1.0) * sc.workload.batch
                    baseline_from = "from-log"
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
        ingest_note = (f"ingested {len(from_log)} file(s): {len(cycles)} cycle point(s), {res.lines_skipped} line(s) "
                       f"skipped, {ingest_idle} idle/warm-up decode line(s) dropped")
    if bootstrap < 0:
        _fail(f"bootstrap: got {bootstrap}; must be 0 (Jacobian) or >= 10 resamples")
    result = fit(sc, pts, baseline_tok_s=baseline_tok_s, cycles=cycles, bootstrap=bootstrap,
                 fields={"verify": "point", "baseline": baseline_from, "cycle": "from-log"},
                 data_from=_calibration_sources(point, baseline_from if baseline_tok_s is not None else None, from_log))
    text = result.scenario.model_dump_json(indent=1) + "\n"
    if as_json:
        _emit(result.to_dict())
    else:  # the tables are for a reader: on standard error where standard output takes the scenario
        typer.echo(table_text(["parameter", "fitted", "unit", "prior", "90% range", "pinned by data"], result.table_rows(),
                              f"calibrated {result.scenario.name}"), err=to_stdout)
        typer.echo("", err=to_stdout)
        shown = result.residuals[:MAX_RESIDUAL_ROWS]
        typer.echo(table_text(["point", "measured ms", "model ms", "residual %"],
                              [[r["what"], r["ms"], r["model_ms"], r["error_pct"]] for r in shown], "residuals"),
                   err=to_stdout)
        if len(result.residuals) > len(shown):
            typer.echo(f"... {len(result.residuals) - len(shown):,} more points (--json lists every one)", err=to_stdout)
        if ingest_note:
            typer.echo(ingest_note, err=to_stdout)
        for w in result.warnings:
            typer.echo(f"warning: {w}", err=True)
    write_atomic(out, text)
    if not to_stdout:
        typer.echo(f"wrote {out}", err=True)


MAX_SOURCES_SHOWN = 8  # --point values / log names a calibrated scenario's description names (the rest counted)


def _calibration_sources(points: list[str], baseline: str | None, logs: list[str]) -> str:
    """Where calibrate's measurements came from, for the scenario it writes: ``--point 4=7.6 8=8.5; --from-log a.log``."""
    def few(items: list[str]) -> str:
        more = len(items) - MAX_SOURCES_SHOWN
        return " ".join(items[:MAX_SOURCES_SHOWN]) + (f" (+{more} more)" if more > 0 else "")

    parts = [f"--point {few([' '.join(p.split()) for p in points])}"] if points else []
    if baseline == "baseline-tok-s":
        parts.append("--baseline-tok-s")
    if logs:
        parts.append(f"--from-log {few([os.path.basename(f) for f in logs])}")
    return "; ".join(parts)


@app.command()
def validate(
    dataset: str = typer.Argument(..., help="dataset JSON (or built-in name, e.g. kimi-k2.5-seed)"),
    fit_tokens: str | None = typer.Option(
        None, "--fit", help="token counts to calibrate on (point datasets; default 3,6)", show_default=False
    ),
    max_mape: float | None = typer.Option(None, "--max-mape", help="exit 1 if the held-out MAPE (%) exceeds this (replayed, and eager where the dataset has eager_points)"),
    fmt: Fmt = typer.Option(Fmt.text, "--format", help="text, markdown (md: the README's accuracy tables) or json"),
    as_json: bool = JsonOpt,
) -> None:
    """Calibrate on a subset of measured points and score the prediction of all of them.

    Example: specsim validate calibration/datasets/h200-llama-3.1-8b-forwards-eager-ctx2048.json --max-mape 10
    """
    from .analysis.calibrate import validate as _validate
    from .analysis.validate_sweeps import (
        held_out_errors,
        is_sweeps_dataset,
        sweeps_markdown,
        sweeps_text,
        validate_sweeps,
    )
    from .output.render import table_markdown, table_text

    as_json = _json_out(fmt, as_json)
    markdown = fmt in (Fmt.markdown, Fmt.md)
    if max_mape is not None and not max_mape >= 0:
        _fail(f"max-mape: got {max_mape}; must be a percentage >= 0")
    if is_sweeps_dataset(dataset):  # published batch sweeps: tau fitted at the smallest batch, the rest held out
        if fit_tokens is not None:
            _fail(f"fit: got {fit_tokens!r}; allowed only with a dataset of measured points (a sweeps dataset fits "
                  "the accept length at each sweep's smallest batch)")
        vs = validate_sweeps(dataset)
        if as_json:
            _emit(vs.to_dict())
        elif markdown:
            typer.echo(sweeps_markdown(vs))
        else:
            typer.echo(sweeps_text(vs))
        errs = held_out_errors(vs)
        if max_mape is not None and errs and sum(errs) / len(errs) > max_mape:
            typer.echo(f"error: held-out MAPE {sum(errs) / len(errs):.2f}% exceeds --max-mape {max_mape}", err=True)
            raise typer.Exit(1)
        return
    v = _validate(dataset, _ints("3,6" if fit_tokens is None else fit_tokens, "fit"))
    if as_json:
        _emit(v.to_dict())
    else:
        rows = [[r["tokens"], r["batch"], r["ctx"], r["measured_ms"], r["predicted_ms"], r["error_pct"],
                 "fit" if r["in_fit"] else ""] for r in v.rows]
        head = ["tokens", "batch", "ctx", "measured ms", "predicted ms", "error %", ""]
        title = f"{v.dataset}: fit on {v.fit_tokens} tokens at its own batch and context; the rest held out"
        typer.echo(table_markdown(head, rows) if markdown else table_text(head, rows, title))
        scope = "held-out points" if v.held_out else "all points (every point was in the fit)"
        typer.echo(f"MAPE {v.mape_pct:.2f}%  median {v.median_ape_pct:.2f}%  worst {v.max_ape_pct:.2f}%  over {scope}"
                   f"; all points: MAPE {v.mape_all_pct:.2f}%")
        if v.eager_rows:
            eager = v.eager_summary()
            rows = [[r["tokens"], r["batch"], r["ctx"], r["measured_ms"], r["predicted_ms"], r["error_pct"],
                     "preset" if r["in_fit"] else ""] for r in v.eager_rows]
            title = (f"{v.dataset}, the same forwards launched eagerly: the fitted numbers on the eager path, nothing "
                     "refitted (preset: the points the engine preset's host time per kernel was measured on)")
            typer.echo("")
            typer.echo(f"*{title}*\n\n{table_markdown(head, rows)}" if markdown else table_text(head, rows, title))
            if eager:
                typer.echo(f"eager: MAPE {eager['mape_pct']:.2f}%  worst {eager['max_ape_pct']:.2f}%  over "
                           f"{eager['held_out_points']} held-out points")
    if max_mape is not None:
        eager = v.eager_summary()
        for what, mape in (("MAPE", v.mape_pct), ("eager MAPE", eager["mape_pct"] if eager else None)):
            if mape is not None and mape > max_mape:
                typer.echo(f"error: {what} {mape:.2f}% exceeds --max-mape {max_mape}", err=True)
                raise typer.Exit(1)


@app.command()
def ingest(
    files: list[str] = typer.Argument(..., help="SGLang server logs, bench_speculative/bench_serving JSONL, vLLM logs"),
    as_json: bool = JsonOpt,
) -> None:
    """Summarise engine output: accept length, throughput, step time, per-position rates.

    Example: specsim ingest examples/sglang_server.log examples/bench_speculative.jsonl
    """
    from .io.ingest import ingest_files

    # corrupt lines are skipped and counted; files with no record at all are one line and exit 2
    res = ingest_files([str(f) for f in files])
    if as_json:
        d = res.to_dict()
        d["summary"] = res.summary()
        d["cycle_points"] = res.cycle_points()
        _emit(d)
        return
    summ = res.summary()
    if summ:
        from .output.render import ingest_summary_text

        typer.echo(ingest_summary_text(summ))
    rates = res.acceptance_rates()
    if rates:
        typer.echo("per-position conditional acceptance: " + ", ".join(f"{r:.3f}" for r in rates))
    if res.kv_pools:
        pools = ", ".join(f"{t:,}" for t in res.kv_pools)
        typer.echo(f"KV-cache pool per GPU: {pools} tokens (pass --kv-pool-tokens {res.kv_pools[-1]} to predict/sweep"
                   + (": the files hold several launches" if len(res.kv_pools) > 1 else "") + ")")
    typer.echo(f"formats: {res.formats}; lines: {res.lines_total} read, {res.lines_skipped} skipped (corrupt), "
               f"{res.lines_ignored} unrelated, {res.lines_idle} idle/warm-up decode lines dropped")


@app.command()
def routing(
    files: list[str] = typer.Argument(..., help="expert counts: SGLang's expert-distribution CSV dumps "
                                      "(layer_id,expert_id,count; one per rank adds up) or JSON per-layer counts"),
    model: str | None = typer.Option(None, "--model", help="MoE model preset or config.json: its experts and top-k"),
    num_experts: int | None = typer.Option(None, "--num-experts", help="routed experts per layer (instead of --model)"),
    top_k: int | None = typer.Option(None, "--top-k", help="experts each token picks (instead of --model)"),
    fmt: Fmt = typer.Option(Fmt.text, "--format", help="text, markdown (md) or json"),
    as_json: bool = JsonOpt,
) -> None:
    """Measure a MoE router's skew across its experts from the engine's expert counts (--routing-skew).

    Example: specsim routing expert_distribution_rank0_timestamp1744347750.csv --model qwen3-30b-a3b
    """
    from .analysis.routing import fit_routing
    from .io.checks import check_int
    from .io.expert_counts import MAX_EXPERT_ID, read_expert_counts

    want_json = _json_out(fmt, as_json)
    e, k = num_experts, top_k
    for name, v in (("num-experts", e), ("top-k", k)):
        if v is not None:
            check_int(v, name, 1, MAX_EXPERT_ID + 1)  # target.moe's range
    if model is not None:
        if e is not None or k is not None:
            _fail("model: give --model or --num-experts/--top-k, not both")
        from .io.presets import get_model

        target, _ = get_model(model)
        if target.moe is None:
            from .analysis.build import no_routed_experts

            raise no_routed_experts("model", model, target.name)
        e, k = target.moe.num_experts, target.moe.experts_per_token
    fit = fit_routing(read_expert_counts(files), e, k)
    if want_json:
        _emit(fit.to_dict())
        return
    from .output.render import routing_text

    typer.echo(routing_text(fit, markdown=fmt.value in ("markdown", "md")))


def _float_list(text: str | None, field: str) -> list[float] | None:
    """Comma list of finite floats and inclusive ranges START:STOP:STEP (e.g. 1.5:3.5:0.25), sized first."""
    from .io.args import parse_float_ranges

    return None if text is None else parse_float_ranges(text, field)


@app.command()
@deployment_options(skip=("gpu", "tp", "batch", "ctx", "steps", "topk", "draft_tokens", "accept", "accept_rates",
                          "routing_skew"))
def sweep(
    steps: str | None = typer.Option(None, "--steps", help="draft steps to sweep, e.g. 1-10 or 1,2,4"),
    topk: str | None = typer.Option(None, "--topk", help="branching values to sweep, e.g. 1,2,4"),
    draft_tokens: str | None = typer.Option(None, "--draft-tokens", help="verify widths to sweep (for topk > 1)"),
    accept: str | None = typer.Option(None, "--accept", help="accept lengths at --accept-at-steps, e.g. 1.5:3.5:0.5"),
    accept_at_steps: int | None = typer.Option(None, "--accept-at-steps", help="steps the --accept values refer to"),
    accept_rates: str | None = typer.Option(None, "--accept-rates", help="profiles separated by ';', e.g. '0.8,0.6;0.7,0.5'"),
    tp: str | None = typer.Option(None, "--tp", help="tensor-parallel sizes, e.g. 4,8"),
    batch: str | None = typer.Option(None, "--batch", help="batch sizes, e.g. 1,8,32 or 1-64"),
    ctx: str | None = typer.Option(None, "--ctx", help="context lengths, e.g. 2048,8192"),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU presets, e.g. h100,h200,b200"),
    allreduce_scale: str | None = typer.Option(None, "--allreduce-scale", help="all-reduce latency multipliers, e.g. 0.5,1"),
    routing_locality: str | None = typer.Option(None, "--routing-locality", help="a MoE verify's routing locality "
                                                "rho in [0, 1] (1: tokens route independently), e.g. 0.4:1:0.2"),
    routing_skew: str | None = typer.Option(None, "--routing-skew", help="a MoE router's skew across experts c, one "
                                            "value or several to sweep, e.g. 0:1.5:0.25 (default: the prior)"),
    top: int = typer.Option(15, "--top", help="rows in the ranked table"),
    csv: str | None = typer.Option(None, "--csv", help="write every configuration as CSV ('-' for stdout)"),
    fmt: Fmt = typer.Option(Fmt.text, "--format", help="text, markdown (md) or json"),
    as_json: bool = JsonOpt,
    deploy: dict | None = None,
) -> None:
    """Sweep configurations (vectorised); print the best and a ranked table.

    One value of --gpu, --tp, --batch or --ctx sets the deployment (with --model, its name);
    several are swept.

    Example: specsim sweep --model llama-3.1-70b --gpu h100 --tp 4 --steps 1-8 --accept-rates 0.8,0.7,0.6
    """
    from .analysis.build import build_scenario
    from .analysis.sweep import sweep as _sweep
    from .output.render import sweep_markdown, sweep_text

    if top < 1:
        _fail(f"top: got {top}; must be an integer >= 1")
    if csv == "-" and (as_json or fmt != Fmt.text):
        _fail(f"csv: got '-'; standard output already takes the {'JSON' if as_json or fmt == Fmt.json else fmt.value} "
              "table: write the CSV to a file")
    profiles = None
    if accept_rates is not None:
        profiles = [_floats(x, "accept-rates") for x in split_items(accept_rates, "accept-rates", ";", "0.8,0.6;0.7,0.5")]
        if not profiles:
            _fail(f"accept-rates: got {accept_rates!r}; expected at least one profile")
    gpus = split_items(gpu, "gpu", example="h100,h200") if gpu is not None else None
    if gpus == []:
        _fail(f"gpu: got {gpu!r}; expected at least one GPU preset, e.g. h100,h200")
    tps = _ints(tp, "tp") if tp is not None else None
    batches = _ints(batch, "batch") if batch is not None else None
    ctxs = _ints(ctx, "ctx") if ctx is not None else None
    if csv is not None:
        from .io.files import check_output

        check_output(csv, _input_files(deploy))
    scenario, kw = _split_scenario(deploy or {})
    skews = _float_list(routing_skew, "routing-skew")
    # a single value is the deployment itself (named after it); several are swept axes
    for key, vals in (("gpu", gpus), ("tp", tps), ("batch", batches), ("ctx", ctxs), ("routing_skew", skews)):
        if vals is not None and len(vals) == 1:
            kw[key] = vals[0]
    base = build_scenario(scenario, **kw)
    res = _sweep(
        base,
        steps=_ints(steps, "steps") if steps is not None else None, topk=_ints(topk, "topk") if topk is not None else None,
        draft_tokens=_ints(draft_tokens, "draft-tokens") if draft_tokens is not None else None,
        accept=_float_list(accept, "accept"), accept_at_steps=accept_at_steps, accept_rates=profiles,
        tp=tps if tps and len(tps) > 1 else None, batch=batches if batches and len(batches) > 1 else None,
        ctx=ctxs if ctxs and len(ctxs) > 1 else None, gpu=gpus if gpus and len(gpus) > 1 else None,
        allreduce_scale=_float_list(allreduce_scale, "allreduce-scale"),
        routing_locality=_float_list(routing_locality, "routing-locality"),
        routing_skew=skews if skews and len(skews) > 1 else None,
    )
    if csv is not None:
        from .io.files import write_atomic

        write_atomic(csv, res.iter_csv())  # in pieces: a 9M-row CSV is never held whole
        if str(csv) == "-":
            return
        typer.echo(f"wrote {res.n:,} rows to {csv}", err=True)
    if _json_out(fmt, as_json):
        _emit(res.to_dict(top))
    elif fmt in (Fmt.markdown, Fmt.md):
        typer.echo(sweep_markdown(res, top))
    else:
        typer.echo(sweep_text(res, top))


def _show_whatif(res, as_json: bool, fmt: Fmt) -> None:
    if _json_out(fmt, as_json):
        _emit(res.to_dict())
    elif fmt in (Fmt.markdown, Fmt.md):
        typer.echo(res.markdown())
    else:
        typer.echo(repr(res))


FmtOpt = typer.Option(Fmt.text, "--format", help="text, markdown (md) or json")


@whatif_app.command("training")
@deployment_options()
def whatif_training_cmd(
    target_samples: str = typer.Option("1.4M", "--target-samples", help="draft training samples to evaluate, e.g. 1.4M"),
    current_samples: str | None = typer.Option(None, "--current-samples", help="samples today's draft was trained on "
                                               "(default: the scenario's draft.training_samples)"),
    data: list[str] = typer.Option([], "--data", help="extra point SAMPLES=TAU[@STEPS], e.g. 100K=2.6; repeat"),
    only_data: bool = typer.Option(False, "--only-data", help="fit to the --data points alone (no published drafts)"),
    gpu_hours_per_100k: float | None = typer.Option(None, "--gpu-hours-per-100k", help="data generation + training "
                                                    "GPU-hours per 100K samples (default: scaled to this target and draft)"),
    fleet_tokens_per_day: float = typer.Option(1e9, "--fleet-tokens-per-day", help="tokens served per day"),
    gpus_per_replica: int | None = typer.Option(None, "--gpus-per-replica", help="GPUs per serving replica (default: TP)"),
    max_steps: int = typer.Option(10, "--max-steps", help="largest step count searched for the best one"),
    fmt: Fmt = FmtOpt,
    as_json: bool = JsonOpt,
    deploy: dict | None = None,
) -> None:
    """Accept length vs draft training samples (fitted, with band), tok/s and payback.

    Example: specsim whatif training --model llama-3.1-70b --gpu h100 --tp 4 --target-samples 1M
    """
    from .analysis.training import whatif_training

    scenario, kw = _split_scenario(deploy or {})
    res = whatif_training(
        scenario, target_samples=_samples(target_samples, "target-samples"),
        current_samples=_samples(current_samples, "current-samples") if current_samples is not None else None,
        data=data or None, max_steps=max_steps,
        gpu_hours_per_100k_samples=gpu_hours_per_100k, fleet_tokens_per_day=fleet_tokens_per_day,
        gpus_per_replica=gpus_per_replica, use_default_data=not only_data, **kw,
    )
    for w in res.warnings:
        typer.echo(f"warning: {w}", err=True)
    if _json_out(fmt, as_json):
        _emit(res.to_dict())
    elif fmt in (Fmt.markdown, Fmt.md) and hasattr(res, "markdown"):
        typer.echo(res.markdown())
    else:
        typer.echo(repr(res))


@whatif_app.command("allreduce")
@deployment_options()
def whatif_allreduce_cmd(
    scale: float | None = typer.Option(None, "--scale", help="multiply all-reduce latency, e.g. 0.5"),
    impl: str | None = typer.Option(None, "--impl", help="all-reduce preset (nccl-nvlink4, sglang-custom-nvlink4, nvls, ...)"),
    alpha_us: float | None = typer.Option(None, "--alpha-us", help="set all-reduce latency (us) at the scenario's TP"),
    seed_tuning: bool = typer.Option(False, "--seed-nccl-tuning", help="the founding case: untuned -> tuned NCCL"),
    fmt: Fmt = FmtOpt,
    as_json: bool = JsonOpt,
    deploy: dict | None = None,
) -> None:
    """All-reduce latency or implementation (e.g. the seed's NCCL tuning).

    Example: specsim whatif allreduce --model llama-3.1-70b --gpu h100 --tp 4 --scale 0.5
    """
    from .analysis.whatif import seed_nccl_tuning, whatif_allreduce

    scenario, kw = _split_scenario(deploy or {})
    if seed_tuning and (deploy or any(x is not None for x in (scale, impl, alpha_us))):
        _fail("seed-nccl-tuning: compares the two built-in seed scenarios; it takes no deployment option, "
              "--scale, --impl or --alpha-us")
    res = seed_nccl_tuning() if seed_tuning else whatif_allreduce(scenario, scale=scale, impl=impl, alpha_us=alpha_us, **kw)
    _show_whatif(res, as_json, fmt)


@whatif_app.command("gpu")
@deployment_options()
def whatif_gpu_cmd(
    to: str = typer.Option(..., "--to", help="GPU preset to move to"),
    fmt: Fmt = FmtOpt,
    as_json: bool = JsonOpt,
    deploy: dict | None = None,
) -> None:
    """Swap the GPU of the same deployment (its numbers and default graph all-reduce; engine kept).

    Example: specsim whatif gpu --model llama-3.1-70b --gpu h100 --tp 4 --to b200
    """
    from .analysis.whatif import whatif_gpu

    scenario, kw = _split_scenario(deploy or {})
    _show_whatif(whatif_gpu(scenario, to=to, **kw), as_json, fmt)


@whatif_app.command("tp")
@deployment_options()
def whatif_tp_cmd(
    to: int = typer.Option(..., "--to", help="TP size to move to"),
    fmt: Fmt = FmtOpt,
    as_json: bool = JsonOpt,
    deploy: dict | None = None,
) -> None:
    """Change the tensor-parallel size.

    Example: specsim whatif tp --model llama-3.1-70b --gpu h100 --tp 4 --to 8
    """
    from .analysis.whatif import whatif_tp

    scenario, kw = _split_scenario(deploy or {})
    _show_whatif(whatif_tp(scenario, to=to, **kw), as_json, fmt)


@whatif_app.command("quant")
@deployment_options(skip=("dtype",))
def whatif_quant_cmd(
    dtype: str = typer.Option(..., "--dtype", help="dtype to move to: fp32, bf16, fp16, fp8, int8, int4 or fp4 "
                              "(every dtype the cost model has bytes for; --dtype's bf16, fp8, int4 among them)"),
    target: str | None = typer.Option(None, "--target", help="routed_experts, shared_experts, attention, dense_mlp, all "
                                      "(default: routed_experts on a MoE, all on a dense model)"),
    fmt: Fmt = FmtOpt,
    as_json: bool = JsonOpt,
    deploy: dict | None = None,
) -> None:
    """Quantise the experts (or other weights).

    Example: specsim whatif quant --model llama-3.1-70b --gpu h100 --tp 4 --dtype fp8 --target all
    """
    from .analysis.whatif import whatif_quant

    scenario, kw = _split_scenario(deploy or {})
    _show_whatif(whatif_quant(scenario, dtype=dtype, target=target, **kw), as_json, fmt)


@whatif_app.command("graph")
@deployment_options()
def whatif_graph_cmd(
    phase: str = typer.Option(..., "--phase", help="decode, verify, draft or draft_extend"),
    on: bool | None = typer.Option(None, "--on/--off", help="capture the phase in a CUDA graph, or run it eagerly (required)"),
    fmt: Fmt = FmtOpt,
    as_json: bool = JsonOpt,
    deploy: dict | None = None,
) -> None:
    """Turn CUDA-graph capture of one phase on or off.

    Example: specsim whatif graph --model llama-3.1-70b --gpu h100 --tp 4 --phase verify --off
    """
    from .analysis.whatif import whatif_graph

    if on is None:
        _fail("on/off: say --on or --off")
    scenario, kw = _split_scenario(deploy or {})
    _show_whatif(whatif_graph(scenario, phase=phase, on=on, **kw), as_json, fmt)


@whatif_app.command("overlap")
@deployment_options()
def whatif_overlap_cmd(
    on: bool | None = typer.Option(None, "--on/--off", help="overlap scheduler for speculative cycles (required)"),
    fmt: Fmt = FmtOpt,
    as_json: bool = JsonOpt,
    deploy: dict | None = None,
) -> None:
    """Overlap scheduler on or off (SGLang spec v2 vs v1).

    Example: specsim whatif overlap --model llama-3.1-70b --gpu h100 --tp 4 --on
    """
    from .analysis.whatif import whatif_overlap

    if on is None:
        _fail("on/off: say --on or --off")
    scenario, kw = _split_scenario(deploy or {})
    _show_whatif(whatif_overlap(scenario, on=on, **kw), as_json, fmt)


@whatif_app.command("running-cap")
@deployment_options(skip=("max_running_requests",))
def whatif_running_cap_cmd(
    to: int | None = typer.Option(None, "--to", help="requests the launch runs at once (SGLang --max-running-requests; "
                                  "required)"),
    fmt: Fmt = FmtOpt,
    as_json: bool = JsonOpt,
    deploy: dict | None = None,
) -> None:
    """Raise or lower the cap on requests run at once (SGLang runs 48 with speculation unless the launch says).

    Example: specsim whatif running-cap --model qwen3-8b --gpu h100 --tp 1 --batch 128 --to 128
    """
    from .analysis.whatif import whatif_running_cap

    if to is None:
        _fail("to: give --to N, the requests run at once")
    scenario, kw = _split_scenario(deploy or {})
    _show_whatif(whatif_running_cap(scenario, to=to, **kw), as_json, fmt)


@whatif_app.command("routing")
@deployment_options()
def whatif_routing_cmd(
    locality: float | None = typer.Option(None, "--locality", help="rho in [0, 1]: each request's k verify tokens "
                                          "read the experts of 1 + rho (k - 1) independent tokens (the presets' "
                                          "prior is 1, public counts on real text give 0.44-0.8)"),
    skew: float | None = typer.Option(None, "--skew", help="c in [0, 3]: the CV of the router's per-expert token "
                                      "share (the prior 1.13 from public decode traces; 0: uniform routing)"),
    fmt: Fmt = FmtOpt,
    as_json: bool = JsonOpt,
    deploy: dict | None = None,
) -> None:
    """Routing of a MoE: locality of its verify tokens and skew across its experts (fewer distinct experts read).

    Example: specsim whatif routing --model qwen3-30b-a3b --gpu h200 --tp 1 --batch 8 --locality 0.55
    """
    from .analysis.whatif import whatif_routing

    scenario, kw = _split_scenario(deploy or {})
    _show_whatif(whatif_routing(scenario, locality=locality, skew=skew, **kw), as_json, fmt)


class ExplainFmt(str, Enum):
    markdown = "markdown"
    md = "md"
    latex = "latex"
    text = "text"
    json = "json"


@app.command()
@deployment_options()
def explain(
    fmt: ExplainFmt = typer.Option(ExplainFmt.text, "--format", help="text (terminal), markdown, latex or json"),
    as_json: bool = JsonOpt,
    deploy: dict | None = None,
) -> None:
    """Closed forms (sympy): break-even accept length, optimal steps, elasticities, with numbers.

    Example: specsim explain --model llama-3.1-70b --gpu h100 --tp 4 --accept 2.8
    """
    from .analysis.symbolic import closed_forms
    from .analysis.symbolic import explain as _explain

    scenario, kw = _split_scenario(deploy or {})
    if _json_out(fmt, as_json):
        _emit(closed_forms(scenario, **kw).to_dict())
        return
    typer.echo(_explain(scenario, fmt="markdown" if fmt == ExplainFmt.md else fmt.value, **kw))


@app.command()
@deployment_options()
def report(
    out: str = typer.Option(..., "--out", "-o", help="report file (written atomically)"),
    sweep: str = typer.Option("1-10", "--sweep", help="draft steps to sweep, e.g. 1-10 or 1,2,4"),
    accept_lengths: str | None = typer.Option(None, "--accept-lengths", help="extra accept lengths (tau at the "
                                              "scenario's steps), e.g. 1.7,2.5"),
    whatif: str = typer.Option("1.4M", "--whatif", help="draft training samples for the training what-if, e.g. 1.4M"),
    current_samples: str | None = typer.Option(None, "--current-samples", help="samples today's draft was trained on "
                                               "(default: the scenario's draft.training_samples)"),
    fmt: str | None = typer.Option(None, "--format", help="html, md or json (default: from the --out suffix: .html/.htm, "
                                   ".md/.markdown, .json; the two must agree)"),
    deploy: dict | None = None,
) -> None:
    """One self-contained report: summary, cycle, steps sweep, verify curve, training what-if, sensitivity, inputs.

    Example: specsim report --model llama-3.1-70b --gpu h100 --tp 4 --out plan.html
    """
    from .analysis.build import build_scenario
    from .io.files import check_output
    from .output.report import report_format, write_report

    samples = _samples(whatif, "whatif")
    now = _samples(current_samples, "current-samples") if current_samples is not None else None
    check_output(out, _input_files(deploy))
    fmt = report_format(out, fmt)  # before any work: --format and the --out suffix agree
    taus = _floats(accept_lengths, "accept-lengths")
    if taus is not None and len(taus) > MAX_REPORT_ACCEPT_LENGTHS:  # each adds a sweep and a table row
        _fail(f"accept-lengths: got {len(taus):,} values; allowed at most {MAX_REPORT_ACCEPT_LENGTHS}")
    scenario, kw = _split_scenario(deploy or {})
    sc = build_scenario(scenario, **kw)
    from .analysis.build import check_accept
    from .analysis.sweep import MAX_STEPS

    steps = _ints(sweep, "sweep", 1, MAX_STEPS)
    for t in taus or ():  # each is tau at the scenario's own steps, checked under this flag's name
        check_accept(t, sc.speculation.steps, "accept-lengths")
    used = write_report(out, fmt=fmt, scenario=sc, sweep_steps=steps,
                        accept_lengths=taus, training_target_samples=samples,
                        training_current_samples=now)
    if str(out) != "-":
        typer.echo(f"wrote {out} ({used})", err=True)


def _given_value(param, argv: list[str], cmd=None) -> str | None:
    """The text the user gave for a click option (``--opt VALUE`` or ``--opt=VALUE``; the last one, which click
    keeps), for error lines; read as click reads the words (:func:`_option_words`)."""
    opts = list(getattr(param, "opts", None) or []) + list(getattr(param, "secondary_opts", None) or [])
    if not opts:
        return None
    try:
        _, given = _option_words(cmd if cmd is not None else typer.main.get_command(_app_for(argv)), argv)
    except Exception:  # noqa: BLE001 - only an error line is being worded; never fail it
        return None
    return max(((pos, v) for o in opts for pos, v in given.get(o, []) if v is not None), default=(0, None))[1]


def _refuse_opposite_flags(args: list[str], cmd=None) -> None:
    """One line and exit 2 where a command is given both flags of one on/off option (``calibrate --graph --eager``):
    click would take the last of the two silently. The pairs are the click command's own (``--a/--b`` options of
    the command ``args`` name; ``cmd`` is the click command built for them). Words are read as click reads them: a
    word that is another option's value (``--out --eager``) is neither a flag nor ``--help``; help shown wins."""
    from .errors import SpecsimError

    cmd = cmd if cmd is not None else typer.main.get_command(_app_for(args))
    cmd, given = _option_words(cmd, args)
    if "--help" in given:
        return
    for opt in cmd.params:
        if getattr(opt, "secondary_opts", None):
            on = next((o for o in opt.opts if o in given), None)
            off = next((o for o in opt.secondary_opts if o in given), None)
            if on and off:
                raise SpecsimError(f"{on}/{off}", f"{on} {off}", "give one of the two (they are one option)")


def _option_words(cmd, args: list[str]):
    """(the (sub)command the leading words of ``args`` name, {option name: [(word index, its value or None for a
    flag), ...]} of the words after it that click reads as option names): an option that takes a value takes the
    next word (or its ``=VALUE``), which is then no option; ``--`` ends them. Duck-typed: click, or the copy typer
    vendors."""
    i = 0
    while i < len(args):  # down to the (sub)command
        sub = (getattr(cmd, "commands", None) or {}).get(args[i])
        if sub is None:
            break
        cmd, i = sub, i + 1
    takes_value = {o: not getattr(p, "is_flag", False) and getattr(p, "nargs", 0) != 0 for p in cmd.params
                   for o in [*(getattr(p, "opts", None) or []), *(getattr(p, "secondary_opts", None) or [])]
                   if o.startswith("-")}
    given: dict[str, list[tuple[int, str | None]]] = {}
    while i < len(args):
        word = args[i]
        if word == "--":
            break
        name = word.split("=", 1)[0] if word.startswith("--") else word
        if name in takes_value or name == "--help":
            value = None
            if takes_value.get(name):
                if "=" in word:
                    value = word.split("=", 1)[1]
                elif i + 1 < len(args):
                    value = args[i + 1]
                    i += 1  # the value
            given.setdefault(name, []).append((i, value))
        i += 1
    return cmd, given


def _app_for(args: list[str]) -> typer.Typer:
    """The app to parse ``args`` with: where they start with a top-level command's name, an app of that command
    alone (typer builds the click command of every registered command on each call, ~35 ms for this app's,
    more than the rest of a ``predict``); else the whole app (help, groups, unknown names)."""
    if not args:
        return app
    from typer.main import get_command_name

    infos = [c for c in app.registered_commands if (c.name or get_command_name(c.callback.__name__)) == args[0]]
    if len(infos) != 1:
        return app
    one = typer.Typer(add_completion=False, pretty_exceptions_enable=False, help=app.info.help)
    one.registered_commands = infos
    one.callback()(lambda: None)  # a group still: the command's name is read as the whole app reads it
    return one


def main(argv: list[str] | None = None) -> None:
    """Console entry point: SpecsimError and click usage errors exit 2 with one line, no traceback."""
    import warnings

    from pydantic import ValidationError

    from .errors import SpecsimError, from_validation_error, one_line, short_repr
    from .io.args import click_message_to_field

    args, cmd = sys.argv[1:] if argv is None else list(argv), None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy warnings are not output; errors say what failed
            cmd = typer.main.get_command(_app_for(args))  # what calling the typer app builds, built once
            _refuse_opposite_flags(args, cmd)
            rv = cmd.main(args=args, standalone_mode=False, prog_name="specsim")
    except SpecsimError as exc:
        typer.echo(f"error: {one_line(exc)}", err=True)
        sys.exit(2)
    except ValidationError as exc:  # a model built from user input outside scenario_from_dict
        typer.echo(f"error: {one_line(from_validation_error(exc))}", err=True)
        sys.exit(2)
    except (RecursionError, OverflowError, ZeroDivisionError, MemoryError) as exc:
        typer.echo(f"error: input: values out of the modelled range ({type(exc).__name__}: {one_line(exc)[:120]})",
                   err=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except Exception as exc:  # click usage errors (vendored by typer) and bad files: one line, exit 2
        if hasattr(exc, "format_message"):
            msg = click_message_to_field(one_line(exc.format_message()))
            given = _given_value(getattr(exc, "param", None), args, cmd)
            if msg and given is not None and ": got " not in msg and ": " in msg:  # name the value the user gave
                field, why = msg.split(": ", 1)
                msg = f"{field}: got {short_repr(given)}; {why.removeprefix('Value error, ')}"
            if msg:  # no-args help has already been shown and carries no message
                typer.echo(f"error: {msg}", err=True)
            sys.exit(getattr(exc, "exit_code", 2) or 2)
        if isinstance(exc, OSError) and exc.filename is not None:  # a file name the system refuses (too long, ...)
            typer.echo(f"error: file: got {short_repr(str(exc.filename))}; {exc.strerror or 'cannot be used'}", err=True)
            sys.exit(2)
        if isinstance(exc, OSError) and exc.errno is not None:  # writing the output failed (a full disk, a closed pipe)
            typer.echo(f"error: output: cannot write ({exc.strerror or exc})", err=True)
            sys.exit(2)
        if isinstance(exc, (OSError, ValueError)):
            typer.echo(f"error: {one_line(exc)[:400]}", err=True)
            sys.exit(2)
        raise
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    main()
