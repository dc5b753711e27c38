"""A finite benchmark run: ``requests`` requests over ``slots`` client slots, closed loop.

Benchmark scripts do not measure a steady stream. SGLang's EAGLE MT-Bench benchmark, for one,
runs 80 conversations on ``--parallel`` threads and divides every output token by the wall time
(``benchmark/mtbench/bench_sglang_eagle.py``). Once fewer requests than slots are left, the batch
drains: with 80 requests on 64 slots the run is a wave of 64 and a wave of 16, and its throughput
is nearer batch 40's than batch 64's.

Model: requests of equal length run in waves of ``slots`` (or of the engine's cap on requests run at once,
where smaller: SGLang runs 48 at once with speculation on unless the launch raises it) and one remainder wave; a wave of
``n`` requests lasts ``L x step(n)`` (plain decode) or ``L / tau x cycle(n)`` (speculative), so

    tok/s = sum(n_w) / sum(step(n_w))    and    spec tok/s = tau x sum(n_w) / sum(cycle(n_w)).

Unequal lengths drain more gradually than waves. Prefill is counted when the run gives its prompt and
output lengths (``prompt_tokens``, ``output_tokens``): each wave then first prefills its prompts (the
target forward over them, eager, and for speculation the draft head's extend over them,
:func:`~specsim.physics.cycle.prefill_ms`) and decodes ``output_tokens`` per request, as offline
``LLM.generate`` benchmarks of static batches measure it; otherwise it is left out (MT-Bench prompts
are short next to their answers).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SpecsimError

MAX_REQUESTS = 10_000_000


def waves(requests: int, slots: int) -> list[tuple[int, int]]:
    """``(concurrent requests, number of such waves)``: full waves of ``slots``, then the remainder."""
    if not isinstance(requests, int) or isinstance(requests, bool) or not 1 <= requests <= MAX_REQUESTS:
        raise SpecsimError("requests", requests, f"allowed: an integer in [1, {MAX_REQUESTS}]")
    if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
        raise SpecsimError("batch", slots, "allowed: an integer >= 1")
    full, rest = divmod(requests, slots)
    return ([(slots, full)] if full else []) + ([(rest, 1)] if rest else [])


@dataclass
class RunPrediction:
    """Modeled throughput of a whole finite run (output tokens / wall time); nothing measured."""

    requests: int
    slots: int
    waves: list[tuple[int, int]]
    tok_s: float
    baseline_tok_s: float
    prompt_tokens: float | None = None  # per request; with output_tokens, each wave's prefill is counted
    output_tokens: float | None = None
    baseline_waves: list[tuple[int, int]] | None = None  # the plain run's waves where the engine's caps differ

    @property
    def speedup(self) -> float:
        return self.tok_s / self.baseline_tok_s

    def to_dict(self) -> dict:
        return {"kind": "modeled", "requests": self.requests, "slots": self.slots,
                "waves": [{"requests": n, "count": c} for n, c in self.waves],
                "baseline_waves": [{"requests": n, "count": c} for n, c in (self.baseline_waves or self.waves)],
                "tok_s": self.tok_s, "baseline_tok_s": self.baseline_tok_s, "speedup": self.speedup,
                "prefill_counted": self.prompt_tokens is not None,
                **({"prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens}
                   if self.prompt_tokens is not None else {})}


MAX_RUN_TOKENS = 10_000_000  # prompt or output tokens per request


def run_ctx(prompt_tokens: float, output_tokens: float) -> int:
    """The mean decode context of requests of these lengths: the prompt plus half the output."""
    return int(round(float(prompt_tokens) + float(output_tokens) / 2))


def check_run_lengths(prompt_tokens, output_tokens, names=("prompt-tokens", "output-tokens")) -> None:
    """Both or neither, each a number of tokens in [1, MAX_RUN_TOKENS] (``names``: the fields to name)."""
    import numbers

    if (prompt_tokens is None) != (output_tokens is None):
        raise SpecsimError(names[0] if prompt_tokens is None else names[1], None,
                           "missing: give both the prompt and the output tokens per request (prefill is counted with both)",
                           show_value=False)
    for name, v in zip(names, (prompt_tokens, output_tokens)):
        if v is not None and (not isinstance(v, numbers.Real) or isinstance(v, bool) or not 1 <= float(v) <= MAX_RUN_TOKENS):
            raise SpecsimError(name, v, f"allowed: a number of tokens in [1, {MAX_RUN_TOKENS:,}]")


def predict_run(requests: int, scenario=None, *, prompt_tokens: float | None = None, output_tokens: float | None = None,
                **overrides) -> RunPrediction:
    """Throughput of a closed-loop run of ``requests`` requests on ``batch`` slots (the ``batch`` override);
    with ``prompt_tokens`` and ``output_tokens`` per request, each wave's prefill is counted too. The decode runs at
    the scenario's context: for requests of those lengths, :func:`run_ctx` (the CLI's default) is their mean."""
    from ..physics.cycle import prefill_ms
    from ..physics.params import scenario_params
    from .build import build_scenario
    from .predict import evaluate

    check_run_lengths(prompt_tokens, output_tokens)
    sc = build_scenario(scenario, **overrides)
    slots = sc.workload.batch
    e = sc.engine  # the engine runs at most its cap at once: a wave is that many, the rest queue for the next
    spec_ws = waves(requests, e.running_at_once(slots, True))
    base_ws = waves(requests, e.running_at_once(slots, False))
    evals = {}  # one evaluation per distinct wave size (at most four)
    for n in sorted({n for n, _ in spec_ws + base_ws}):
        wave = build_scenario(sc, batch=n)
        pre = prefill_ms(scenario_params(wave), float(prompt_tokens), float(n)) if prompt_tokens is not None else None
        evals[n] = evaluate(wave), pre
    spec_ms = base_ms = 0.0  # wall ms of the run for one output token per request (prefill: per output token)
    for n, count in spec_ws:
        p, pre = evals[n]
        spec_ms += count * p.cycle_ms / p.accept_length
        if pre is not None:
            spec_ms += count * (float(pre["target"]) + float(pre["draft"])) / float(output_tokens)
    for n, count in base_ws:
        p, pre = evals[n]
        base_ms += count * p.baseline_step_ms
        if pre is not None:
            base_ms += count * float(pre["target"]) / float(output_tokens)
    return RunPrediction(requests, slots, spec_ws, tok_s=1e3 * requests / spec_ms, baseline_tok_s=1e3 * requests / base_ms,
                         prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                         baseline_waves=None if base_ws == spec_ws else base_ws)
