#!/usr/bin/env bash
# Device run 99: tree 0fe4f80 (the mma.sync launcher merges through attention_prefill_merge). The
# prefill / chunk / mixed / graph / decode kernel tests.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r99; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
timeout 300 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaAttention*:*Graph*' > $R/tests.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s" | tee -a $R/summary.txt
grep -E "^\[  FAILED" $R/tests.txt | head
gzip $R/build.txt; cp tmp_exp/r99.sh $R/
