#!/usr/bin/env bash
# Device run 36 (1 x H100): decode attention requests only tile 0 before the queries, the other
# tiles of the ring after their load (LL_EXP_QFIRST=1, experiment flag) against all S-1 tiles
# first (0): kernel tests both ways, attention-bench decode, model steps (long and short prompts),
# alternated; in-step timeline with the new order.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
q() { nvidia-smi --query-gpu=index,name,temperature.gpu,power.draw,clocks.sm,clocks_throttle_reasons.active --format=csv,noheader; }
q
if nvidia-smi --query-gpu=temperature.gpu,name --format=csv,noheader | head -1 | awk -F', ' '$1>55 || $2 !~ /H100/{b=1} END{exit !b}'; then echo "hot or not H100: skip"; exit 0; fi
R=/tmp/r36; mkdir -p $R/ab $R/short
(CMAKE_FLAGS=-DLITE_LLAMA_DECODE_TIMELINE=ON BUILD_DIR=/tmp/tlb bash tests/gpu/build_gpu.sh lite-llama attention-bench > $R/build_tl.txt 2>&1; echo "tl build rc $?" >> $R/build_tl.txt) &
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; }
wait
tail -1 $R/build_tl.txt
echo "build $((SECONDS-S)) s"
for e in 0 1; do
  LL_EXP_QFIRST=$e timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*Attention*:*Decode*:*Graph*' > $R/tests_$e.txt 2>&1; echo "tests qfirst $e rc $?"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/tests_$e.txt | head -10
done
for rep in 1 2; do for e in 0 1; do
  for c in "64 1 8192" "64 1 16384" "64 1 32768" "64 4 8192" "128 1 8192" "128 1 16384" "128 1 32768" "64 16 8192"; do
    set -- $c
    st=$( [ $1 -eq 64 ] && echo 4 || echo 3 )
    for p in 0 1; do
      LL_EXP_QFIRST=$e timeout 60 build-gpu/bin/attention-bench --decode $1 $2 $3 0 $st $p | sed "s/^/qfirst $e rep $rep: /" >> $R/decode.txt 2>&1
    done
  done
done; done
sort -s -k6,6n -k8,8n -k10,10n -k16,16n -k2,2n $R/decode.txt | cut -c1-140
echo "kernels $((SECONDS-S)) s"; q
M=tests/gpu/configs
for rep in 1 2; do
  for e in 0 1; do
    for c in "llama-3.2-1b 8192" "llama-3.2-1b 32768" "qwen3-4b 16384"; do
      set -- $c
      LL_EXP_QFIRST=$e timeout 120 build-gpu/bin/lite-llama bench -m $M/$1.json --load-format dummy --batch 1 \
        --prompt-len $2 --gen-len 128 --runs 2 --warmup 1 -c $(( $2 + 200 )) --max-batched-tokens 32768 -q \
        --json $R/ab/$1-$2_q${e}_$rep.json > /dev/null 2>> $R/err.txt || echo "FAILED $c $e"
    done
  done
  echo "round $rep $((SECONDS-S)) s"; q
done
python3 tests/gpu/ab_summary.py $R/ab > $R/ab_summary.txt 2>&1; cat $R/ab_summary.txt
BATCHES=1,8,64 bash tests/gpu/ab_env.sh $R/short 2 "LL_EXP_QFIRST=0" "LL_EXP_QFIRST=1" "" llama-3.2-1b qwen3-4b > $R/short.txt 2>&1; cat $R/short.txt
for e in 0 1; do
  LL_EXP_QFIRST=$e LITE_LLAMA_DECODE_TIMELINE_OUT=$R/tl_step_llama8k_q$e.txt timeout 120 /tmp/tlb/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len 8192 --gen-len 16 --runs 1 --warmup 0 -c 8392 --max-batched-tokens 32768 -q > /dev/null 2>&1
  python3 tools/kernel_bench/decode_timeline.py $R/tl_step_llama8k_q$e.txt | grep -E "^median"
  LL_EXP_QFIRST=$e timeout 60 /tmp/tlb/bin/attention-bench --timeline 64 1 8192 1 > $R/tl_D64_B1_C8192_P1_q$e.txt 2>&1
  python3 tools/kernel_bench/decode_timeline.py $R/tl_D64_B1_C8192_P1_q$e.txt | grep -E "^median"
done
q
cp tmp_exp/r36.sh $R/; git diff > $R/exp.diff
tar czf $OUT/r36.tgz -C /tmp r36
echo "total $((SECONDS-S)) s"
