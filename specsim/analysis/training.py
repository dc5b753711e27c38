"""Draft-training investment what-if: accept length versus draft training samples N.

Model (saturating power law, per draft position i = 1..steps)::

    r_i(N) = clip(1 - c_i * N**(-beta), 0, 1),   c_i = c1 * (1 + g * (i - 1))
    tau(N, steps) = 1 + sum_{i<=steps} prod_{j<=i} r_j(N)          (always in [1, steps + 1])

Deeper positions are worse (g >= 0) and every position approaches certainty as a power law in
samples. The parameters ``theta = (ln c1, ln beta, ln g)`` are fitted by scipy least squares to
(samples, tau, steps) points with residuals in units of an assumed per-point scatter
``TAU_SCATTER``, plus a weak log-normal prior on g (the public points are almost all at steps 3,
so they barely identify the depth decay). Parameter covariance comes from the Jacobian at the
optimum; the tau band propagates it through ``ln(steps + 1 - tau)`` (delta method), so the band
can never cross the ``steps + 1`` ceiling.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import SpecsimError, fmt_bound
from ..physics.rules import MAX_GPUS_PER_REPLICA, MAX_SAMPLES
from ..physics.schema import Speculation, field_range

#: Assumed 1-sigma scatter of one published accept length around the fleet-wide curve (tokens).
#: The per-benchmark values of one published draft (HF model cards below) spread by ~0.1-0.35; means by less.
TAU_SCATTER = 0.15
#: Prior median of the depth-decay slope g, and the sd of ln g. The RedHat Llama-4-Maverick EAGLE-3
#: accept-length-vs-k curves (https://huggingface.co/RedHatAI/Llama4-Maverick-17B-128E-Instruct-speculator.eagle3) imply per-position deficits growing by g ~ 0.15-0.35 per
#: position; EAGLE-3 Fig. 7 (well trained) is flatter (g ~ 0.05), the seed's calibrated profile steeper
#: (g ~ 0.9). The published points are nearly all at steps 3 and fit any g in 0.1-0.9 equally well.
DEPTH_DECAY_PRIOR = 0.3
DEPTH_DECAY_PRIOR_LOG_SD = 1.0
#: lightseekorg/kimi-k2.5-eagle3 (https://huggingface.co/lightseekorg/kimi-k2.5-eagle3): each ~300K-sample phase took ~14 h on
#: 4 nodes x 8 H200 (2 nodes training, 2 serving the target at TP8 to regenerate responses):
#: 4 * 8 * 14 = 448 GPU-hours per 300K samples, i.e. ~149 GPU-hours per 100K, regeneration included.
LIGHTSEEK_GPU_HOURS_PER_100K_SAMPLES = 4 * 8 * 14 / 3.0
DEFAULT_CURRENT_SAMPLES = 37_000.0  # the founding case's draft (kept for callers; scenarios carry their own)
#: Training-time-test unroll of EAGLE-3 training: each sample's draft forward+backward runs this many
#: times (SpecForge's default --ttt-length 7, https://github.com/sgl-project/SpecForge).
TTT_LENGTH = 7
#: how far outside the fitted data's sample range (each side, as a factor) a what-if goes before it is flagged
#: as an extrapolation of the power law (a judgement: the published Kimi points span 37K to 1.4M, 38x)
EXTRAPOLATION_FACTOR = 4.0
#: The reference run above: Kimi-K2.5 target regenerating the data, its EAGLE-3 head trained on it.
COST_REFERENCE_MODEL = "kimi-k2.5"
_PARAM_NAMES = ("ln_c1", "ln_beta", "ln_g")
_BOUNDS = (np.array([-10.0, math.log(0.01), -12.0]), np.array([20.0, math.log(3.0), math.log(20.0)]))
_RATE_MAX = 1.0 - 1e-12


def default_training_data() -> list[dict]:
    """Published (samples, accept length, steps) points for Kimi-family EAGLE-3 drafts (HF model cards)."""

    def mean(*xs: float) -> float:
        return float(sum(xs) / len(xs))

    return [
        {"samples": 37_000.0, "tau": 2.1, "steps": 2,
         "source": "calibration/datasets/kimi-k2.5-seed.json: the founding case's own Kimi-K2.5 draft, ~37K "
                   "samples, accept length ~2.1 (step count not stated; taken at the measured best, 2 steps)"},
        {"samples": 1_400_000.0, "tau": mean(3.372, 3.165, 3.490), "steps": 3,
         "source": "https://huggingface.co/AQ-MedAI/Kimi-K2-Instruct-eagle3: mean of HumanEval/GSM8K/Math500"},
        {"samples": 1_000_000.0, "tau": mean(3.217, 2.553, 3.172, 3.134), "steps": 3,
         "source": "https://huggingface.co/AQ-MedAI/Kimi-K26-eagle3: mean of HumanEval/SWE-bench-V/GSM8K/Math500"},
        {"samples": 400_000.0, "tau": mean(2.91, 3.23, 2.92, 2.66), "steps": 3,
         "source": "https://huggingface.co/AQ-MedAI/Kimi-K2.7-Code-eagle3: mean of HumanEval/GSM8K/Math500/MT-bench"},
        {"samples": 300_000.0, "tau": mean(2.624, 3.123, 3.242, 3.323), "steps": 3,
         "source": "https://huggingface.co/lightseekorg/kimi-k2.5-eagle3 phase 1: mean of "
                   "MTBench/GSM8K/HumanEval/MATH500"},
        {"samples": 600_000.0, "tau": mean(2.687, 3.201, 3.285, 3.342), "steps": 3,
         "source": "https://huggingface.co/lightseekorg/kimi-k2.5-eagle3 phase 2: mean of "
                   "MTBench/GSM8K/HumanEval/MATH500"},
    ]


_POINT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMbBgG]?)\s*=\s*"
                       r"([0-9]*\.?[0-9]+)\s*(?:@\s*([0-9]+))?\s*$")
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9}


MAX_DATA_POINTS = 200  # --data points of one learning curve (each adds to every fit of the band)


def parse_data_points(items: list[str]) -> list[tuple[float, float, int]]:
    """Parse ``SAMPLES=TAU[@STEPS]`` strings (``37000=2.1``, ``37K=2.1@2``, ``1.4M=3.3``); steps default 3."""
    if len(items) > MAX_DATA_POINTS:
        raise SpecsimError("data", f"{len(items):,} points", f"allowed at most {MAX_DATA_POINTS} (one learning curve)")
    out: list[tuple[float, float, int]] = []
    for item in items:
        m = _POINT_RE.match(str(item))
        allowed = "a data point is SAMPLES=TAU[@STEPS], e.g. 37K=2.1@2 or 1.4M=3.3 (steps default 3)"
        if not m:
            raise SpecsimError("data", item, allowed)
        samples = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
        tau = float(m.group(3))
        steps = int(m.group(4)) if m.group(4) else 3
        _check_point(samples, tau, steps, item)
        out.append((samples, tau, steps))
    return out


def _check_point(samples: float, tau: float, steps: int, raw: object) -> None:
    if not (math.isfinite(samples) and 1 <= samples <= MAX_SAMPLES):
        raise SpecsimError("data", raw, f"training samples must be a number in [1, {fmt_bound(MAX_SAMPLES)}]")
    lo, hi = field_range(Speculation, "steps")
    if not lo <= steps <= hi:
        raise SpecsimError("data", raw, f"steps must be an integer in [{lo}, {hi}]")
    if not (1.0 <= tau <= steps + 1):
        raise SpecsimError("data", raw, f"accept length must be in [1, steps+1] = [1, {steps + 1}]")


def _normalize_points(points) -> list[dict]:
    out = []
    for p in points:
        if isinstance(p, dict):
            d = {"samples": float(p["samples"]), "tau": float(p["tau"]), "steps": int(p.get("steps", 3)),
                 "source": str(p.get("source", "user"))}
        elif isinstance(p, str):
            s, t, k = parse_data_points([p])[0]
            d = {"samples": s, "tau": t, "steps": k, "source": f"user: {p}"}
        else:
            s, t, *rest = p
            d = {"samples": float(s), "tau": float(t), "steps": int(rest[0]) if rest else 3, "source": "user"}
        _check_point(d["samples"], d["tau"], d["steps"], p)
        out.append(d)
    return out


def _rates(theta: np.ndarray, samples, steps: int) -> np.ndarray:
    """Per-position conditional rates, shape samples.shape + (steps,)."""
    c1, beta, g = np.exp(theta)
    n = np.asarray(samples, dtype=float)[..., None]
    if not np.all(n > 0):
        raise SpecsimError("samples", samples, "training samples must be a number > 0")
    i = np.arange(1, steps + 1)
    return np.clip(1.0 - c1 * (1.0 + g * (i - 1)) * n ** (-beta), 0.0, _RATE_MAX)


def _tau(theta: np.ndarray, samples, steps: int) -> np.ndarray:
    return 1.0 + np.cumprod(_rates(theta, samples, steps), axis=-1).sum(axis=-1)


@dataclass
class TrainingFit:
    """Fitted accept-length-vs-samples curve: ``params`` (natural units and logs), ``cov`` of ln-params."""

    params: dict
    cov: np.ndarray
    points: list
    theta: np.ndarray | None = field(repr=False, default=None)
    dof: int = 0

    def __post_init__(self) -> None:
        if self.theta is None:  # rebuild from the logged parameters
            self.theta = np.array([self.params[k] for k in _PARAM_NAMES], dtype=float)

    def rates(self, samples: float, steps: int) -> np.ndarray:
        """Per-position conditional acceptance r_1..r_steps at ``samples`` training samples."""
        return _rates(self.theta, float(samples), int(steps))

    def tau(self, samples: float, steps: int) -> float:
        """Expected accept length (bonus token included) of a chain of ``steps`` drafts."""
        return float(_tau(self.theta, float(samples), int(steps)))

    def tau_band(self, samples: float, steps: int, level: float = 0.9) -> tuple[float, float]:
        """Two-sided ``level`` confidence band of the fitted tau (parameter uncertainty only)."""
        if not 0.0 < level < 1.0:
            raise SpecsimError("level", level, "band level must be in (0, 1)")
        from scipy.special import stdtrit

        ceil = steps + 1.0

        def log_deficit(th: np.ndarray) -> float:
            return math.log(max(ceil - float(_tau(th, float(samples), int(steps))), 1e-12))

        u0 = log_deficit(self.theta)
        grad = np.zeros(3)
        for k in range(3):
            h = np.zeros(3)
            h[k] = 1e-5
            grad[k] = (log_deficit(self.theta + h) - log_deficit(self.theta - h)) / 2e-5
        sd = math.sqrt(max(float(grad @ self.cov @ grad), 0.0))
        q = float(stdtrit(max(self.dof, 1), 0.5 + level / 2.0))
        low = max(ceil - math.exp(u0 + q * sd), 1.0)
        high = min(ceil - math.exp(u0 - q * sd), ceil)
        return low, high

    def to_dict(self) -> dict:
        return {"kind": "fit", "model": "r_i(N) = 1 - c1 (1 + g (i-1)) N^-beta", "params": dict(self.params),
                "cov_ln_params": self.cov.tolist(), "param_order": list(_PARAM_NAMES), "dof": self.dof,
                "points": [dict(p) for p in self.points]}


def fit_training(points=None) -> TrainingFit:
    """Fit the saturating power law to points (dicts, ``(samples, tau[, steps])`` tuples or strings).

    ``None`` uses :func:`default_training_data`. Needs two distinct sample counts.
    """
    from scipy.optimize import least_squares

    pts = _normalize_points(default_training_data() if points is None else points)
    if len({p["samples"] for p in pts}) < 2:
        raise SpecsimError("data", [(p["samples"], p["tau"]) for p in pts],
                           "a fit needs at least two training data points with different sample counts")
    n = np.array([p["samples"] for p in pts])
    t = np.array([p["tau"] for p in pts])
    s = [p["steps"] for p in pts]
    ln_g0 = math.log(DEPTH_DECAY_PRIOR)

    def resid(th: np.ndarray) -> np.ndarray:
        model = np.array([float(_tau(th, n[j], s[j])) for j in range(len(pts))])
        return np.append((model - t) / TAU_SCATTER, (th[2] - ln_g0) / DEPTH_DECAY_PRIOR_LOG_SD)

    best = None
    for ln_c1, ln_beta in ((math.log(4.0), math.log(0.25)), (math.log(30.0), math.log(0.4)),
                           (math.log(1.0), math.log(0.1))):
        sol = least_squares(resid, [ln_c1, ln_beta, ln_g0], bounds=_BOUNDS, x_scale="jac")
        if best is None or sol.cost < best.cost:
            best = sol
    assert best is not None
    jac = best.jac
    chi2 = float((best.fun**2).sum())
    dof = len(pts) + 1 - 3
    scale = max(1.0, chi2 / dof) if dof > 0 else 1.0
    cov = scale * np.linalg.pinv(jac.T @ jac)
    c1, beta, g = (float(x) for x in np.exp(best.x))
    params = {"c1": c1, "beta": beta, "g": g, "ln_c1": float(best.x[0]), "ln_beta": float(best.x[1]),
              "ln_g": float(best.x[2]), "rms_residual_tau": float(np.sqrt(np.mean((best.fun[:-1] * TAU_SCATTER) ** 2))),
              "tau_scatter_assumed": TAU_SCATTER}
    return TrainingFit(params=params, cov=cov, points=pts, theta=np.asarray(best.x, dtype=float), dof=max(dof, 0))


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass
class TrainingWhatIf:
    """Serving payoff of more draft-training samples (modeled; tau from :class:`TrainingFit`)."""

    scenario: str
    samples_now: float
    samples_target: float
    tau_now: float
    tau_target: float
    tau_target_low: float
    tau_target_high: float
    best_steps_now: int
    best_steps_target: int
    tok_s_now: float
    tok_s_target: float
    speedup_now: float
    speedup_target: float
    baseline_tok_s: float
    gpu_hours_invested: float
    gpu_hours_saved_per_day: float
    payback_days: float
    gpu_hours_per_100k_samples: float
    fleet_tokens_per_day: float
    gpus_per_replica: int
    curve: dict
    fit: TrainingFit
    steps_scenario: int = 0
    tau_scenario: float = float("nan")
    tok_s_scenario: float = float("nan")
    speedup_scenario: float = float("nan")
    samples_now_source: str = ""
    cost_source: str = ""
    draft: str = ""
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready dict (non-finite numbers, e.g. a payback that never comes, become null)."""
        keys = ("samples_now", "samples_target", "tau_now", "tau_target", "tau_target_low", "tau_target_high",
                "tok_s_now", "tok_s_target", "speedup_now", "speedup_target", "baseline_tok_s",
                "gpu_hours_invested", "gpu_hours_saved_per_day", "payback_days", "gpu_hours_per_100k_samples",
                "fleet_tokens_per_day", "tau_scenario", "tok_s_scenario", "speedup_scenario")
        d: dict = {"kind": "modeled", "scenario": self.scenario, "draft": self.draft}
        d.update({k: _finite(getattr(self, k)) for k in keys})
        d.update(best_steps_now=self.best_steps_now, best_steps_target=self.best_steps_target,
                 steps_scenario=self.steps_scenario, samples_now_source=self.samples_now_source,
                 cost_source=self.cost_source, gpus_per_replica=self.gpus_per_replica,
                 curve={k: [x if isinstance(x, int) else _finite(x) for x in v] for k, v in self.curve.items()},
                 fit=self.fit.to_dict(), warnings=list(self.warnings))
        return d

    def headers(self) -> list[str]:
        """Columns of :meth:`rows`: the scenario as configured, then the best step count now and at the target."""
        return ["quantity", f"now: scenario (steps {self.steps_scenario})", "now: best steps", "target: best steps"]

    def rows(self) -> list[list[object]]:
        lo, hi = self.tau_target_low, self.tau_target_high
        return [
            ["training samples", f"{self.samples_now:,.0f}", f"{self.samples_now:,.0f}", f"{self.samples_target:,.0f}"],
            ["steps", self.steps_scenario, self.best_steps_now, self.best_steps_target],
            ["accept length", self.tau_scenario, self.tau_now, f"{self.tau_target:.3f} [{lo:.2f}, {hi:.2f}] 90%"],
            ["speculative tok/s (modeled)", self.tok_s_scenario, self.tok_s_now, self.tok_s_target],
            ["speedup vs baseline", self.speedup_scenario, self.speedup_now, self.speedup_target],
        ]

    def cost_rows(self) -> list[list[object]]:
        pb = self.payback_days
        return [
            ["GPU-hours invested (training)", self.gpu_hours_invested],
            ["serving GPU-hours saved per day (best steps now -> target)", self.gpu_hours_saved_per_day],
            ["payback (days)", pb if math.isfinite(pb) else "never"],
            ["GPU-hours per 100K samples", self.gpu_hours_per_100k_samples],
            ["fleet tokens per day", f"{self.fleet_tokens_per_day:,.0f}"],
            ["GPUs per replica", self.gpus_per_replica],
        ]

    def source_lines(self) -> list[str]:
        return [f"samples now: {self.samples_now_source}", f"training cost: {self.cost_source}"]

    # kept for callers of the old private names
    _rows = rows
    _cost_rows = cost_rows

    def __repr__(self) -> str:
        import textwrap

        from ..output.render import MAX_WIDTH, table_text

        head = f"{self.scenario}: draft-training what-if (baseline {self.baseline_tok_s:.1f} tok/s, modeled)"
        tail = "\n".join(textwrap.fill(x, MAX_WIDTH, subsequent_indent="  ") for x in self.source_lines())
        return "\n\n".join([head, table_text(self.headers(), self.rows()),
                              table_text(["investment", "value"], self.cost_rows()), tail])

    def markdown(self) -> str:
        from ..output.render import table_markdown

        return "\n\n".join([f"**{self.scenario}: draft-training what-if** (modeled; baseline {self.baseline_tok_s:.1f} tok/s)",
                              table_markdown(self.headers(), self.rows()),
                              table_markdown(["investment", "value"], self.cost_rows()),
                              "\n".join(f"* {x}" for x in self.source_lines())])

    def _repr_html_(self) -> str:
        from ..output.render import table_html

        return table_html(self.headers(), self.rows(), caption=f"{self.scenario}: training what-if") + \
            table_html(["investment", "value"], self.cost_rows())


def target_active_params(t) -> float:
    """Weights a target multiplies per token (active parameters: attention, dense or top-k + shared
    experts, router, lm_head); the embedding lookup is not a matmul."""
    a = t.attention
    h = t.hidden
    if a.kind == "mla":
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        q = (h * a.q_lora_rank + a.q_lora_rank * a.num_heads * qk) if a.q_lora_rank else h * a.num_heads * qk
        kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim)
        attn = q + kv + a.num_heads * a.v_head_dim * h
    else:
        attn = h * a.num_heads * a.head_dim * 2 + 2 * h * a.num_kv_heads * a.head_dim
    dense_layers = t.num_layers if t.moe is None else t.num_dense_layers
    mlp = dense_layers * 3 * h * t.intermediate
    if t.moe is not None:
        m = t.moe
        shared = m.num_shared_experts * 3 * h * (m.shared_intermediate or m.expert_intermediate)
        mlp += (t.num_layers - t.num_dense_layers) * (m.experts_per_token * 3 * h * m.expert_intermediate + shared
                                                      + h * m.num_experts)
    return float(t.num_layers * attn + mlp + h * t.vocab)


def draft_params(d) -> float:
    """Parameters of an EAGLE-3 head: the fc fusing the target's hidden states, its decoder layer(s)
    (attention over [embedding, hidden] = 2x hidden input, MLP) and its own lm_head."""
    h = d.hidden
    fc = d.fuse_hidden_states * h * h
    attn = 2 * h * (d.num_heads + 2 * d.num_kv_heads) * d.head_dim + d.num_heads * d.head_dim * h
    layer = attn + 3 * h * d.intermediate
    lm = h * d.draft_vocab if d.lm_head == "own" else 0.0
    return float(fc + d.num_layers * layer + lm)


def training_flops_per_token(target, draft, ttt_length: int = TTT_LENGTH) -> float:
    """FLOPs one training token costs: 2 P_target (the target forward that regenerates the response
    and yields the hidden states) + 6 P_draft x ttt_length (draft forward + backward, unrolled)."""
    return 2.0 * target_active_params(target) + 6.0 * draft_params(draft) * ttt_length


MAX_GPU_HOURS_PER_100K = 1e9  # GPU-hours to make and train on 100K samples: far past any real recipe (bounds the arithmetic)
MAX_FLEET_TOKENS_PER_DAY = 1e18  # tokens a fleet serves per day (today's largest fleets: ~1e14-1e15)


def scaled_gpu_hours_per_100k(target, draft) -> float:
    """GPU-hours per 100K samples for this target and draft: the lightseekorg reference run
    (:data:`LIGHTSEEK_GPU_HOURS_PER_100K_SAMPLES`, Kimi-K2.5 + its EAGLE-3 head, H200) scaled by
    training FLOPs per token, ``149 x F(target, draft) / F(Kimi-K2.5, its head)``. Assumes samples of
    the reference's length, the same GPUs and the same achieved efficiency."""
    from ..io.presets import get_model

    ref_t, ref_d = get_model(COST_REFERENCE_MODEL)
    return LIGHTSEEK_GPU_HOURS_PER_100K_SAMPLES * training_flops_per_token(target, draft) / \
        training_flops_per_token(ref_t, ref_d)


COST_FORMULA = ("GPU-h per 100K samples = 149 x F / F_ref, F = 2 P_target,active + 6 P_draft x 7 (TTT unroll); "
                "ref: lightseekorg/kimi-k2.5-eagle3, 448 GPU-h per 300K samples on H200")


def payback(
    tok_s_now: float,
    tok_s_target: float,
    samples_now: float,
    samples_target: float,
    gpu_hours_per_100k_samples: float,
    fleet_tokens_per_day: float,
    gpus_per_replica: int,
) -> dict[str, float]:
    """Training GPU-hours invested, serving GPU-hours saved per day and the payback time (days).

    Serving F tokens/day at ``tok_s`` per replica on G GPUs costs F / (tok_s * 3600) * G GPU-hours/day.
    """
    if not 0 <= gpu_hours_per_100k_samples <= MAX_GPU_HOURS_PER_100K:
        raise SpecsimError("gpu-hours-per-100k", gpu_hours_per_100k_samples,
                           f"training cost must be a number in [0, {MAX_GPU_HOURS_PER_100K:.0e}] GPU-hours")
    if not 0 <= fleet_tokens_per_day <= MAX_FLEET_TOKENS_PER_DAY:
        raise SpecsimError("fleet-tokens-per-day", fleet_tokens_per_day,
                           f"fleet tokens per day must be a number in [0, {MAX_FLEET_TOKENS_PER_DAY:.0e}]")
    if tok_s_now <= 0 or tok_s_target <= 0:
        raise SpecsimError("tok_s", (tok_s_now, tok_s_target), "throughputs must be > 0")
    invested = (samples_target - samples_now) / 1e5 * gpu_hours_per_100k_samples
    hours_now = fleet_tokens_per_day / (tok_s_now * 3600.0) * gpus_per_replica
    hours_target = fleet_tokens_per_day / (tok_s_target * 3600.0) * gpus_per_replica
    saved = hours_now - hours_target
    return {"gpu_hours_invested": invested, "gpu_hours_per_day_now": hours_now,
            "gpu_hours_per_day_target": hours_target, "gpu_hours_saved_per_day": saved,
            "payback_days": invested / saved if saved > 0 else math.inf}


def _best_over_steps(sc, rates: np.ndarray, max_steps: int):
    """The step count in 1..max_steps with the highest modeled tok/s for these rates.

    One vectorised sweep finds the step count; one prediction at it gives the full result.
    """
    from .predict import predict
    from .sweep import best_steps

    profile = [float(x) for x in rates[:max_steps]]
    best = best_steps(sc, max_steps, accept_rates=profile)["steps"]
    return predict(sc, steps=best, accept_rates=profile[:best])


def whatif_training(
    scenario=None,
    target_samples: float = 1.4e6,
    current_samples: float | None = None,
    data: list[str] | None = None,
    max_steps: int = 10,
    gpu_hours_per_100k_samples: float | None = None,
    fleet_tokens_per_day: float = 1e9,
    gpus_per_replica: int | None = None,
    use_default_data: bool = True,
    curve_points: int = 17,
    **overrides,
) -> TrainingWhatIf:
    """What does training the draft on ``target_samples`` instead of ``current_samples`` buy?

    Today's draft is the scenario's acceptance profile, trained on ``current_samples`` (default:
    the scenario's ``draft.training_samples``; an error if neither is known); each position's miss rate falls as (N / current)^-beta with beta fitted to the
    published drafts. For each sample count those rates feed ``specsim.predict`` at steps 1..max_steps and
    the best tok/s is kept. Payback: serving ``fleet_tokens_per_day`` at the per-replica tok/s on
    ``gpus_per_replica`` GPUs (default: the scenario's TP) costs tokens / (tok_s * 3600) * gpus GPU-hours
    a day; ``payback_days`` = GPU-hours invested / GPU-hours saved per day (inf if nothing is saved).
    ``data`` adds ``SAMPLES=TAU[@STEPS]`` points to the published ones (or replaces them if
    ``use_default_data`` is False).
    """
    from .build import build_scenario

    sc = build_scenario(scenario, **overrides)
    if current_samples is not None:
        now = float(current_samples)
        now_source = "given (--current-samples)"
    elif sc.draft.training_samples is not None:
        now = float(sc.draft.training_samples)
        now_source = f"the scenario's draft ({sc.draft.name}): " + sc.draft.sources.get(
            "training_samples", "draft.training_samples")
    else:
        raise SpecsimError("current-samples", None, f"the draft {sc.draft.name!r} of {sc.name} records no training "
                           "samples; give --current-samples N (e.g. 300K)", show_value=False)
    target = float(target_samples)
    if gpu_hours_per_100k_samples is not None:
        rate = float(gpu_hours_per_100k_samples)
        cost_source = "given (--gpu-hours-per-100k)"
    else:
        rate = scaled_gpu_hours_per_100k(sc.target, sc.draft)
        cost_source = COST_FORMULA + f"; P_target {target_active_params(sc.target) / 1e9:.1f}B, " \
                                     f"P_draft {draft_params(sc.draft) / 1e9:.2f}B"
    gpus = sc.parallel.tp if gpus_per_replica is None else gpus_per_replica
    if not (math.isfinite(now) and 0 < now <= MAX_SAMPLES):
        raise SpecsimError("current-samples", current_samples, f"training samples must be a number in (0, {fmt_bound(MAX_SAMPLES)}]")
    if not (math.isfinite(target) and 0 < target <= MAX_SAMPLES):
        raise SpecsimError("target-samples", target_samples, f"training samples must be a number in (0, {fmt_bound(MAX_SAMPLES)}]")
    if target <= now:
        raise SpecsimError("target-samples", target_samples, f"target samples must exceed current samples ({now:,.0f})")
    if not (math.isfinite(rate) and rate >= 0):
        raise SpecsimError("gpu-hours-per-100k", gpu_hours_per_100k_samples, "training cost must be a number >= 0")
    if not (math.isfinite(fleet_tokens_per_day) and fleet_tokens_per_day >= 0):
        raise SpecsimError("fleet-tokens-per-day", fleet_tokens_per_day, "fleet tokens per day must be a number >= 0")
    if int(gpus) != gpus or not 1 <= gpus <= MAX_GPUS_PER_REPLICA:
        raise SpecsimError("gpus-per-replica", gpus_per_replica,
                           f"GPUs per replica must be an integer in [1, {MAX_GPUS_PER_REPLICA:,}]")
    lo, hi = field_range(Speculation, "steps")
    if int(max_steps) != max_steps or not lo <= max_steps <= hi:
        raise SpecsimError("max-steps", max_steps, f"max steps must be an integer in [{lo}, {hi}]")
    if int(curve_points) != curve_points or curve_points < 2:
        raise SpecsimError("curve-points", curve_points, "curve points must be an integer >= 2")
    gpus, max_steps = int(gpus), int(max_steps)

    pts = default_training_data() if use_default_data else []
    if data:
        pts += [{"samples": s, "tau": t, "steps": k, "source": f"user: {raw}"}
                for (s, t, k), raw in zip(parse_data_points(list(data)), data, strict=True)]
    fit = fit_training(pts)

    cache: dict[float, dict] = {}
    # Anchor on today's draft: the scenario's own per-position profile is the draft trained on
    # `now` samples; each position's miss rate then falls as (N / now)^-beta with the fitted beta,
    # so the what-if keeps the measured depth shape and agrees with `specsim predict` at `now`.
    from .predict import rates_for

    today = np.clip(rates_for(sc, max_steps)[:max_steps], 0.0, _RATE_MAX)
    beta = float(fit.params["beta"])

    def anchored_rates(n: float) -> np.ndarray:
        return np.clip(1.0 - (1.0 - today) * (n / now) ** (-beta), 0.0, _RATE_MAX)

    def evaluate(n: float) -> dict:
        if n not in cache:
            p = _best_over_steps(sc, anchored_rates(n), max_steps)
            chain = fit.tau(n, p.steps)
            lo, hi = fit.tau_band(n, p.steps)
            # the fit's band, moved onto the anchored curve (same relative width)
            anchored_chain = float(1.0 + np.cumprod(anchored_rates(n)[: p.steps]).sum())
            lo, hi = lo * anchored_chain / chain, hi * anchored_chain / chain
            ratio = p.accept_length / anchored_chain if anchored_chain > 0 else 1.0  # tree gain (1 for chains)
            ceil = p.steps + 1.0
            cache[n] = {"pred": p, "low": min(max(lo * ratio, 1.0), ceil), "high": min(hi * ratio, ceil)}
        return cache[n]

    e_now, e_tgt = evaluate(now), evaluate(target)
    p_now, p_tgt = e_now["pred"], e_tgt["pred"]
    from .predict import evaluate as _evaluate

    p_sc = _evaluate(sc)  # the scenario as configured (its own steps and acceptance)
    pay = payback(p_now.tok_s, p_tgt.tok_s, now, target, rate, fleet_tokens_per_day, gpus)

    data_n = [p["samples"] for p in fit.points]
    warnings = []
    lo_n, hi_n = min(data_n), max(data_n)
    for what, n in (("current", now), ("target", target)):
        if not EXTRAPOLATION_FACTOR ** -1 * lo_n <= n <= EXTRAPOLATION_FACTOR * hi_n:
            warnings.append(f"{what} samples {n:,.0f} lie beyond the fitted data ({lo_n:,.0f} to {hi_n:,.0f} samples, "
                            f"x{EXTRAPOLATION_FACTOR:g} either side): the accept length there is an extrapolation of "
                            "the power law")
    grid = np.geomspace(min(now, *data_n) / 2.0, max(target, *data_n) * 2.0, int(curve_points))
    grid = np.unique(np.concatenate([grid, [now, target]]))
    curve: dict[str, list] = {"samples": [], "best_steps": [], "tau": [], "tau_low": [], "tau_high": [], "tok_s": []}
    for n in grid:
        e = evaluate(float(n))
        vals = (float(n), e["pred"].steps, e["pred"].accept_length, e["low"], e["high"], e["pred"].tok_s)
        for key, val in zip(curve, vals, strict=True):
            curve[key].append(val)

    return TrainingWhatIf(
        scenario=sc.name, samples_now=now, samples_target=target, tau_now=p_now.accept_length,
        tau_target=p_tgt.accept_length, tau_target_low=e_tgt["low"], tau_target_high=e_tgt["high"],
        best_steps_now=p_now.steps, best_steps_target=p_tgt.steps, tok_s_now=p_now.tok_s, tok_s_target=p_tgt.tok_s,
        speedup_now=p_now.speedup, speedup_target=p_tgt.speedup, baseline_tok_s=p_now.baseline_tok_s,
        gpu_hours_invested=pay["gpu_hours_invested"], gpu_hours_saved_per_day=pay["gpu_hours_saved_per_day"],
        payback_days=pay["payback_days"], gpu_hours_per_100k_samples=rate,
        fleet_tokens_per_day=float(fleet_tokens_per_day), gpus_per_replica=gpus, curve=curve, fit=fit,
        steps_scenario=p_sc.steps, tau_scenario=p_sc.accept_length, tok_s_scenario=p_sc.tok_s,
        speedup_scenario=p_sc.speedup, samples_now_source=now_source, cost_source=cost_source, draft=sc.draft.name,
        warnings=warnings,
    )
