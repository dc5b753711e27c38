"""Command line: parse, call the library, render. Bad input -> one line on stderr, exit 2."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="specsim: predict speculative-decoding (EAGLE-3) tok/s from physics, calibrated by a few timings.",
)
scenario_app = typer.Typer(no_args_is_help=True, help="Show or dump scenarios as JSON.")
app.add_typer(scenario_app, name="scenario")


class Fmt(str, Enum):
    text = "text"
    markdown = "markdown"
    md = "md"
    json = "json"


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def _floats(text: Optional[str], field: str) -> Optional[list[float]]:
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


def _emit(obj: dict) -> None:
    typer.echo(json.dumps(obj, indent=2, default=float))


ScenarioOpt = typer.Option(None, "--scenario", "-s", help="built-in scenario name or scenario JSON file")
ModelOpt = typer.Option(None, "--model", help="model preset or path to a Hugging Face config.json")
GpuOpt = typer.Option(None, "--gpu", help="GPU preset (h100, h200, b200, h20, a100)")
TpOpt = typer.Option(None, "--tp", help="tensor-parallel size")
BatchOpt = typer.Option(None, "--batch", help="concurrent requests")
CtxOpt = typer.Option(None, "--ctx", help="context length in tokens")


@app.command()
def predict(
    scenario: Optional[str] = ScenarioOpt,
    model: Optional[str] = ModelOpt,
    gpu: Optional[str] = GpuOpt,
    tp: Optional[int] = TpOpt,
    steps: Optional[int] = typer.Option(None, "--steps", help="draft steps (tree depth)"),
    topk: Optional[int] = typer.Option(None, "--topk", help="branching per draft step (1 = chain)"),
    draft_tokens: Optional[int] = typer.Option(None, "--draft-tokens", help="verify width; topk=1 forces steps+1"),
    accept: Optional[float] = typer.Option(None, "--accept", help="accept length tau at these steps (bonus included)"),
    accept_rates: Optional[str] = typer.Option(None, "--accept-rates", help="conditional acceptance per position, e.g. 0.8,0.6"),
    batch: Optional[int] = BatchOpt,
    ctx: Optional[int] = CtxOpt,
    engine: Optional[str] = typer.Option(None, "--engine", help="engine preset (sglang, sglang-v2, vllm)"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object"),
    fmt: Fmt = typer.Option(Fmt.text, "--format", help="text, markdown (md) or json"),
) -> None:
    """Predict speculative tok/s, speedup and where the cycle time goes."""
    from .predict import predict as _predict

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
    scenario: Optional[str] = ScenarioOpt,
    model: Optional[str] = ModelOpt,
    gpu: Optional[str] = GpuOpt,
    tp: Optional[int] = TpOpt,
    batch: Optional[int] = BatchOpt,
    ctx: Optional[int] = CtxOpt,
    as_json: bool = typer.Option(False, "--json"),
    fmt: Fmt = typer.Option(Fmt.text, "--format"),
) -> None:
    """Target verify forward time (ms) per number of draft tokens per request."""
    from .predict import verify_ms
    from .render import verify_markdown

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
    from .presets import DEFAULT_SCENARIO, builtin_scenarios, gpu_names, model_names

    sc = builtin_scenarios()
    if as_json:
        _emit({"default": DEFAULT_SCENARIO, "scenarios": sc, "models": model_names(), "gpus": gpu_names()})
        return
    for name, desc in sorted(sc.items(), key=lambda kv: kv[0] != DEFAULT_SCENARIO):
        mark = " (default)" if name == DEFAULT_SCENARIO else ""
        typer.echo(f"{name}{mark}: {desc}")
    typer.echo(f"\nmodel presets: {', '.join(model_names())}\nGPU presets: {', '.join(gpu_names())}")


def _scenario_for(scenario, model, gpu, tp, steps, topk, accept, batch, ctx):
    from .predict import build_scenario

    return build_scenario(scenario, model=model, gpu=gpu, tp=tp, steps=steps, topk=topk, accept=accept, batch=batch, ctx=ctx)


@scenario_app.command("show")
def scenario_show(
    scenario: Optional[str] = typer.Argument(None, help="built-in name or file (default: kimi-k2.5-seed)"),
    model: Optional[str] = ModelOpt,
    gpu: Optional[str] = GpuOpt,
    tp: Optional[int] = TpOpt,
    steps: Optional[int] = typer.Option(None, "--steps"),
    topk: Optional[int] = typer.Option(None, "--topk"),
    accept: Optional[float] = typer.Option(None, "--accept"),
    batch: Optional[int] = BatchOpt,
    ctx: Optional[int] = CtxOpt,
) -> None:
    """Readable summary of a scenario's inputs and their sources."""
    from .render import table_text

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
    scenario: Optional[str] = typer.Argument(None, help="built-in name or file (default: kimi-k2.5-seed)"),
    model: Optional[str] = ModelOpt,
    gpu: Optional[str] = GpuOpt,
    tp: Optional[int] = TpOpt,
    steps: Optional[int] = typer.Option(None, "--steps"),
    topk: Optional[int] = typer.Option(None, "--topk"),
    accept: Optional[float] = typer.Option(None, "--accept"),
    batch: Optional[int] = BatchOpt,
    ctx: Optional[int] = CtxOpt,
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="write to this file (atomically) instead of stdout"),
) -> None:
    """The full scenario as JSON (editable, and accepted back by --scenario FILE)."""
    from .io import write_atomic

    sc = _scenario_for(scenario, model, gpu, tp, steps, topk, accept, batch, ctx)
    text = sc.model_dump_json(indent=1)
    if out:
        write_atomic(out, text + "\n")
        typer.echo(f"wrote {out}", err=True)
    else:
        typer.echo(text)


def main(argv: Optional[list[str]] = None) -> None:
    """Console entry point: SpecsimError and click usage errors exit 2 with one line, no traceback."""
    from .errors import SpecsimError, one_line

    try:
        app(args=argv, standalone_mode=False, prog_name="specsim")
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
            typer.echo(f"error: {one_line(exc.format_message())}", err=True)
            sys.exit(getattr(exc, "exit_code", 2) or 2)
        if isinstance(exc, (OSError, ValueError)):
            typer.echo(f"error: {one_line(exc)}", err=True)
            sys.exit(2)
        raise
    sys.exit(0)


if __name__ == "__main__":
    main()
