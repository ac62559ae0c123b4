#!/usr/bin/env bash
# Device run 64 (1 x H100): EXPERIMENT LL_NULL, the decode call's parts: bit 0 skips the split
# kernel's compute (its memory pipeline alone), bit 1 skips the merge. attention-bench cells, modes
# 0-3, then --quick (copy bandwidth and same-size copies).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r64; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
for m in 0 1 2 3; do
  for c in "64 1 8192 4" "64 1 16384 4" "64 1 32768 4" "128 1 8192 3" "128 1 16384 3" "64 4 8192 4"; do
    set -- $c; echo -n "null $m: "; LL_NULL=$m timeout 20 $B --decode $1 $2 $3 0 $4 1 1
  done
done | tee $R/kernel_cells.txt
echo "cells $((SECONDS-S)) s"
timeout 100 $B --quick > $R/attention_bench_quick.jsonl 2>&1; grep -E '"copy"|decode_pdl' $R/attention_bench_quick.jsonl | head -12
cp tmp_exp/r64.sh $R/; echo "total $((SECONDS-S)) s"
