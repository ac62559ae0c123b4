#!/usr/bin/env bash
# Device run 33 (1 x H100): decode attention with the softmax over rows 0-7 only where a block's
# query heads fit 8 (G <= 8) and the warps' combine in padded float2 rows (LL_EXP_DECODE=3,
# experiment flag) against the current kernel (0): kernel tests both ways, attention-bench decode,
# timeline, model steps at 8k / 32k / 16k and short prompts, alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
q() { nvidia-smi --query-gpu=index,name,temperature.gpu,power.draw,clocks.sm,clocks_throttle_reasons.active --format=csv,noheader; }
q
if nvidia-smi --query-gpu=temperature.gpu,name --format=csv,noheader | head -1 | awk -F', ' '$1>55 || $2 !~ /H100/{b=1} END{exit !b}'; then echo "hot or not H100: skip"; exit 0; fi
R=/tmp/r33; mkdir -p $R/ab $R/short
(CUDAFLAGS=-DLITE_LLAMA_DECODE_TIMELINE CXXFLAGS=-DLITE_LLAMA_DECODE_TIMELINE BUILD_DIR=/tmp/tlb bash tests/gpu/build_gpu.sh attention-bench > $R/build_tl.txt 2>&1; echo "tl build rc $?" >> $R/build_tl.txt) &
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; }
wait
tail -2 $R/build_tl.txt
echo "build $((SECONDS-S)) s"
for e in 0 3; do
  LL_EXP_DECODE=$e timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*Attention*:*Decode*:*Graph*' > $R/tests_$e.txt 2>&1; echo "tests exp $e rc $?"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/tests_$e.txt | head -10
done
for rep in 1 2; do for e in 0 3; do
  for c in "64 1 8192" "64 1 16384" "64 1 32768" "64 4 8192" "128 1 8192" "128 1 16384" "128 1 32768" "64 16 8192"; do
    set -- $c
    st=$( [ $1 -eq 64 ] && echo 4 || echo 3 )
    for p in 0 1; do
      LL_EXP_DECODE=$e timeout 60 build-gpu/bin/attention-bench --decode $1 $2 $3 0 $st $p | sed "s/^/exp $e rep $rep: /" >> $R/decode.txt 2>&1
    done
  done
done; done
cat $R/decode.txt
for e in 0 3; do LL_EXP_DECODE=$e timeout 60 /tmp/tlb/bin/attention-bench --timeline 64 1 8192 0 > $R/tl_D64_B1_C8192_P0_e$e.txt 2>&1; done
echo "kernels $((SECONDS-S)) s"; q
M=tests/gpu/configs
for rep in 1 2; do
  for e in 0 3; do
    for c in "llama-3.2-1b 8192" "llama-3.2-1b 32768" "qwen3-4b 16384"; do
      set -- $c
      LL_EXP_DECODE=$e timeout 120 build-gpu/bin/lite-llama bench -m $M/$1.json --load-format dummy --batch 1 \
        --prompt-len $2 --gen-len 128 --runs 2 --warmup 1 -c $(( $2 + 200 )) --max-batched-tokens 32768 -q \
        --json $R/ab/$1-$2_e${e}_$rep.json > /dev/null 2>> $R/err.txt || echo "FAILED $c $e"
    done
  done
  echo "round $rep $((SECONDS-S)) s"; q
done
python3 tests/gpu/ab_summary.py $R/ab > $R/ab_summary.txt 2>&1; cat $R/ab_summary.txt
BATCHES=1,8,64 bash tests/gpu/ab_env.sh $R/short 2 "LL_EXP_DECODE=0" "LL_EXP_DECODE=3" "" llama-3.2-1b qwen3-4b > $R/short.txt 2>&1; cat $R/short.txt
cp tmp_exp/r33.sh $R/; git diff > $R/exp.diff
tar czf $OUT/r33.tgz -C /tmp r33
echo "total $((SECONDS-S)) s"
