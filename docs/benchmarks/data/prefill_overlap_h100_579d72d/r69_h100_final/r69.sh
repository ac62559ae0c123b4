#!/usr/bin/env bash
# Device run 69 (1 x H100): the final tree (overlap kept, no experiment flag): all kernel tests,
# the GEMM peak and prefill cells of the same run.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r69; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
git log --oneline -1 > $R/commit.txt 2>/dev/null; git diff --stat >> $R/commit.txt 2>/dev/null
bash tests/gpu/build_gpu.sh attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
timeout 100 $B --quick > $R/attention_bench_quick.jsonl 2>&1; grep -E 'gemm|"prefill"|"copy"' $R/attention_bench_quick.jsonl
for D in 64 128; do for L in 2048 8192 16384 32768; do timeout 30 $B --prefill $D $L; done; done | tee $R/prefill_cells.txt
echo "cells $((SECONDS-S)) s"
timeout 280 build-gpu/bin/test_cuda_kernels > $R/kernel_tests.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|^\[  SKIPPED|FAILED  \]' $R/kernel_tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s"
cp tmp_exp/r69.sh $R/; echo "total $((SECONDS-S)) s"
