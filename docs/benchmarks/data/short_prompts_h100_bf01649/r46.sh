#!/usr/bin/env bash
# Device run 46 (1 x H100): issue 21's "short prompts must not get slower": the batch sweep of
# docs/benchmarks/report.md (prompt 128, 256 new tokens, batch 1-64, lite-llama only) at HEAD, to
# set beside its d5f3805 rows (before the long-context kernels). Resumable: pieces of an earlier
# call may be carried in tmp_exp/r46_prev.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r46; mkdir -p $R/cmp
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
[ -d tmp_exp/r46_prev ] && cp tmp_exp/r46_prev/piece_*.json $R/cmp/ 2>/dev/null
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 500 python3 bench/compare_hf.py --bin build-gpu/bin/lite-llama --no-report --time-limit-s 470 \
  --out $R/cmp --skip-done $R/cmp --engines lite-llama --sections batch \
  --models ${MODELS:-llama-3.2-1b,qwen3-4b,llama-3.2-3b,qwen2.5-3b} 2>&1 | tail -40
cp tmp_exp/r46.sh $R/; echo "total $((SECONDS-S)) s"
