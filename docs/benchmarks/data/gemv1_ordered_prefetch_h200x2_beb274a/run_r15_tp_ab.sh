#!/usr/bin/env bash
# Device run 15 (2 x H100): measure CudaTuning::gemv1_ordered_prefetch (LITE_LLAMA_GEMV1_ORDERED_PREFETCH).
# Build, the GEMV kernel tests, then Llama-3.1-8B tp 1 / tp 2 batch 1 and 8 with the setting alternated run by run.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/r15/tp
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > /tmp/r15/build.txt 2>&1 || { tail -30 /tmp/r15/build.txt; grep -E "error" build-gpu.build.log | head; exit 1; }
echo "build $((SECONDS-S)) s"
export NCCL_NVLS_ENABLE=0
timeout 120 build-gpu/bin/test_cuda_kernels --gtest_filter='*Gemv*:*Linear*' > /tmp/r15/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" /tmp/r15/tests.txt | tail -8
for r in 1 2 3; do
  for c in tp1-a:1: tp1-b:1:LITE_LLAMA_GEMV1_ORDERED_PREFETCH=1 tp2-a:2: tp2-b:2:LITE_LLAMA_GEMV1_ORDERED_PREFETCH=1; do
    IFS=: read l tp e <<< "$c"
    env $e timeout 90 build-gpu/bin/lite-llama bench --load-format dummy -m tests/gpu/configs/llama-3.1-8b.json \
      --tp $tp --dtype bf16 --batch 1,8 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 -q \
      --json /tmp/r15/tp/llama-3.1-8b-${l%-*}_${l#*-}_$r.json >/dev/null 2>>/tmp/r15/err.txt || echo "FAILED $l $r"
  done
  echo "round $r $((SECONDS-S)) s"
done 
python3 tests/gpu/ab_summary.py /tmp/r15/tp
cp tmp_exp/r15.sh /tmp/r15/
tar czf $OUT/r15.tgz -C /tmp r15
