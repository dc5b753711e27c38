"""Index of the fused-MoE Triton configs an SGLang release ships: which (experts, N, GPU, dtype) are tuned.

    python calibration/kernels/moe_config_index.py SGLANG_GIT_DIR COMMIT > models/sglang_moe_configs.json

SGLang's ``fused_moe_triton_config.get_moe_configs`` looks for
``configs/triton_<version>/E=<experts>,N=<intermediate per rank>,device_name=<torch device name>[,dtype=...].json``
(falling back to the other Triton versions' folders); where no file exists it logs "Using default
MoE kernel config" and runs ``get_default_config``. The scenario builder reads this index to tell
which of the two a deployment runs (:func:`specsim.io.presets.moe_config_tuned`). The names are
read from the repository's tree at one commit (``git ls-tree``); nothing else is taken from it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

CONFIG_DIR = "python/sglang/srt/layers/moe/fused_moe_triton/configs/"
#: specsim GPU preset -> the name ``torch.cuda.get_device_name()`` gives it, spaces as underscores (SGLang's key)
DEVICE_NAMES = {"h100": "NVIDIA_H100_80GB_HBM3", "h200": "NVIDIA_H200", "b200": "NVIDIA_B200", "h20": "NVIDIA_H20",
                "a100": "NVIDIA_A100-SXM4-80GB", "rtx3090": "NVIDIA_GeForce_RTX_3090"}
NAME = re.compile(r"^E=(\d+),N=(\d+),device_name=([^,]*?)(?:,dtype=([a-z0-9_]+))?(?:,(block_shape=\[\d+, ?\d+\]|per_channel_quant=True))?(_down)?\.json$")


def index(git_dir: str, commit: str) -> dict:
    names = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", commit, CONFIG_DIR],
                           check=True, capture_output=True, text=True).stdout.splitlines()
    configs = set()
    for path in names:
        m = NAME.match(path.rsplit("/", 1)[-1])
        if not m:
            continue
        e, n, dev, dtype, quant, _down = m.groups()
        configs.add(f"E={e},N={n},device_name={dev},dtype={dtype or 'bf16'}" + (f",{quant}" if quant else ""))
    return {
        "_about": ("Fused-MoE Triton config files SGLang ships (experts incl. a fused shared expert, N = expert "
                   "intermediate per TP rank, torch device name, weight dtype, and the fp8 variant - block_shape or "
                   "per_channel_quant - where the name has one; Triton-version folders and _down files merged). Where a "
                   "deployment's (E, N, device, dtype) is listed, SGLang runs that tuned table; else get_default_config. "
                   "Written by calibration/kernels/moe_config_index.py."),
        "source": f"https://github.com/tails-mpt/sglang/tree/{commit}/{CONFIG_DIR} (SGLang v0.5.6 + the thoughtworks "
                  "fork's patches; `git ls-tree` of that folder)",
        "device_names": DEVICE_NAMES,
        "configs": sorted(configs, key=lambda s: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", s)]),
    }


if __name__ == "__main__":
    print(json.dumps(index(sys.argv[1], sys.argv[2]), indent=1))
