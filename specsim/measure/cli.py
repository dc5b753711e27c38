"""``specsim measure``: typer sub-app (mount with ``app.add_typer(measure_app, name="measure")``).

Torch is imported only inside the commands. With no torch or no GPU: one line on stderr
(``error: measure: ...``) and exit code 2. Progress goes to stderr, a short summary to stdout,
the JSON to ``--out`` (written atomically: a temporary file in the same folder, then os.replace).
"""

from __future__ import annotations

import sys
import traceback

import typer

from . import MeasureError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Micro-benchmarks on this machine's GPU that write a hardware profile JSON (needs torch with CUDA).",
)


def _fail(msg: str, code: int = 2):
    typer.echo(f"error: measure: {msg}", err=True)
    raise typer.Exit(code)


def _guard(fn):
    """Run a measurement: MeasureError -> one line, exit 2; a bug -> traceback, exit 1."""
    try:
        return fn()
    except MeasureError as exc:
        _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except (typer.Exit, SystemExit):
        raise
    except Exception as exc:  # a bug or a driver failure: show where, exit 1
        traceback.print_exc()
        _fail(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", 1)


def _report(lines, out: str) -> None:
    """A measurement's summary lines on stdout, then where its JSON went."""
    for line in lines:
        typer.echo(line)
    typer.echo(f"wrote {out}")


#: ranges of the run options every measurement takes: (lowest, highest, unit)
RUN_OPTION_RANGES = {"repeats": (1, 10_000, "timed repeats"), "budget-s": (0.0, 86_400.0, "seconds (0 = no budget)"),
                     "kv-margin-gib": (0.0, 1024.0, "GiB"), "timeout-s": (1.0, 86_400.0, "seconds"),
                     "procs": (2, 64, "processes")}


def _check_run_options(**given) -> None:
    """Refuse a run option outside its range before torch or a GPU is looked for (``--repeats -1``)."""
    import math

    for name, value in given.items():
        flag = name.replace("_", "-")
        lo, hi, unit = RUN_OPTION_RANGES[flag]
        if not (math.isfinite(value) and lo <= value <= hi):
            _fail(f"--{flag}: got {value:g}; allowed: {lo:g} to {hi:g} {unit}")


def _ints(text: str, field: str) -> list[int]:
    from .common import parse_int_list

    try:
        return parse_int_list(text, field)
    except MeasureError as exc:
        _fail(str(exc))


DeviceOpt = typer.Option("cuda", "--device", hidden=True, help="cuda; cpu only tests the code paths at toy sizes")


@app.command("gpu")
def gpu_cmd(
    out: str = typer.Option("gpu-profile.json", "--out", "-o", help="profile JSON to write"),
    sections: str = typer.Option("gemm,attention,topk,graph,copy", "--sections",
                                 help="comma list of sections: gemm, attention, topk, graph, copy, host (a GPU->CPU "
                                      "sync and the engine's finish check on this CPU; needs transformers), moe "
                                      "(SGLang's fused MoE Triton kernel at six shapes; needs Triton), flashinfer "
                                      "(FlashInfer's tree verify kernel, custom mask and causal; needs flashinfer-python)"),
    quick: bool = typer.Option(False, "--quick", help="a few points per section (smoke test, not a profile)"),
    budget_s: float = typer.Option(0.0, "--budget-s", help="wall-clock budget; points after it are skipped (0 = none)"),
    repeats: int = typer.Option(15, "--repeats", help="timed replays per point"),
    device: str = DeviceOpt,
):
    """Primitives: GEMMs at the preset models' shapes vs M, attention decode/verify, top-k, graph replay, copy."""
    _check_run_options(repeats=repeats, budget_s=budget_s)

    def go():
        from .gpu import measure_gpu, summary_lines

        secs = [s for s in sections.replace(" ", "").split(",") if s]
        prof = measure_gpu(out, secs, device=device, quick=quick, budget_s=budget_s, repeats=repeats, argv=sys.argv)
        _report(summary_lines(prof), out)

    _guard(go)


@app.command("forward")
def forward_cmd(
    out: str = typer.Option("forwards.json", "--out", "-o", help="dataset JSON to write (specsim validate format)"),
    model: str = typer.Option("llama-3.1-8b", "--model", help="llama-3.1-8b or qwen3-30b-a3b (random weights)"),
    batch: str = typer.Option("1,2,4,8,16,32,64", "--batch", help="requests per forward"),
    tokens: str = typer.Option("1,2,3,4,6,8,16,32,64", "--tokens", help="new tokens per request (1 = decode)"),
    ctx: str = typer.Option("512,2048,8192,16384", "--ctx", help="context tokens per request"),
    eager: str = typer.Option(
        "1x1@2048,1x4@2048,8x4@2048,32x1@2048,1x16@2048",
        "--eager",
        help="points also timed eagerly, BxK@CTX comma list ('' = none, 'all' = every point)",
    ),
    repeats: int = typer.Option(10, "--repeats", help="timed graph replays per point"),
    budget_s: float = typer.Option(0.0, "--budget-s", help="wall-clock budget; points after it are skipped (0 = none)"),
    kv_margin_gib: float = typer.Option(12.0, "--kv-margin-gib", help="GPU memory kept free beside the KV cache"),
    quick: bool = typer.Option(False, "--quick", help="mark the output as a smoke test"),
    attention: str = typer.Option(
        "fold", "--attention", help="fold (GQA heads packed, engine-like) or gqa (enable_gqa)"
    ),
    device: str = DeviceOpt,
):
    """Engine-like forwards (decode and verify) of a preset model with random weights, CUDA-graph timed."""
    _check_run_options(repeats=repeats, budget_s=budget_s, kv_margin_gib=kv_margin_gib)
    bs, ks, cs = _ints(batch, "--batch"), _ints(tokens, "--tokens"), _ints(ctx, "--ctx")
    eps = []
    for part in [p for p in eager.replace(" ", "").split(",") if p and eager.strip() != "all"]:
        try:
            bk, c = part.split("@")
            b, k = bk.lower().split("x")
            eps.append((int(b), int(k), int(c)))
        except ValueError:
            _fail(f"--eager: got {part!r}; expected BxK@CTX, e.g. 8x4@2048")

    def go():
        from .forward import measure_forward, summary_lines

        ds = measure_forward(
            out,
            model,
            bs,
            ks,
            cs,
            device=device,
            repeats=repeats,
            budget_s=budget_s,
            eager_points="all" if eager.strip() == "all" else eps,
            kv_margin_gib=kv_margin_gib,
            quick=quick,
            attention=attention,
            argv=sys.argv,
        )
        _report(summary_lines(ds), out)

    _guard(go)


@app.command("draft")
def draft_cmd(
    out: str = typer.Option("draft.json", "--out", "-o", help="dataset JSON to write"),
    model: str = typer.Option("llama-3.1-8b", "--model", help="target whose EAGLE-3 head is timed (random weights)"),
    batch: str = typer.Option("1,2,4,8,16,32,64", "--batch", help="requests"),
    topk: str = typer.Option("1,4", "--topk", help="draft rows per request in a draft step"),
    ctx: str = typer.Option("512,2048", "--ctx", help="context tokens per request (draft KV cache)"),
    accept_tokens: str = typer.Option("2,4,8", "--accept-tokens", help="verified tokens per request in accept"),
    steps: str = typer.Option("2,3", "--steps", help="draft steps; draft-extend runs steps + 1 tokens per request"),
    repeats: int = typer.Option(20, "--repeats", help="timed graph replays per point"),
    eager: bool = typer.Option(True, "--eager/--no-eager", help="also time every point eagerly"),
    budget_s: float = typer.Option(0.0, "--budget-s", help="wall-clock budget; points after it are skipped (0 = none)"),
    quick: bool = typer.Option(False, "--quick", help="mark the output as a smoke test"),
    device: str = DeviceOpt,
):
    """EAGLE-3 draft step (B x topk rows), greedy accept over the verify logits, draft-extend: CUDA-graph timed."""
    _check_run_options(repeats=repeats, budget_s=budget_s)
    lists = [_ints(v, f) for v, f in ((batch, "--batch"), (topk, "--topk"), (ctx, "--ctx"),
                                      (accept_tokens, "--accept-tokens"), (steps, "--steps"))]

    def go():
        from .draft import measure_draft, summary_lines

        ds = measure_draft(out, model, *lists, device=device, repeats=repeats, eager=eager, budget_s=budget_s,
                           quick=quick, argv=sys.argv)
        _report(summary_lines(ds), out)

    _guard(go)


@app.command("collectives")
def collectives_cmd(
    out: str = typer.Option("collectives-profile.json", "--out", "-o", help="profile JSON to write"),
    tp: str = typer.Option("", "--tp", help="TP sizes, comma list (default: every one of 2, 4, 8 that fits)"),
    ops: str = typer.Option("all_reduce,all_gather", "--ops", help="all_reduce, all_gather"),
    repeats: int = typer.Option(20, "--repeats", help="timed repeats per size"),
    graph: bool = typer.Option(True, "--graph/--no-graph", help="also time the collectives captured in a CUDA graph"),
    quick: bool = typer.Option(False, "--quick", help="a few sizes only (smoke test)"),
    timeout_s: float = typer.Option(540.0, "--timeout-s", help="stop the workers after this long"),
    procs: int = typer.Option(2, "--procs", hidden=True, help="processes for --device cpu (gloo) tests"),
    device: str = DeviceOpt,
):
    """NCCL all-reduce / all-gather vs message size for each TP size that fits (one process per GPU)."""
    _check_run_options(repeats=repeats, timeout_s=timeout_s, procs=procs)
    tps = _ints(tp, "--tp") if tp.strip() else None
    op_list = [o for o in ops.replace(" ", "").split(",") if o]

    def go():
        from .collectives import measure_collectives, summary_lines

        prof = measure_collectives(
            out,
            tp_sizes=tps,
            ops=op_list,
            repeats=repeats,
            graph=graph,
            device=device,
            procs=procs,
            quick=quick,
            timeout_s=timeout_s,
            argv=sys.argv,
        )
        _report(summary_lines(prof), out)

    _guard(go)


@app.command("check")
def check_cmd(path: str = typer.Argument(..., help="profile JSON to validate")):
    """Validate a profile file (torch-free); prints its sections, exit 2 when it is unusable."""
    from .profile import SECTION_NAMES, ProfileError, load_profile, shown_path

    try:
        prof = load_profile(path)
    except ProfileError as exc:
        _fail(str(exc))
    prov = prof["provenance"]
    typer.echo(
        f"{shown_path(path)}: {prov.get('gpu_name')}, torch {prov.get('torch')}, {prov.get('date_utc')}; sections: "
        + ", ".join(s for s in SECTION_NAMES if s in prof)
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m specsim.measure``: exit codes as the commands set them."""
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="specsim measure")
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except Exception as exc:  # click usage errors: one line, exit 2
        if hasattr(exc, "format_message"):
            msg = exc.format_message()
            if msg:  # no-args help prints the help and has no message
                typer.echo(f"error: measure: {msg}", err=True)
            sys.exit(2)
        raise
    sys.exit(rv if isinstance(rv, int) else 0)
