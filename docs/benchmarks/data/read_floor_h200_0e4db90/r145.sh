#!/usr/bin/env bash
# Device run 145 (H200): all kernel tests at HEAD (first GPU run of 7141187's final form), the read
# floor probe (tmp_exp/read_floor.cu) and the missed decode cells in the same run.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r145; mkdir -p $R
git log --oneline -1 > $R/commit.txt; git diff HEAD > $R/diff.txt
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $R/gpu.txt 2>&1
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/read_floor tmp_exp/read_floor.cu && timeout 150 /tmp/read_floor > $R/read_floor.txt 2>&1
echo "read floor rc=$? $((SECONDS-S)) s"; cat $R/read_floor.txt
for c in "64 1 8192" "64 1 16384" "64 1 32768" "64 4 8192" "128 1 8192" "128 1 16384" "128 1 32768"; do
  echo "$(timeout 60 build-gpu/bin/attention-bench --decode $c 0 0 1 2>&1 | tail -1)" >> $R/cells.txt
done
cat $R/cells.txt
timeout 300 build-gpu/bin/test_cuda_kernels > $R/tests.txt 2>&1
echo "tests rc=$?: $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST|SKIPPED \]' $R/tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s"
grep -E "OneTokenGemvLooping" $R/tests.txt | head
cp tmp_exp/r145.sh tmp_exp/read_floor.cu $R/
echo "total $((SECONDS-S)) s"
