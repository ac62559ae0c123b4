#!/usr/bin/env bash
# Device run 137 (H200): with swizzled tiles, D 64 batch 1-4 grids (splits x stages), PDL, 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r137; mkdir -p $R
[ -x build-gpu/bin/attention-bench ] || bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1
for r in 1 2; do
  for c in "64 1 8192 49 4" "64 1 8192 64 3" "64 1 8192 33 4" "64 1 8192 48 3" "64 1 16384 49 4" "64 1 16384 64 3" "64 1 32768 49 4" "64 1 32768 64 3" \
           "64 2 8192 24 4" "64 2 8192 32 3" "64 2 32768 24 4" "64 2 32768 32 3" \
           "64 4 8192 16 3" "64 4 8192 12 4" "64 4 8192 8 4" "64 4 8192 8 3" "64 4 32768 16 3" "64 4 32768 12 4" \
           "128 1 8192 33 3" "128 1 8192 24 3" "128 1 16384 33 3" "128 1 16384 24 3"; do
    echo "$(timeout 60 build-gpu/bin/attention-bench --decode $c 1 2>&1 | tail -1)" >> $R/sweep.txt
  done
done
sed 's/max_carveout 1: //' $R/sweep.txt | sort | awk '{print}' | cut -c1-120
cp tmp_exp/r137.sh $R/
echo "total $((SECONDS-S)) s"
