#!/usr/bin/env bash
# cluster decode attention: build, tests, kernel sweep, end-to-end A/B.
set -uo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
mkdir -p /tmp/r
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench || exit 1
echo "build $(( $(date +%s) - t0 )) s"
git rev-parse --short HEAD > /tmp/r/commit.txt 2>/dev/null || true
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > /tmp/r/gpu.txt
build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaAttention*:*Graph*' > /tmp/r/tests.txt 2>&1; echo "tests rc=$? $(grep -E 'PASSED|FAILED' /tmp/r/tests.txt | tr '\n' ' ')"
grep -B2 -A8 'Failure' /tmp/r/tests.txt | head -40
echo "tests done $(( $(date +%s) - t0 )) s"
for c in 8192 16384 32768; do for b in 1 4; do for cl in 0 1; do
  build-gpu/bin/attention-bench --decode 64 $b $c 0 4 1 $cl; build-gpu/bin/attention-bench --decode 128 $b $c 0 3 1 $cl; done; done; done 2>&1 | tee /tmp/r/sweep.txt
echo "sweep done $(( $(date +%s) - t0 )) s"
BATCHES=1 bash tests/gpu/ab_env.sh /tmp/r/llama32k 3 "LITE_LLAMA_DECODE_CLUSTER=0" "LITE_LLAMA_DECODE_CLUSTER=1" \
  "--max-batched-tokens 32768 --prompt-len 32768 --gen-len 128 -c 32900" llama-3.2-1b 2>&1 | tail -15
echo "ab1 done $(( $(date +%s) - t0 )) s"
BATCHES=1 bash tests/gpu/ab_env.sh /tmp/r/qwen16k 3 "LITE_LLAMA_DECODE_CLUSTER=0" "LITE_LLAMA_DECODE_CLUSTER=1" \
  "--max-batched-tokens 16384 --prompt-len 16384 --gen-len 128 -c 16512" qwen3-4b 2>&1 | tail -15
echo "ab2 done $(( $(date +%s) - t0 )) s"
build-gpu/bin/attention-bench > /tmp/r/attention_bench.jsonl 2>&1; grep -E 'decode_cluster' /tmp/r/attention_bench.jsonl | head -40
echo "full bench done $(( $(date +%s) - t0 )) s"
tar czf $OUT/r.tgz -C /tmp r
