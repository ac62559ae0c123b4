#!/usr/bin/env bash
# Device run 100: tree ec183f4. How much of a step is host launch overhead: decode steps with and
# without CUDA graphs (lite-llama bench --no-cuda-graph), batch 1, 8,192-token prompt, 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r100; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
for r in 1 2; do for m in llama-3.2-1b qwen3-4b; do for g in "" "--no-cuda-graph"; do
  echo "== $m $g round $r"
  timeout 120 build-gpu/bin/lite-llama bench -m tests/gpu/configs/$m.json --load-format dummy --batch 1 --prompt-len 8192 --gen-len 64 --runs 3 $g 2>&1 | grep -v "^\[lite-llama info\]" | tail -6
done; done; done > $R/bench.txt 2>&1
echo "done $((SECONDS-S)) s" | tee -a $R/summary.txt
cp tmp_exp/r100.sh $R/
