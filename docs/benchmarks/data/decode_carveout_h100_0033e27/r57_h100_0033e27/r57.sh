#!/usr/bin/env bash
# Device run 57 (1 x H100) at 0033e27: CudaTuning::decode_max_carveout. Decode kernel tests,
# attention-bench --quick (copy bandwidth), --decode cells with the carveout on / off alternated,
# model steps (LITE_LLAMA_DECODE_MAX_CARVEOUT=0 against the default) at prompt 128 and long prompts.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r57; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 120 build-gpu/bin/test_cuda_kernels --gtest_filter='*Decode*:*Graph*' > $R/tests.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests.txt | head -3 | tr '\n' ' ')"
B=build-gpu/bin/attention-bench
timeout 120 $B --quick > $R/attention_bench_quick.jsonl 2>&1; grep -E '"copy"|decode_pdl' $R/attention_bench_quick.jsonl
for r in 1 2; do for m in 0 1; do
  for c in "64 1 8192 4" "64 1 16384 4" "64 1 32768 4" "128 1 8192 3" "128 1 16384 3" "128 1 32768 3" "64 4 8192 4" "128 4 8192 3" "64 16 8192 3"; do
    set -- $c; timeout 30 $B --decode $1 $2 $3 0 $4 1 $m
  done
done; done | tee $R/kernel_cells.txt
echo "kernel $((SECONDS-S)) s"
BATCHES=1,8,64 timeout 150 bash tests/gpu/ab_env.sh $R/ab_short 1 "LITE_LLAMA_DECODE_MAX_CARVEOUT=0" "" "" > $R/ab_short.txt 2>&1
echo "short rc $? $((SECONDS-S)) s"; cat $R/ab_short.txt | tail -8
M=tests/gpu/configs
for r in 1 2; do for m in 0 1; do
  for len in 8192 32768; do
    LITE_LLAMA_DECODE_MAX_CARVEOUT=$m timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_c${m}_$r.json > /dev/null 2>&1
  done
  LITE_LLAMA_DECODE_MAX_CARVEOUT=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
      --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16584 -q --json $R/ab/q4b-16384_c${m}_$r.json > /dev/null 2>&1
  echo "round $r carveout $m $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab_long.txt
rm -f $R/ab/*_c[01]_[12].json $R/ab_short/*_[ab]_1.json
cp tmp_exp/r57.sh $R/; echo "total $((SECONDS-S)) s"
