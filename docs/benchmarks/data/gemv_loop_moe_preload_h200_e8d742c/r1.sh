#!/usr/bin/env bash
# Device run 1: build, kernel tests, one-token GEMV loop A/B (dense models, batch 1).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt
build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaMoe*:*CudaLinear*:*Graph*' > $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED  \]" $OUT/tests.txt | tail -12
echo "tests done $((SECONDS-S)) s"
BIN=build-gpu/bin/lite-llama
mkdir -p $OUT/dense
run() {  # model label round env...
  local m=$1 l=$2 r=$3; shift 3
  env "$@" $BIN bench -m tests/gpu/configs/$m.json --load-format dummy --batch 1 --runs 3 -q \
    --json $OUT/dense/${m}_${l}_${r}.json > /dev/null 2>>$OUT/dense/err.txt || echo "FAILED $m $l $r"
}
for r in 1 2; do for m in llama-3.2-1b qwen3-4b; do
  run $m base $r LITE_LLAMA_GEMV1_LOOP=0
  run $m loop2 $r LITE_LLAMA_GEMV1_LOOP=2
  run $m loop3 $r LITE_LLAMA_GEMV1_LOOP=3
  run $m loop4 $r LITE_LLAMA_GEMV1_LOOP=4
done; done
python3 tests/gpu/ab_summary.py $OUT/dense
echo "dense done $((SECONDS-S)) s"
cp tmp_exp/r1.sh $OUT/
