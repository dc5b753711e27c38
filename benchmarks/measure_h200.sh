#!/usr/bin/env bash
# Device-machine script behind models/profiles/ (run from the repo root with $OUT set):
#   bash benchmarks/measure_h200.sh call1   # smoke tests, full `measure gpu`, Llama forwards with what time is left
#   bash benchmarks/measure_h200.sh call2   # full `measure gpu`, full Llama-3.1-8B forward grid, a Qwen3-30B-A3B MoE grid
#   bash benchmarks/measure_h200.sh call3   # full Qwen3-30B-A3B MoE grid, Llama-3.1-8B graph + eager at ctx 2048
# Runs the measure package by path so specsim's pydantic-based modules are never imported.
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-out}; mkdir -p "$OUT"
M="python3 specsim/measure/__main__.py"
LIMIT=${LIMIT:-560}
left() { echo $(( LIMIT - SECONDS )); }
stage=${1:-call1}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu,pstate --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), 'grouped_mm', hasattr(torch, '_grouped_mm'))"
if [ "$stage" = call1 ]; then
  timeout 70 $M gpu --quick --repeats 5 --out "$OUT/smoke-gpu.json" || echo "SMOKE gpu rc=$?"
  timeout 60 $M forward --batch 1,8 --tokens 1,4 --ctx 2048 --repeats 5 --eager 1x4@2048 --quick --out "$OUT/smoke-fwd.json" || echo "SMOKE fwd rc=$?"
  timeout 80 $M forward --model qwen3-30b-a3b --batch 1,8 --tokens 1,8 --ctx 2048 --repeats 5 --eager 1x1@2048 --quick --out "$OUT/smoke-moe.json" || echo "SMOKE moe rc=$?"
  echo "after smoke: $SECONDS s"
  timeout 330 $M gpu --budget-s 300 --out "$OUT/h200.json" || echo "GPU rc=$?"
  echo "after gpu: $SECONDS s"
  b=$(( $(left) - 45 ))
  if [ "$b" -gt 60 ]; then
    timeout $(( b + 40 )) $M forward --budget-s "$b" --out "$OUT/h200-llama-3.1-8b-forwards.json" || echo "FWD rc=$?"
  fi
elif [ "$stage" = call2 ]; then
  timeout 200 $M gpu --budget-s 170 --out "$OUT/h200.json" || echo "GPU rc=$?"
  echo "after gpu: $SECONDS s"
  timeout 260 $M forward --budget-s 230 --out "$OUT/h200-llama-3.1-8b-forwards.json" || echo "FWD rc=$?"
  echo "after llama: $SECONDS s"
  b=$(( $(left) - 50 ))
  if [ "$b" -gt 40 ]; then
    timeout $(( b + 40 )) $M forward --model qwen3-30b-a3b --budget-s "$b" --batch 1,2,4,8,16,32,64 --tokens 1,2,4,8,16,32,64 \
      --ctx 2048,8192 --eager 1x1@2048,8x4@2048 --out "$OUT/h200-qwen3-30b-a3b-forwards.json" || echo "MOE rc=$?"
  fi
elif [ "$stage" = call3 ]; then
  timeout 330 $M forward --model qwen3-30b-a3b --budget-s 300 --eager 1x1@2048,8x4@2048 \
    --out "$OUT/h200-qwen3-30b-a3b-forwards.json" || echo "MOE rc=$?"
  echo "after moe: $SECONDS s"
  b=$(( $(left) - 40 ))
  if [ "$b" -gt 40 ]; then
    timeout $(( b + 30 )) $M forward --ctx 2048 --eager all --budget-s "$b" \
      --out "$OUT/h200-llama-3.1-8b-forwards-eager-ctx2048.json" || echo "EAGER rc=$?"
  fi
fi
echo "total $SECONDS s"
