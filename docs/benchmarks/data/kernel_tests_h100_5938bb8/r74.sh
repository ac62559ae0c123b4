#!/usr/bin/env bash
# Device run 74 (1 x H100): every kernel test at HEAD (after GqArgs::num_sms).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r74; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh test_cuda_kernels > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout $((285-SECONDS+S)) build-gpu/bin/test_cuda_kernels > $R/kernel_tests.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|^\[  SKIPPED \] [0-9]|FAILED  \]' $R/kernel_tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s"
cp tmp_exp/r74.sh $R/
