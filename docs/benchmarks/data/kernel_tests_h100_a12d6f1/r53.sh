#!/usr/bin/env bash
# Device run 53 (1 x H100): kernel tests at the session's final tree (PrefillOnTheMmaSyncKernel now
# through with_tuning), the attention tests first, then the whole test_cuda_kernels.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r53; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh test_cuda_kernels > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaAttention*' > $R/attention_tests.txt 2>&1
echo "attention rc $? $((SECONDS-S)) s"; grep -E "PASSED|FAILED" $R/attention_tests.txt | tail -5
timeout 330 build-gpu/bin/test_cuda_kernels --gtest_filter='-*CudaAttention*' > $R/other_tests.txt 2>&1
echo "others rc $? $((SECONDS-S)) s"; grep -E "PASSED|FAILED|SKIPPED \]" $R/other_tests.txt | tail -8
cp tmp_exp/r53.sh $R/; echo "total $((SECONDS-S)) s"
