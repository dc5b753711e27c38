"""Turn a measured hardware profile (``specsim measure gpu``) into the cost model's GPU parameters.

Each fit moves physically named parameters of one kernel family to what the GPU measured:

* dense GEMMs vs M -> ``mem_efficiency``, ``gemm_peak_efficiency``, ``gemm_stream_loss``,
  ``kernel_floor_us`` (least squares in log time over every measured shape and M);
* attention decode/verify vs batch x context -> ``attention_mem_efficiency``,
  ``attention_half_efficiency_heads``, ``attention_fixed_us``;
* elementwise copies -> ``elementwise_mem_efficiency``;
* softmax + max / top-k over a vocabulary -> ``vocab_pass_bytes_per_s``, ``vocab_topk_fixed_us``;
* graph replay and eager launch -> ``graph_fixed_us``, ``graph_node_us``, ``eager_launch_us``.

The same functions build the shipped ``h200`` preset (``calibration/build_gpu_presets.py``) and
apply a user's own profile (``--profile FILE``), so both go through one path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import SpecsimError

ATTENTION_FIT_MAX_ITEMS = 128  # (request x KV head) work items: above it the profiled torch kernel plateaus


@dataclass
class ProfileFit:
    """Fitted values by parameter name, with the residuals of each family's fit (modeled vs measured)."""

    gpu: dict[str, float] = field(default_factory=dict)
    engine: dict[str, float] = field(default_factory=dict)
    residuals: dict[str, dict] = field(default_factory=dict)
    source: str = ""

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "engine": self.engine, "residuals": self.residuals, "source": self.source}


def _stats(model_us: np.ndarray, meas_us: np.ndarray) -> dict:
    err = 100.0 * (model_us / meas_us - 1.0)
    return {"points": int(err.size), "mape_pct": float(np.mean(np.abs(err))), "max_abs_pct": float(np.max(np.abs(err))),
            "median_pct": float(np.median(err))}


def fit_gemm(profile: dict, hbm_bytes_per_s: float, bf16_flops: float, node_us: float) -> tuple[dict, dict]:
    """Dense bf16 GEMM curves -> memory efficiency, compute peak efficiency and ramp, kernel floor."""
    from scipy.optimize import least_squares

    from ..physics.cost import gemm_us

    rows = [(c["k"], c["n"], p["m"], p["us"]) for c in profile.get("gemm", {}).get("curves", [])
            if c.get("dtype") == "bf16" and c.get("kind") == "dense" for p in c.get("points", [])]
    if len(rows) < 8:
        raise SpecsimError("profile", "gemm", "needs at least 8 dense bf16 GEMM points to fit")
    k, n, m, us = (np.asarray(a, dtype=float) for a in zip(*rows))

    def model(x):
        p = {"hbm_bytes_per_s": hbm_bytes_per_s, "gemm_peak_efficiency": x[0], "gemm_stream_loss": x[1]}
        mem, excess = gemm_us(p, m, n, k, k * n * 2.0, m * (k + n) * 2.0, x[2], bf16_flops)
        return mem + excess + x[3] + node_us

    sol = least_squares(lambda x: np.log(model(x) / us), [0.75, 0.15, 0.85, 3.0],
                        bounds=([0.05, 0.0, 0.05, 0.0], [1.0, 1.0, 1.0, 30.0]))
    x = sol.x
    return ({"gemm_peak_efficiency": float(x[0]), "gemm_stream_loss": float(x[1]), "mem_efficiency": float(x[2]),
             "kernel_floor_us": float(x[3])}, _stats(model(x), us))


def fit_attention(profile: dict, hbm_bytes_per_s: float, node_us: float) -> tuple[dict, dict]:
    """Attention (folded GQA, as engines pack it) -> bandwidth efficiency, its ramp with work items, fixed cost."""
    from scipy.optimize import least_squares

    sec = profile.get("attention", {})
    kv_heads = float(sec.get("shape", {}).get("kv_heads", 8))
    pts = [p for p in sec.get("points", []) if p.get("variant") == "fold" and p.get("kv_bytes")]
    pts = [p for p in pts if p["batch"] * kv_heads <= ATTENTION_FIT_MAX_ITEMS]
    if len(pts) < 6:
        raise SpecsimError("profile", "attention", "needs at least 6 folded attention points to fit")
    by = np.array([p["kv_bytes"] for p in pts], dtype=float)
    items = np.array([p["batch"] * kv_heads for p in pts], dtype=float)
    us = np.array([p["us"] for p in pts], dtype=float)

    def model(x):
        eff = x[0] * items / (items + x[1])
        return by / (hbm_bytes_per_s * eff) * 1e6 + x[2] + node_us

    sol = least_squares(lambda x: np.log(model(x) / us), [0.85, 4.0, 6.0], bounds=([0.05, 0.0, 0.0], [1.0, 4096.0, 100.0]))
    x = sol.x
    vals = {"attention_mem_efficiency": float(x[0]), "attention_half_efficiency_heads": float(x[1]),
            "attention_fixed_us": float(x[2])}
    # past ATTENTION_FIT_MAX_ITEMS the measured kernel stops splitting the sequence: its bandwidth plateaus
    big = [p["kv_bytes_per_s"] / hbm_bytes_per_s for p in sec.get("points", []) if p.get("variant") == "fold"
           and p["batch"] * kv_heads > ATTENTION_FIT_MAX_ITEMS and p.get("ctx", 0) >= 2048 and p.get("kv_bytes_per_s")]
    if big:
        vals["attention_unsplit_items"] = float(ATTENTION_FIT_MAX_ITEMS)
        vals["attention_unsplit_efficiency"] = float(np.median(big))
    return vals, _stats(model(x), us)


def fit_vocab(profile: dict) -> tuple[dict, dict]:
    """softmax + max over fp32 logits vs rows x vocab -> a fixed time and a streaming rate."""
    pts = [p for p in profile.get("topk", {}).get("points", []) if p.get("k") == 1]
    if len(pts) < 4:
        raise SpecsimError("profile", "topk", "needs at least 4 softmax+max points to fit")
    elems = np.array([p["rows"] * p["vocab"] for p in pts], dtype=float)
    us = np.array([p["us"] for p in pts], dtype=float)
    # t = fixed + 4 bytes x elements / rate, fitted with relative weights
    A = np.stack([np.ones_like(elems), 4.0 * elems], axis=1) / us[:, None]
    coef, *_ = np.linalg.lstsq(A, np.ones_like(us), rcond=None)
    fixed, inv_rate = float(max(coef[0], 0.0)), float(max(coef[1], 1e-18))
    model = fixed + 4.0 * elems * inv_rate
    # top-k (k > 1) against softmax + max at the same rows x vocab: the extra streaming passes
    maxes = {(p["rows"], p["vocab"]): p["us"] for p in pts}
    ratios = [(q["us"] - fixed) / (maxes[(q["rows"], q["vocab"])] - fixed)
              for q in profile.get("topk", {}).get("points", [])
              if q.get("k", 1) > 1 and (q["rows"], q["vocab"]) in maxes and q["rows"] * q["vocab"] >= 2**24
              and maxes[(q["rows"], q["vocab"])] > fixed]
    vals = {"vocab_topk_fixed_us": fixed, "vocab_pass_bytes_per_s": 1e6 / inv_rate}
    if ratios:
        vals["vocab_topk_pass_factor"] = float(max(np.median(ratios), 1.0))
    return vals, _stats(model, us)


def fit_profile(profile: dict, gpu) -> ProfileFit:
    """Every family's fit the profile has data for (``gpu`` gives the datasheet bandwidth and peak)."""
    g = profile.get("graph", {})
    node = float(g.get("per_node_us", 1.0))
    out = ProfileFit(source=f"specsim measure on {profile.get('provenance', {}).get('gpu_name', '?')}, "
                            f"{profile.get('provenance', {}).get('date_utc', '?')}")
    if profile.get("gemm", {}).get("curves"):
        vals, res = fit_gemm(profile, gpu.hbm_bytes_per_s, gpu.peak_flops["bf16"], node)
        out.gpu.update(vals)
        out.residuals["gemm"] = res
    if profile.get("attention", {}).get("points"):
        vals, res = fit_attention(profile, gpu.hbm_bytes_per_s, node)
        out.engine["attention_mem_efficiency"] = vals.pop("attention_mem_efficiency")
        for key in ("attention_unsplit_items", "attention_unsplit_efficiency"):
            if key in vals:
                out.engine[key] = vals.pop(key)
        floor = out.gpu.get("kernel_floor_us", gpu.kernel_floor_us)
        vals["attention_fixed_us"] = max(vals["attention_fixed_us"] - floor, 0.0)  # the floor is counted apart
        out.gpu.update(vals)
        out.residuals["attention"] = res
    if profile.get("topk", {}).get("points"):
        vals, res = fit_vocab(profile)
        out.gpu.update(vals)
        out.residuals["vocab_softmax_max"] = res
    copies = [p["bytes_per_s"] for p in profile.get("copy", {}).get("points", [])
              if "elementwise" in p.get("variant", "") and p.get("bytes", 0) >= 2**26]
    if copies:
        out.gpu["elementwise_mem_efficiency"] = float(min(np.median(copies) / gpu.hbm_bytes_per_s, 1.0))
    if "fixed_us" in g:
        out.engine["graph_fixed_us"] = float(g.get("idle_replay_us", g["fixed_us"]))
        out.engine["graph_node_us"] = node
    if "eager_launch_us" in g:
        out.engine["eager_launch_us"] = float(g["eager_launch_us"])
    sync = profile.get("host", {}).get("sync", {})
    if "item_idle_us" in sync and sync.get("device") == "cuda":  # this box's GPU->CPU round trip
        out.engine["host_sync_us"] = float(sync["item_idle_us"])
    stop = profile.get("host", {}).get("stop_check", {})
    if "stop_string_decode_us" in stop:  # this host's finish check with a stop string (tokenizer decode)
        out.engine["stop_check_us"] = float(stop["stop_string_decode_us"])
    if profile.get("moe", {}).get("points"):
        vals, res = fit_moe(profile, gpu, out)
        out.gpu.update({k: v for k, v in vals.items() if k.startswith("moe_cta") or k == "sm_count"})
        out.engine.update({k: v for k, v in vals.items() if k in ("moe_mem_efficiency", "moe_wide_tile_mem_efficiency")})
        out.residuals["moe"] = res
    if profile.get("flashinfer", {}).get("points"):
        from . import tree_fit

        fi_points = profile["flashinfer"]["points"]
        n_usable = len(tree_fit.usable(fi_points))
        if n_usable < tree_fit.MIN_POINTS:  # too few to fit: the presets' numbers stay
            out.residuals["flashinfer_tree"] = {"note": f"{n_usable} usable custom-mask points, "
                                                        f"fewer than {tree_fit.MIN_POINTS}: nothing fitted"}
        else:
            # relative to this profile's own attention terms, where it has them
            f = tree_fit.fit(fi_points, gpu, out.gpu, {k: v for k, v in out.engine.items() if k.startswith("attention_")})
            out.engine.update(f["values"])
            out.engine["tree_attention_fa2_custom_mask"] = True
            plans = tree_fit.plan_costs(fi_points)  # this host's plan() calls
            if plans:
                out.engine.update({k: plans[k] for k in tree_fit.PLAN_FIELDS})
            out.residuals["flashinfer_tree"] = {k: f[k] for k in ("points", "mape_pct", "worst_pct", "within_15_pct")}
    return out


MOE_FIT_MAX_MAPE_PCT = 25.0  # a kernel this far from the model's form is not the kernel the profile claims
MOE_PRIOR_SD_LOG = 1.0  # the presets' H200 values as the prior of another GPU's (a factor e at one sigma, assumed)


def fit_moe(profile: dict, gpu, fitted: ProfileFit) -> tuple[dict, dict]:
    """The fused-MoE kernel's parameters fitted to the profile's moe points (:func:`specsim.analysis.moe_fit.fit`),
    each costed on this GPU: its datasheet bandwidth and FLOP rates, its SM count (torch's, in the profile),
    and the floor, node gap and GEMM efficiency the same profile measured where it has them."""
    from . import moe_fit

    sm = int(profile.get("provenance", {}).get("sm_count") or gpu.sm_count)  # validated: an integer in [0, 10000]
    common = {"hbm_bytes_per_s": gpu.hbm_bytes_per_s, "sm_count": float(sm),
              "kernel_floor_us": fitted.gpu.get("kernel_floor_us", gpu.kernel_floor_us),
              "gemm_peak_efficiency": fitted.gpu.get("gemm_peak_efficiency", gpu.gemm_peak_efficiency)}
    if "graph_node_us" in fitted.engine:
        common["graph_node_us"] = fitted.engine["graph_node_us"]
    points = profile["moe"]["points"]
    pairs = moe_fit.point_params(points, "sglang", "h200", common)
    unknown = len(points) - len(pairs)
    if not pairs:
        return {}, {"points": 0, "note": f"none of its {len(points)} points is of a shape the model knows "
                                         "(moe_fit.SHAPE_DEPLOYMENTS): nothing fitted"}
    for _, p in pairs:  # the FLOP rate of this GPU for the experts' dtype
        p["flops_routed"] = gpu.flops_for("fp8" if p["moe_fp8_tiles"] else "bf16")
    names = moe_fit.identifiable(pairs)  # a tile kind no point has keeps the deployment's value
    from ..io.presets import get_engine

    eng = get_engine("sglang")
    start = {k: getattr(gpu, k) if hasattr(gpu, k) else getattr(eng, k) for k in names}
    try:
        f = moe_fit.fit(pairs, names=names, start=start, prior_sd_log=MOE_PRIOR_SD_LOG)
    except ValueError as exc:  # scipy: residuals not finite (points no physical kernel gives)
        raise SpecsimError("profile.moe", f"{len(pairs)} points", f"cannot be fitted ({exc})") from None
    mape = f["fitted"]["mape_pct"]
    if not math.isfinite(mape) or mape > MOE_FIT_MAX_MAPE_PCT:
        raise SpecsimError("profile.moe", f"{len(pairs)} points", f"the fused-MoE model fits them only to MAPE {mape:.3g} % "
                           f"(at most {MOE_FIT_MAX_MAPE_PCT:.0f} % accepted): not this kernel's timings")
    vals = dict(f["values"])
    vals["sm_count"] = sm
    note = {"unknown_shapes_skipped": unknown} if unknown else {}
    return vals, {**f["fitted"], **note, "fitted_parameters": names, "model": "moe_fit.GRID_PARAMS on the grid each point ran"}


def collective_fits(profile: dict, tp: int) -> dict[str, tuple[float, float]]:
    """Measured all-reduce (alpha_us, bus bytes/s) at this TP size, by mode (graph / eager), if any."""
    from ..measure.profile import ProfileError, collective_fit

    out = {}
    for mode in ("graph", "eager"):
        try:
            out[mode] = collective_fit(profile, tp, "all_reduce", mode)
        except ProfileError:
            continue
    return out


def _same_gpu(measured_on: str, scenario_gpu: str, preset: str | None) -> bool:
    """Whether torch's device name (``NVIDIA H200``, ``NVIDIA GeForce RTX 3090``, ``NVIDIA H100 PCIe``) is the
    scenario's GPU: its preset key in the name (``h20`` not inside ``h200``), and no form factor (PCIe, NVL, SXM)
    that the scenario's GPU name lacks. Unknown GPUs (no preset) are not judged."""
    import re

    def words(x: str) -> list[str]:
        return re.findall(r"[a-z0-9]+", x.lower())

    got, want = words(measured_on), words(scenario_gpu)
    if preset is None:
        return True
    joined = set(got) | {a + b for a, b in zip(got, got[1:])}  # "rtx 3090" -> "rtx3090"
    if re.sub(r"[^a-z0-9]", "", preset.lower()) not in joined:
        return False
    return not any(ff in w and not any(ff in v for v in want) for w in got for ff in ("pcie", "nvl", "sxm"))


def _check_fitted_ranges(fit: ProfileFit, path: str, hint: str) -> None:
    """Each fitted value within its physical range (the GPU's or engine's schema bounds): a value outside names
    the profile and the fitted parameter, not the scenario built from it."""
    from ..physics.schema import GPU, Engine, field_range

    for schema, vals in ((GPU, fit.gpu), (Engine, fit.engine)):
        for key, v in vals.items():
            if key not in schema.model_fields:
                continue
            lo, hi = field_range(schema, key)
            if not np.isfinite(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
                raise SpecsimError("profile", path, f"its points fit {key} = {v:.4g}, outside the physical range "
                                                    f"{lo if lo is not None else '-inf'} to {hi if hi is not None else 'inf'}: "
                                                    f"{hint}")


def apply_profile(sc, path: str):
    """A copy of the scenario whose GPU (and the engine's launch costs) take a measured profile's fits.

    ``path``: a profile file, or the name of a shipped one (``h200`` = models/profiles/h200.json)."""
    from pathlib import Path

    from ..io.presets import data_root, preset_key, scenario_from_dict
    from ..measure.profile import ProfileError, load_profile

    if not str(path).strip():
        raise SpecsimError("profile", path, "an empty name; give a profile file or a shipped name (h200)")
    shipped = data_root("models").joinpath("profiles", f"{path}.json")
    if not Path(path).exists() and shipped.is_file():  # a shipped profile by name: --profile h200
        path = str(shipped)
    try:
        prof = load_profile(path)
    except ProfileError as exc:  # "FILE: why": the file as the value given, as every other file flag says it
        msg, lead = str(exc), f"{path}: "
        if msg.startswith(lead):
            raise SpecsimError("profile", path, msg[len(lead):]) from None
        raise SpecsimError("profile", path, msg, show_value=False) from None  # the message names the file
    except OSError as exc:
        raise SpecsimError("profile", path, f"unreadable ({exc.strerror or exc})") from None
    fit = fit_profile(prof, sc.gpu)
    measured_on = str((prof.get("provenance") or {}).get("gpu_name") or "")
    other_gpu = bool(measured_on) and not _same_gpu(measured_on, sc.gpu.name, preset_key("gpus", sc.gpu.name))
    _check_fitted_ranges(fit, path, f"it was measured on {measured_on[:80]}, not on this scenario's {sc.gpu.name}: give "
                                    "--gpu to match it" if other_gpu else "check the points of that section "
                                    "(specsim measure check)")
    coll = collective_fits(prof, sc.parallel.tp) if sc.parallel.tp > 1 and "collectives" in prof else {}
    if not fit.gpu and not fit.engine and not coll:
        raise SpecsimError("profile", path, f"holds nothing this deployment can use (no GEMM, attention, top-k, graph, host, "
                                            f"copy, fused-MoE, FlashInfer or TP{sc.parallel.tp} all-reduce data)")
    data = sc.model_dump()
    src = f"fitted to the measured profile {path} ({fit.source})"
    tp = sc.parallel.tp
    for mode, (alpha, bw) in coll.items():
        key = "allreduce" if mode == "graph" else "allreduce_eager"
        ar = data["parallel"].get(key) or dict(data["parallel"]["allreduce"])
        # the measured NCCL line covers every message size it timed: no size limit, no preset fallback past it
        ar = {**ar, "alpha_us": {**ar["alpha_us"], tp: alpha}, "bus_bytes_per_s": bw, "max_message_bytes": None,
              "bus_bytes_per_s_by_tp": None, "max_message_bytes_by_tp": None, "fallback": None,
              "sources": {**ar.get("sources", {}), "alpha_us": f"TP{tp}: {src}", "bus_bytes_per_s": f"TP{tp}: {src}",
                          "max_message_bytes": f"None: the measured line ({src})"}}
        data["parallel"][key] = ar
    for key, v in fit.gpu.items():
        data["gpu"][key] = v
        data["gpu"].setdefault("sources", {})[key] = src
    for key, v in fit.engine.items():
        if key.startswith("moe_") and data["engine"].get("moe_tiles", "none") == "none":
            continue  # the Triton kernel's shares: not this engine's kernels
        data["engine"][key] = v
        data["engine"].setdefault("sources", {})[key] = src
    if other_gpu:
        data.setdefault("notes", []).append(
            f"the profile {path} was measured on {measured_on[:80]}, not on this scenario's {sc.gpu.name}: its fits "
            "describe that GPU (give --gpu to match it, or measure this one with `specsim measure`)")
    data["name"] = f"{sc.name}+profile"
    data.setdefault("provenance", {})["profile"] = {"path": str(path), "fit": fit.to_dict()}
    return scenario_from_dict(data, "scenario")
