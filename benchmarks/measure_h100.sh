#!/usr/bin/env bash
# Device-machine script behind models/profiles/h100.json and the h100-* datasets (run from the repo root with $OUT set,
# on one H100: the device tool's nvidia-h100-x1 kind):
#   bash benchmarks/measure_h100.sh
# One call: the full `measure gpu` profile, the Llama-3.1-8B forward grid, SGLang's fused MoE kernel at the shapes of
# calibration/datasets/h200-sglang-fused-moe.json, then a Qwen3-30B-A3B forward grid with the time left.
# Runs the measure package by path so specsim's pydantic-based modules are never imported.
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-out}; mkdir -p "$OUT"
M="python3 specsim/measure/__main__.py"
LIMIT=${LIMIT:-570}
left() { echo $(( LIMIT - SECONDS )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu,pstate --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), 'triton', triton.__version__, 'grouped_mm', hasattr(torch, '_grouped_mm'))"
timeout 230 $M gpu --budget-s 190 --out "$OUT/h100.json" || echo "GPU rc=$?"
echo "after gpu: $SECONDS s"
timeout 200 $M forward --budget-s 170 --out "$OUT/h100-llama-3.1-8b-forwards.json" || echo "FWD rc=$?"
echo "after llama: $SECONDS s"
timeout 150 python3 calibration/kernels/sglang_fused_moe.py "$OUT/h100-sglang-fused-moe.json" > "$OUT/moe.log" 2>&1 || echo "MOE-KERNEL rc=$?"
tail -3 "$OUT/moe.log"
echo "after moe kernel: $SECONDS s"
b=$(( $(left) - 40 ))
if [ "$b" -gt 40 ]; then
  timeout $(( b + 30 )) $M forward --model qwen3-30b-a3b --budget-s "$b" --batch 1,2,4,8,16,32 --tokens 1,2,3,4,6,8,16,32,64 \
    --ctx 2048,8192 --out "$OUT/h100-qwen3-30b-a3b-forwards.json" || echo "QWEN rc=$?"
fi
echo "total $SECONDS s"
