#!/usr/bin/env bash
# Device run 123 (H200): the gemm_tune kernel test as committed (off by default, on in the test)
# and the load log of a tuned bench.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r123; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 60 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaLinear*' > $R/tests.txt 2>&1
echo "tests: $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST|Failure' $R/tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s"
LITE_LLAMA_GEMM_TUNE=1 timeout 60 build-gpu/bin/lite-llama bench -v -m tests/gpu/configs/qwen3-4b.json --load-format dummy \
  --batch 8,64 --prompt-len 128 --gen-len 32 --runs 1 > $R/bench_tuned.txt 2>&1
grep -E "projections|CUDA graphs" $R/bench_tuned.txt | cut -c1-300
timeout 60 build-gpu/bin/lite-llama bench -v -m tests/gpu/configs/qwen3-4b.json --load-format dummy \
  --batch 8,64 --prompt-len 128 --gen-len 32 --runs 1 > $R/bench_default.txt 2>&1
grep -E "projections|CUDA graphs" $R/bench_default.txt | cut -c1-300
cp tmp_exp/r123.sh $R/
echo "total $((SECONDS-S)) s"
