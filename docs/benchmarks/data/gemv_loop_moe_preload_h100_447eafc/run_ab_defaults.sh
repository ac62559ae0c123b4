#!/usr/bin/env bash
# Device run 3 (H100): build, kernel tests with the new defaults, MoE batch-1 A/B (old defaults
# vs new), long-context batch-1 decode A/B (Llama-3.2-1B 32k, Qwen3-4B 16k).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $OUT/gpu.txt; cat $OUT/gpu.txt
build-gpu/bin/attention-bench --quick 2>&1 | head -3 > $OUT/peaks.txt; cat $OUT/peaks.txt
build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaMoe*:*CudaLinear*:*Graph*' > $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED  \]" $OUT/tests.txt | tail -12
echo "tests done $((SECONDS-S)) s"
BIN=build-gpu/bin/lite-llama
OLD="LITE_LLAMA_GEMV1_LOOP=0 LITE_LLAMA_MOE_GEMV_PRELOAD=0 LITE_LLAMA_MOE_GEMV_FEW_ROW_GROUPS=1"
mkdir -p $OUT/moe $OUT/long
for r in 1 2 3; do
  for side in old new; do
    e=""; [ $side = old ] && e="$OLD"
    env $e $BIN bench -m tests/gpu/configs/qwen3-30b-a3b.json --load-format dummy --batch 1 --ctx 1024 \
      --prompt-len 128 --gen-len 128 --runs 2 -q --json $OUT/moe/qwen3-30b-a3b_${side}_$r.json >/dev/null 2>>$OUT/moe/err.txt || echo "FAILED moe $side $r"
  done
done
python3 tests/gpu/ab_summary.py $OUT/moe
echo "moe done $((SECONDS-S)) s"
for r in 1 2; do
  for side in old new; do
    e=""; [ $side = old ] && e="$OLD"
    env $e $BIN bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1 --prompt-len 32768 \
      --gen-len 128 --max-batched-tokens 32768 --runs 2 --warmup 1 -c 32900 --json $OUT/long/llama-3.2-1b-32k_${side}_$r.json >/dev/null 2>>$OUT/long/err.txt || echo "FAILED l $side $r"
    env $e $BIN bench -q -m tests/gpu/configs/qwen3-4b.json --load-format dummy --batch 1 --prompt-len 16384 \
      --gen-len 128 --max-batched-tokens 32768 --runs 2 --warmup 1 -c 16520 --json $OUT/long/qwen3-4b-16k_${side}_$r.json >/dev/null 2>>$OUT/long/err.txt || echo "FAILED q $side $r"
  done
done
python3 tests/gpu/ab_summary.py $OUT/long
echo "long done $((SECONDS-S)) s"
cp tmp_exp/r3.sh $OUT/
cd $OUT && tar czf data.tgz moe long && rm -rf moe long
