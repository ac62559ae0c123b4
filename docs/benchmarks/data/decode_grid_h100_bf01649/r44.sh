#!/usr/bin/env bash
# Device run 44 (1 x H100): decode attention grid shape at batch 1 / 4: stages x splits (blocks an
# SM), plain and PDL, beside the copy of the same bytes. Does a free smem slot for the next call's
# blocks (3 stages, 3 blocks an SM at D 64) or fewer, longer splits beat the 4-stage one-wave grid?
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r44; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
for pdl in 1 0; do
for ctx in 8192 16384 32768; do
  for c in "4 49" "4 33" "4 16" "3 49" "3 66" "3 33" "2 66" "2 99"; do set -- $c; timeout 20 $B --decode 64 1 $ctx $2 $1 $pdl; done
  for c in "3 33" "3 16" "2 33" "2 49" "4 16"; do set -- $c; timeout 20 $B --decode 128 1 $ctx $2 $1 $pdl; done
done
for c in "4 12" "4 8" "3 12" "3 16" "2 24" "2 16"; do set -- $c; timeout 20 $B --decode 64 4 8192 $2 $1 $pdl; done
echo "pdl $pdl $((SECONDS-S)) s"
done | tee $R/sweep.txt
cp tmp_exp/r44.sh $R/; echo "total $((SECONDS-S)) s"
