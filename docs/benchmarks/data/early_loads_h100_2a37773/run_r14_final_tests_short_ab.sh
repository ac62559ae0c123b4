#!/usr/bin/env bash
# Device run 14 (H100): early loads only in small steps (norm <= 512 rows, RoPE <= 512 tokens).
# Build new + base, all kernel tests, short-prompt A/B (decode step and prefill TTFT).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
mkdir -p /tmp/r14
nvidia-smi --query-gpu=name --format=csv,noheader
( cmake -S tmp_exp/base -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
    -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > /tmp/r14/base_cmake.txt 2>&1 && \
  cmake --build build-base -j 16 --target lite-llama > /tmp/r14/base_build.txt 2>&1; echo "base build rc $? $((SECONDS-S)) s" ) &
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > /tmp/r14/build.txt 2>&1 || { tail -30 /tmp/r14/build.txt; grep -E "error" build-gpu.build.log | head; exit 1; }
echo "new build $((SECONDS-S)) s"
wait
timeout 240 build-gpu/bin/test_cuda_kernels > /tmp/r14/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" /tmp/r14/tests.txt | tail -12
echo "tests $((SECONDS-S)) s"
tar czf $OUT/r14.tgz -C /tmp r14
BASE_BUILD=build-base bash tests/gpu/ab_builds.sh tmp_exp/base /tmp/r14/short 2 llama-3.2-1b qwen3-4b
echo "short A/B $((SECONDS-S)) s"
cp tmp_exp/r14.sh /tmp/r14/
tar czf $OUT/r14.tgz -C /tmp r14
