"""A finite benchmark run: ``requests`` requests over ``slots`` client slots, closed loop.

Benchmark scripts do not measure a steady stream. SGLang's EAGLE MT-Bench benchmark, for one,
runs 80 conversations on ``--parallel`` threads and divides every output token by the wall time
(``benchmark/mtbench/bench_sglang_eagle.py``). Once fewer requests than slots are left, the batch
drains: with 80 requests on 64 slots the run is a wave of 64 and a wave of 16, and its throughput
is nearer batch 40's than batch 64's.

Model: requests of equal length run in waves of ``slots`` and one remainder wave; a wave of
``n`` requests lasts ``L x step(n)`` (plain decode) or ``L / tau x cycle(n)`` (speculative), so

    tok/s = sum(n_w) / sum(step(n_w))    and    spec tok/s = tau x sum(n_w) / sum(cycle(n_w)).

Unequal lengths drain more gradually than waves; prefill is not counted (MT-Bench prompts are
short next to their answers).
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

    @property
    def speedup(self) -> float:
        return self.tok_s / self.baseline_tok_s

    def to_dict(self) -> dict:
        return {"kind": "modeled", "requests": self.requests, "slots": self.slots,
                "waves": [{"requests": n, "count": c} for n, c in self.waves],
                "tok_s": self.tok_s, "baseline_tok_s": self.baseline_tok_s, "speedup": self.speedup}


def predict_run(requests: int, scenario=None, **overrides) -> RunPrediction:
    """Throughput of a closed-loop run of ``requests`` requests on ``batch`` slots (the ``batch`` override)."""
    from .build import build_scenario
    from .predict import evaluate

    sc = build_scenario(scenario, **overrides)
    slots = sc.workload.batch
    ws = waves(requests, slots)
    spec_ms = base_ms = 0.0  # ms per token of one request, summed over the waves
    for n, count in ws:  # one evaluation per distinct wave size (at most two)
        p = evaluate(build_scenario(sc, batch=n))
        spec_ms += count * p.cycle_ms / p.accept_length
        base_ms += count * p.baseline_step_ms
    return RunPrediction(requests, slots, ws, tok_s=1e3 * requests / spec_ms, baseline_tok_s=1e3 * requests / base_ms)
