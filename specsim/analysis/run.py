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

Unequal lengths drain more gradually than waves, and so does acceptance that differs per prompt: with a
per-request spread of the work (``accept_spread``, ``output_spread``) the run is list scheduling of those
requests on the slots, the batch stepping at ``cycle(n)`` for the ``n`` in flight (:func:`occupancy`); a
spread of 0 is the waves above. Prefill is counted when the run gives its prompt and
output lengths (``prompt_tokens``, ``output_tokens``): each wave then first prefills its prompts (the
target forward over them, eager, and for speculation the draft head's extend over them,
:func:`~specsim.physics.cycle.prefill_ms`) and decodes ``output_tokens`` per request, as offline
``LLM.generate`` benchmarks of static batches measure it; otherwise it is left out (MT-Bench prompts
are short next to their answers).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

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
    accept_spread: float = 0.0  # per-request spread (CV) of cycles per token from acceptance
    output_spread: float = 0.0  # per-request spread (CV) of output tokens
    spec_concurrency: float | None = None  # mean requests in flight over the decode's wall time, modeled
    baseline_concurrency: float | None = None
    #: mean time per output token after the first, and to the first token, of one request (ms, modeled; as serving
    #: benchmarks report them): TTFT only where the prefill is counted
    tpot_ms: float | None = None
    baseline_tpot_ms: float | None = None
    ttft_ms: float | None = None
    baseline_ttft_ms: float | None = None

    @property
    def speedup(self) -> float:
        return self.tok_s / self.baseline_tok_s

    def to_dict(self) -> dict:
        return {"kind": "modeled", "requests": self.requests, "slots": self.slots,
                "waves": [{"requests": n, "count": c} for n, c in self.waves],
                "baseline_waves": [{"requests": n, "count": c} for n, c in (self.baseline_waves or self.waves)],
                "tok_s": self.tok_s, "baseline_tok_s": self.baseline_tok_s, "speedup": self.speedup,
                "prefill_counted": self.prompt_tokens is not None,
                "accept_spread": self.accept_spread, "output_spread": self.output_spread,
                "concurrency": self.spec_concurrency, "baseline_concurrency": self.baseline_concurrency,
                "tpot_ms": self.tpot_ms, "baseline_tpot_ms": self.baseline_tpot_ms,
                **({"ttft_ms": self.ttft_ms, "baseline_ttft_ms": self.baseline_ttft_ms} if self.ttft_ms is not None else {}),
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


#: Per-request spread of decode cycles per output token (coefficient of variation across the requests of one run):
#: prompts differ in how well the draft predicts them, so equal-length requests of a speculative run finish at
#: different times and the batch drains before the run ends. Prior 0.12: the batch-1 runs of
#: https://github.com/IneshReddy249/speculative-decoding-moe-benchmark (results/*_c1.json at commit f598e23; EAGLE-3
#: heads on GLM-4.7-Flash, ShareGPT, 256 output tokens fixed): end-to-end latency spread 11.9 % (chain) and 12.6 %
#: (tree) with speculation against 2.3 % without, i.e. ~0.12 from acceptance alone. Kept, with the concurrency each
#: run measured, in calibration/datasets/run-drain-glm47flash-h100pcie.json.
ACCEPT_SPREAD_PRIOR = 0.12
MAX_SPREAD = 2.0  # coefficient of variation
RUN_DRAWS = 8  # shuffled orders of the stratified per-request work, averaged
MAX_SIM_EVENTS = 400_000  # request completions simulated per occupancy (draws x requests); past it the middle of
#                           the run, at full occupancy, is counted without simulating it


def check_spread(v, name: str = "accept-spread") -> float:
    """A coefficient of variation in [0, MAX_SPREAD] (0: equal requests)."""
    from ..io.checks import check_number

    return check_number(v, name, 0.0, MAX_SPREAD)


def _work_units(requests: int, spread: float, draw: int):
    """Each request's work (mean 1): stratified quantiles of a lognormal of CV ``spread``, in a seeded order."""
    import numpy as np
    from scipy.special import ndtri

    s = np.sqrt(np.log1p(spread * spread))
    u = np.exp(s * ndtri((np.arange(requests) + 0.5) / requests) - s * s / 2)
    u /= u.mean()
    return np.random.default_rng(draw).permutation(u)


def _loop_occupancy(work, slots: int):
    """Work units run with n requests in flight (index n - 1), slots taking requests in order, each in flight
    advancing one unit per step together (the engine steps its whole batch)."""
    import heapq

    import numpy as np

    occ = np.zeros(min(slots, len(work)))
    live = [float(w) for w in work[:slots]]
    heapq.heapify(live)
    done, nxt = 0.0, len(live)
    while live:
        end = heapq.heappop(live)
        occ[len(live)] += end - done  # len(live) + 1 were in flight until this one ended
        done = end
        if nxt < len(work):
            heapq.heappush(live, done + float(work[nxt]))
            nxt += 1
    return occ


@lru_cache(maxsize=512)
def occupancy(requests: int, slots: int, spread: float):
    """Mean work units a run spends with n = 1..min(slots, requests) requests in flight (array index n - 1).

    A request needs ``u`` units of work (decode cycles or steps, per output token and scaled to mean 1); ``spread``
    is the coefficient of variation of ``u`` across requests. A run of ``requests`` on ``slots`` lasts
    ``sum_n occupancy[n - 1] x step_ms(n)`` per output token and request. Spread 0 is the equal waves of
    :func:`waves`; a spread drains the batch gradually before the run ends (list scheduling, a fluid of equal
    steps; averaged over :data:`RUN_DRAWS` orders)."""
    import numpy as np

    slots = min(slots, requests)
    occ = np.zeros(slots)
    if spread == 0.0:
        for n, count in waves(requests, slots):
            occ[n - 1] += count
        return occ
    if slots == requests:  # one wave: request k of the sorted work ends the k-th, with requests - k + 1 in flight
        u = np.sort(_work_units(requests, spread, 0))
        return np.diff(u, prepend=0.0)[::-1].copy()
    if slots > MAX_SIM_EVENTS // 4:  # too many slots to simulate a drain of several waves: equal waves
        return occupancy(requests, slots, 0.0)
    sim = min(requests, max(MAX_SIM_EVENTS // RUN_DRAWS, 4 * slots))
    draws = max(1, min(RUN_DRAWS, MAX_SIM_EVENTS // sim))
    occ = sum(_loop_occupancy(_work_units(sim, spread, d), slots) for d in range(draws)) / draws
    occ[slots - 1] += (requests - sim) / slots  # the middle of a longer run, every slot busy
    return occ


def _per_batch(p0: dict, occupied, tau: float, n_max: int):
    """Modeled cycle and decode-step ms with n requests run at once, at each n in ``occupied`` (one vectorised
    evaluation of the scenario's parameters ``p0``; arrays of ``n_max`` with zeros where no run spends time)."""
    import numpy as np

    from ..physics.cycle import throughput

    p = {**p0, "batch": occupied.astype(float)}
    th = throughput(p, tau)
    cycle_ms, step_ms = np.zeros(n_max), np.zeros(n_max)
    cycle_ms[occupied - 1] = np.asarray(th["cycle_ms"], float)
    step_ms[occupied - 1] = np.asarray(th["baseline"]["total"], float)
    return cycle_ms, step_ms


def predict_run(requests: int, scenario=None, *, prompt_tokens: float | None = None, output_tokens: float | None = None,
                accept_spread: float = ACCEPT_SPREAD_PRIOR, output_spread: float = 0.0, **overrides) -> RunPrediction:
    """Throughput of a closed-loop run of ``requests`` requests on ``batch`` slots (the ``batch`` override);
    with ``prompt_tokens`` and ``output_tokens`` per request, each wave's prefill is counted too. The decode runs at
    the scenario's context: for requests of those lengths, :func:`run_ctx` (the CLI's default) is their mean.

    ``accept_spread``: the spread (coefficient of variation) of decode cycles per output token across requests,
    from acceptance (:data:`ACCEPT_SPREAD_PRIOR`; speculation only); ``output_spread``: that of output tokens per
    request (both runs). With both 0 the requests are equal and the batch drains in waves."""
    import numpy as np

    from ..physics.acceptance import expected_accept_length
    from ..physics.cycle import prefill_ms
    from ..physics.params import scenario_params
    from .build import build_scenario

    check_run_lengths(prompt_tokens, output_tokens)
    accept_spread, output_spread = check_spread(accept_spread), check_spread(output_spread, "output-spread")
    sc = build_scenario(scenario, **overrides)
    from ..physics.cycle import running

    slots = sc.workload.batch
    p0 = scenario_params(sc)  # the engine runs at most its cap, and what its KV pool holds, at once: the rest queue
    spec_slots, base_slots = (int(running(p0, cap)["batch"]) for cap in ("spec_running_cap", "running_cap"))
    spec_ws, base_ws = waves(requests, spec_slots), waves(requests, base_slots)
    spec_spread = float(np.hypot(accept_spread, output_spread))  # independent spreads of one request's work
    spec_occ = occupancy(requests, spec_slots, round(spec_spread, 12))
    base_occ = occupancy(requests, base_slots, round(output_spread, 12))
    tau = float(expected_accept_length(sc))
    occupied = np.union1d(np.flatnonzero(spec_occ), np.flatnonzero(base_occ)) + 1  # equal waves: at most two sizes
    cycle_ms, step_ms = _per_batch(p0, occupied, tau, max(len(spec_occ), len(base_occ)))
    # wall ms of the run for one output token per request (prefill: per output token)
    spec_ms = float(spec_occ @ cycle_ms[: len(spec_occ)]) / tau
    base_ms = float(base_occ @ step_ms[: len(base_occ)])
    spec_conc, base_conc = _concurrency(spec_occ, cycle_ms), _concurrency(base_occ, step_ms)
    wall = {"spec": spec_ms, "base": base_ms}  # per output token per request, prefills added below
    # per request (Little's law on the engine's running requests): ms in flight per output token, and the own prefill
    lat = {"spec": spec_conc * spec_ms / requests, "base": base_conc * base_ms / requests}
    ttft = {"spec": None, "base": None}
    if prompt_tokens is not None:
        def prefills(ws, spread):  # (prompts prefilled together, times): per wave, or the first batch then one by one
            if spread == 0.0 or sum(c for _, c in ws) == 1:  # equal requests, or a single wave
                return ws
            first = ws[0][0]
            return [(first, 1), (1, requests - first)]

        spec_pre, base_pre = prefills(spec_ws, spec_spread), prefills(base_ws, output_spread)
        pre = {n: prefill_ms(scenario_params(build_scenario(sc, batch=n)), float(prompt_tokens), float(n))
               for n in {n for n, _ in spec_pre + base_pre}}
        out = float(output_tokens)
        for key, groups, ws, run_slots, draft in (("spec", spec_pre, spec_ws, spec_slots, True),
                                                 ("base", base_pre, base_ws, base_slots, False)):
            ms = {n: float(pre[n]["target"]) + (float(pre[n]["draft"]) if draft else 0.0) for n, _ in groups}
            for n, count in groups:
                wall[key] += count * ms[n] / out
            singles = groups != ws  # after the first batch, prompts one by one, the other slots held waiting
            held = sum(count * ms[n] * (run_slots if singles and n == 1 else n) for n, count in groups)
            ttft[key] = sum(count * n * ms[n] for n, count in groups) / requests
            lat[key] += held / out / requests  # in flight per output token: decode, and the prefills it waits through
    return RunPrediction(requests, slots, spec_ws, tok_s=1e3 * requests / wall["spec"], baseline_tok_s=1e3 * requests / wall["base"],
                         prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                         baseline_waves=None if base_ws == spec_ws else base_ws,
                         accept_spread=accept_spread, output_spread=output_spread,
                         spec_concurrency=spec_conc, baseline_concurrency=base_conc,
                         tpot_ms=_tpot(lat["spec"], ttft["spec"], output_tokens),
                         baseline_tpot_ms=_tpot(lat["base"], ttft["base"], output_tokens),
                         ttft_ms=ttft["spec"], baseline_ttft_ms=ttft["base"])


def _tpot(in_flight_ms_per_token: float, ttft_ms: float | None, output_tokens: float | None) -> float:
    """A request's mean time per output token after its first: its time in flight less its own prefill, over the
    tokens after the first (serving benchmarks' TPOT); without lengths, its decode time per output token."""
    if ttft_ms is None or output_tokens is None or float(output_tokens) <= 1.0:
        return in_flight_ms_per_token
    out = float(output_tokens)
    return (in_flight_ms_per_token * out - ttft_ms) / (out - 1.0)


def _concurrency(occ, step_ms) -> float:
    """Mean requests in flight over the decode's wall time (as benchmark clients report it: latency / duration)."""
    import numpy as np

    t = occ * step_ms[: len(occ)]
    return float((t * np.arange(1, len(occ) + 1)).sum() / t.sum())
