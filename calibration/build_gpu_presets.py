"""Write the measured GPU profiles' fits into the GPU and engine presets.

    python calibration/build_gpu_presets.py     # rewrites models/gpus.json and models/engines.json in place

The ``h200`` preset takes every fitted value from ``models/profiles/h200.json`` (measured with
``specsim measure gpu`` on one H200; see models/profiles/README.md), and so does every GPU with a
profile of its own (``models/profiles/<key>.json``: the H100) for its GPU values. The others have no
profile: Hopper parts (H20) carry the H200's per-kernel efficiencies over (same SM and memory
system generation), the rest carry them as an assumption, except values measured in public
(``PUBLISHED``: the RTX 3090's GEMM efficiency and bandwidth); rates that scale with memory
bandwidth (the vocabulary pass) scale by the datasheet bandwidth ratio. Every value says which.
The kernel costs engines share on one GPU (graph node gap, attention bandwidth shares:
``GPU_MEASURED_ENGINE_FIELDS``) go into each GPU preset from its own profile, and the engine presets name
none (None: the GPU's). The engine presets take the measured graph-replay fixed and eager-launch values, and
the host time per kernel of an eager model forward beyond the bare launch (``eager_dispatch_us``)
from the measured eager Llama-3.1-8B forwards at batch 1 (:func:`fit_eager_dispatch`).
Then the fused-MoE kernel's parameters (:func:`write_moe_grid`, :func:`specsim.analysis.moe_fit.fit`) fitted to
SGLang's kernel measured on each GPU that has it (``calibration/datasets/<gpu>-sglang-fused-moe.json``: the H200
and the H100): the per-CTA streaming rates, SM time per CTA and the two tile bandwidth shares into that GPU's
preset (the same chip's other parts carry it, the rest carry the H200's), the engines that run the kernel naming
none of their own; every GPU's SM count from its datasheet (``SM_COUNTS``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specsim.analysis.profile_fit import fit_profile  # noqa: E402
from specsim.io.presets import get_gpu  # noqa: E402
from specsim.physics.params import GPU_MEASURED_ENGINE_FIELDS  # noqa: E402

PROFILE = "models/profiles/h200.json"
EAGER_FORWARDS = "calibration/datasets/h200-llama-3.1-8b-forwards-eager-ctx2048.json"
HOPPER = ("h100", "h20")
CARRIED = ("b200", "a100", "rtx3090")
#: GPUs without a profile that carry another measured GPU's per-kernel values (same chip): {gpu: profiled gpu}
SAME_CHIP = {"h100-pcie": "h100"}
SCALES_WITH_BANDWIDTH = ("vocab_pass_bytes_per_s",)
ENGINES_TAKING_LAUNCH = ("sglang", "sglang-v2", "vllm", "vllm-async", "vllm-v0", "torch-graph")
TORCH_KERNEL_ENGINES = ("torch-graph", "hf-transformers")  # attention through torch SDPA (FlashAttention-2)

_VKPEAK_3090_BF16 = (82.1e12 + 80.2e12) / 2  # FLOP/s, instruction peak measured on two RTX 3090s
#: values measured in public for a GPU without a profile of ours: they replace the carried H200 values
PUBLISHED = {
    "rtx3090": {
        "gemm_peak_efficiency": (
            76.3e12 / _VKPEAK_3090_BF16,
            "measured: torch.mm bf16 76.34 / 76.68 / 76.58 TFLOPS on three RTX 3090 submissions (square 1024-10240, "
            "best size; https://github.com/zzc0721/torch-performance-test-data/blob/main/database.md, issue #42) over the "
            "81.2 TFLOPS instruction peak (peak_flops)"),
        "mem_efficiency": (
            856.31 / 936.0,
            "measured: clpeak global-memory bandwidth float4 856.31 GB/s on an RTX 3090 "
            "(https://github.com/krrishnarraj/clpeak/issues/104) over the 936 GB/s datasheet"),
    },
}


#: streaming multiprocessors per GPU, from the vendors' architecture documents
SM_COUNTS = {
    "h100": (132, "NVIDIA H100 Tensor Core GPU Architecture whitepaper: H100 SXM5 has 132 SMs "
                  "(https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper)"),
    "h100-pcie": (114, "NVIDIA H100 Tensor Core GPU Architecture whitepaper: H100 PCIe has 114 SMs "
                       "(https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper)"),
    "h200": (132, "the H100 SXM5's GH100 configuration (132 SMs, H100 whitepaper https://resources.nvidia.com/en-us-tensor-core/"
                  "gtc22-whitepaper-hopper) with HBM3e; 132 read by torch on the H200 measured here "
                  "(calibration/datasets/h200-sglang-fused-moe.json provenance sm_count)"),
    "b200": (148, "NVIDIA Blackwell architecture technical brief: B200 with 148 SMs across two dies "
                  "(https://resources.nvidia.com/en-us-blackwell-architecture)"),
    "h20": (78, "TechPowerUp GPU database, NVIDIA H20: 78 SMs (https://www.techpowerup.com/gpu-specs/h20.c4192) "
                "(reported; not in an NVIDIA datasheet)"),
    "a100": (108, "NVIDIA A100 Tensor Core GPU Architecture whitepaper: 108 SMs "
                  "(https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf)"),
    "rtx3090": (82, "NVIDIA Ampere GA102 GPU architecture whitepaper: RTX 3090 has 82 SMs "
                    "(https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf)"),
}
#: engines that run SGLang's fused MoE Triton kernel (vLLM: the same kernel and config rule, assumed)
MOE_TRITON_ENGINES = ("sglang", "sglang-v2", "vllm", "vllm-async", "vllm-v0")


def write_moe_grid(gpus: dict, engines: dict) -> dict:
    """The fused-MoE fits into the presets (in place), fitted on the presets as they are on disk (write the
    profile's values first): each GPU with SGLang's kernel measured on it (``calibration/datasets/<gpu>-sglang-fused-
    moe.json``: the H200 and the H100) takes its own fit, the same chip's other parts (``SAME_CHIP``) carry it, the
    rest carry the H200's; returns the H200's fit."""
    from specsim.analysis import moe_fit
    from specsim.io import presets

    presets._json.cache_clear()
    fits = {}
    for key in gpus:
        path = ROOT / "calibration" / "datasets" / f"{key}-sglang-fused-moe.json"
        if key.startswith("_") or not path.is_file():
            continue
        d = json.loads(path.read_text())
        f = moe_fit.fit(moe_fit.point_params(d["points"], "sglang", key))
        fits[key] = (f, f"fitted by calibration/build_gpu_presets.py (write_moe_grid, specsim.analysis.moe_fit.fit) to the "
                        f"{f['fitted']['points']} points of calibration/datasets/{path.name} (SGLang v0.5.6's fused MoE "
                        f"Triton kernel on one {d['provenance']['gpu']}, each point costed on the grid it ran; MAPE "
                        f"{f['fitted']['mape_pct']:.1f} %)")
    for key, entry in gpus.items():
        if key.startswith("_"):
            continue
        g = entry["gpu"]
        g["sm_count"], g["sources"]["sm_count"] = SM_COUNTS[key]
        base = key if key in fits else SAME_CHIP.get(key) if SAME_CHIP.get(key) in fits else "h200"
        f, src = fits[base]
        for name, v in f["values"].items():
            g[name] = round(v, 4 if "_us" in name else 3 if "efficiency" in name else -7)
            if base == key:
                g["sources"][name] = src
            else:
                kind = ("the same GH100 chip: assumed" if base != "h200" else "same Hopper SM and memory generation"
                        if key in HOPPER + tuple(SAME_CHIP) else "assumed: not measured on this GPU")
                g["sources"][name] = f"{base} value carried over ({kind}) until this GPU is measured; {src}"
    for key, entry in engines.items():
        if key in MOE_TRITON_ENGINES:
            e = entry["engine"]
            for name in ("moe_mem_efficiency", "moe_wide_tile_mem_efficiency"):
                e[name] = None
                e["sources"][name] = (f"None: the GPU preset's measured value (gpu.{name} in models/gpus.json: SGLang's "
                                      f"fused MoE Triton kernel on each GPU measured, the h200's {fits['h200'][0]['values'][name]:.3f})"
                                      + (" [vllm: the same kernel, assumed]" if key.startswith("vllm") else ""))
    return fits["h200"][0]


def main() -> None:
    prof = json.loads((ROOT / PROFILE).read_text())
    h200, _ = get_gpu("h200")
    fit = fit_profile(prof, h200)
    when = prof["provenance"]["date_utc"][:10]
    src_meas = f"fitted to {PROFILE} (specsim measure gpu, one NVIDIA H200, {when}; fit residuals in its README)"
    own = own_profile_fits()
    gpus = json.loads((ROOT / "models" / "gpus.json").read_text())
    for key, entry in gpus.items():
        if key.startswith("_"):
            continue
        g = entry["gpu"]
        for name, v in gpu_values(fit).items():
            if key == "h200":
                g[name], g["sources"][name] = v, src_meas
                continue
            if key in own:
                g[name], g["sources"][name] = gpu_values(own[key][0])[name], own[key][1]
                continue
            if SAME_CHIP.get(key) in own:
                base = SAME_CHIP[key]
                v_own = gpu_values(own[base][0])[name]
                base_bw = gpus[base]["gpu"]["hbm_bytes_per_s"]
                scaled = name in SCALES_WITH_BANDWIDTH
                g[name] = v_own * g["hbm_bytes_per_s"] / base_bw if scaled else v_own
                g["sources"][name] = (f"{base} value {'scaled by the datasheet bandwidth ratio' if scaled else 'carried over'} "
                                      f"(the same GH100 chip with HBM2e, 114 SMs and lower clocks: assumed) until this GPU "
                                      f"is profiled; {own[base][1]}")
                continue
            if key not in HOPPER + CARRIED:
                continue
            val = v * g["hbm_bytes_per_s"] / h200.hbm_bytes_per_s if name in SCALES_WITH_BANDWIDTH else v
            how = "scaled by the datasheet bandwidth ratio to the H200" if name in SCALES_WITH_BANDWIDTH else "carried over"
            kind = "same Hopper SM and memory generation" if key in HOPPER else "assumed: not measured on this GPU"
            g[name] = val
            g["sources"][name] = f"H200 value {how} ({kind}) until this GPU is profiled; {src_meas}"
            if name in PUBLISHED.get(key, {}):
                g[name], g["sources"][name] = PUBLISHED[key][name]
    engines = json.loads((ROOT / "models" / "engines.json").read_text())
    for key, entry in engines.items():
        if key.startswith("_"):
            continue
        e = entry["engine"]
        for name, v in fit.engine.items():
            if name == "stop_check_us":
                continue  # a host measurement, not the GPU's: the presets keep their engine release's figure
            if name.startswith("attention_unsplit"):
                if key not in TORCH_KERNEL_ENGINES:
                    continue  # FlashInfer / FA3 schedulers balance the sequence split at any batch
            elif name != "attention_mem_efficiency" and key not in ENGINES_TAKING_LAUNCH:
                continue  # hf-transformers keeps its own eager-launch measurement
            if name in GPU_MEASURED_ENGINE_FIELDS:  # a kernel cost of the GPU: each GPU preset carries its own
                e[name] = None
                e["sources"][name] = (f"None: the GPU preset's measured value (gpu.{name} in models/gpus.json; the h200's "
                                      f"is {v:.4g}, {src_meas})")
                continue
            e[name] = v
            e["sources"][name] = src_meas
    dispatch_us, n_points = fit_eager_dispatch(engines["torch-graph"]["engine"]["eager_launch_us"])
    measured = (f"measured: eager Llama-3.1-8B forwards on one H200 at batch 1, ctx 2048 take a median "
                f"{dispatch_us + engines['torch-graph']['engine']['eager_launch_us']:.1f} us of host time per kernel over "
                f"{n_points} widths ({EAGER_FORWARDS}, eager_points; host-bound: the same forwards replay in 6.0-7.1 ms), "
                f"less the bare launch eager_launch_us; fitted by calibration/build_gpu_presets.py (fit_eager_dispatch)")
    for key, entry in engines.items():
        if key.startswith("_"):
            continue
        if key in TORCH_KERNEL_ENGINES:
            entry["engine"]["eager_dispatch_us"] = round(dispatch_us, 3)
            entry["engine"]["sources"]["eager_dispatch_us"] = measured + (
                "" if key == "torch-graph" else
                "; assumed for this engine: plain torch modules like the measured forward's (not measured for it)")
        else:
            entry["engine"]["eager_dispatch_us"] = 0.0
            entry["engine"]["sources"]["eager_dispatch_us"] = (
                f"0: no host time per kernel beyond the bare launch. The founding case's SGLang verify runs eagerly "
                f"and NCCL tuning cut it by 27 % to 18.7 ms over its ~1,900 kernels (calibration/datasets/"
                f"founding_case.md), so the host issues a kernel in under ~10 us there, where the torch forward "
                f"measured beside it takes {dispatch_us + engines['torch-graph']['engine']['eager_launch_us']:.1f} us "
                f"({EAGER_FORWARDS}): fused engine kernels (sgl-kernel, vLLM custom ops) come with fewer torch view and "
                f"reshape ops around each launch")

    def write():
        (ROOT / "models" / "gpus.json").write_text(json.dumps(gpus, indent=2) + "\n")
        (ROOT / "models" / "engines.json").write_text(json.dumps(engines, indent=2) + "\n")

    write()  # the profile's values on disk, then the fused-MoE fit on top of them
    moe = write_moe_grid(gpus, engines)
    write()
    print(json.dumps(fit.to_dict(), indent=1))
    print(json.dumps({"moe_grid": moe["values"], "fitted": moe["fitted"]}, indent=1))



def gpu_values(fit) -> dict:
    """A profile fit's values that belong in a GPU preset: its per-kernel GPU values and the kernel costs measured on
    it that engine presets take from their GPU (``GPU_MEASURED_ENGINE_FIELDS``: graph node gap, attention bandwidth
    shares; the same torch kernels on the H100 reach 0.96 / 0.76 of its datasheet bandwidth against the H200's 0.93 /
    0.52, and the no-split plateau runs at ~2.5 TB/s on both)."""
    return {**fit.gpu, **{k: fit.engine[k] for k in GPU_MEASURED_ENGINE_FIELDS if k in fit.engine}}


def own_profile_fits() -> dict:
    """GPU preset key -> (fit, source text) for every GPU other than the H200 with a measured profile of its own
    (``models/profiles/<key>.json``): its per-kernel GPU values come from that fit instead of the H200's. The engine
    presets keep the H200 profile's values (graph replay, eager launch and attention shares are one per engine)."""
    out = {}
    for path in sorted((ROOT / "models" / "profiles").glob("*.json")):
        key = path.stem
        if key == "h200":
            continue
        prof = json.loads(path.read_text())
        gpu, _ = get_gpu(key)
        pv = prof["provenance"]
        out[key] = (fit_profile(prof, gpu),
                    f"fitted to models/profiles/{path.name} (specsim measure gpu, one {pv['gpu_name']}, {pv['date_utc'][:10]}; "
                    f"fit residuals in models/profiles/README.md)")
    return out

def fit_eager_dispatch(eager_launch_us: float) -> tuple[float, int]:
    """Host time per kernel of an eager model forward beyond the bare launch (us), and the points it rests on.

    At batch 1 an eager forward is host-bound (measured 12.5-14.2 ms against 6.0-7.1 ms replayed), so its time over
    the kernels the ``torch-graph`` preset counts for it is the host's time per kernel; the profile's bare launch of
    a tiny op (``eager_launch_us``) is the part of it any kernel pays.
    """
    import numpy as np

    from specsim.analysis.calibrate import dataset_scenario
    from specsim.physics.cycle import verify_breakdown
    from specsim.physics.params import scenario_params

    d = json.loads((ROOT / EAGER_FORWARDS).read_text())
    p = scenario_params(dataset_scenario(d))
    per_kernel = [pt["ms"] * 1e3 / float(verify_breakdown(p, num_draft_tokens=pt["tokens"], batch=1, ctx=pt["ctx"])["kernels"])
                  for pt in d["eager_points"] if pt["batch"] == 1]
    return float(np.median(per_kernel)) - eager_launch_us, len(per_kernel)


if __name__ == "__main__":
    main()
