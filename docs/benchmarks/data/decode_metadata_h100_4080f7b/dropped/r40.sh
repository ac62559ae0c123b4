#!/usr/bin/env bash
# Device run 40 (1 x H100): r39 cut down (r39 ran past the 10-minute limit): LITE_LLAMA_EXP_DECODE
# bits 1 = queries before any K/V tile, 2 = fused merge. Decode tests, attention-bench, steps.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r40; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
for x in 3; do
  LITE_LLAMA_EXP_DECODE=$x timeout 100 build-gpu/bin/test_cuda_kernels --gtest_filter='*Decode*:*Graph*' > $R/tests_$x.txt 2>&1
  echo "tests x$x rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests_$x.txt | head -5 | tr '\n' ' ')"
done
echo "tests $((SECONDS-S)) s"
for c in "64 1 8192 4" "64 1 32768 4" "128 1 16384 3" "64 4 8192 4"; do set -- $c
  for x in 0 1 2 3; do echo "x$x $(LITE_LLAMA_EXP_DECODE=$x timeout 20 build-gpu/bin/attention-bench --decode $1 $2 $3 0 $4 1)"; done; done | tee $R/decode.txt
echo "bench $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2; do for x in 0 3; do
  for len in 8192 32768; do
    LITE_LLAMA_EXP_DECODE=$x timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_x${x}_$r.json > /dev/null 2>&1
  done
  LITE_LLAMA_EXP_DECODE=$x timeout 40 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
    --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16600 -q --json $R/ab/q4b-16384_x${x}_$r.json > /dev/null 2>&1
  echo "round $r x$x $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab_long.txt
cp tmp_exp/r40.sh $R/; echo "total $((SECONDS-S)) s"
