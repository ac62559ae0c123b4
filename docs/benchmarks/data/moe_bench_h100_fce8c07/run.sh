#!/usr/bin/env bash
# Device run 7 (H100): all kernel tests, then the MoE table (tests/gpu/moe_bench.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 200 build-gpu/bin/test_cuda_kernels > $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests ran|FAILED  \]" $OUT/tests.txt | tail -12
echo "tests $((SECONDS-S)) s"
OUT=$OUT timeout $((580 - (SECONDS - S))) bash tests/gpu/moe_bench.sh build-gpu
echo "moe bench done $((SECONDS-S)) s"
cp tmp_exp/r7.sh $OUT/
cd $OUT && tar czf moe_bench.tgz moe && rm -rf moe
