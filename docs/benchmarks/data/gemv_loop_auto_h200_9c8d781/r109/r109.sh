#!/usr/bin/env bash
# Device run 109: tree c932ec1. Kernel tests with the default tuning (the looping one-token GEMV on the H200).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r109; mkdir -p $R
bash tests/gpu/build_gpu.sh test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
timeout 380 build-gpu/bin/test_cuda_kernels > $R/tests.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|^\[  SKIPPED|FAILED  \]' $R/tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s" | tee -a $R/summary.txt
grep -E "^\[  FAILED" $R/tests.txt | head
tail -3 $R/tests.txt
(cd $R && gzip -f tests.txt build.txt)
