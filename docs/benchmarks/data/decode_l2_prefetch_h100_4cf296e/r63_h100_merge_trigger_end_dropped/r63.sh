#!/usr/bin/env bash
# Device run 63 (1 x H100): EXPERIMENT LL_MERGE_TRIGGER_END=1, the decode merge lets its dependents
# (the output projection in a step) launch at its end, not at its start. Decode tests, kernel cells,
# model steps (batch 1 long prompts; prompt 128 batch 1 / 8) alternated, 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r63; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
LL_MERGE_TRIGGER_END=1 timeout 60 build-gpu/bin/test_cuda_kernels --gtest_filter='*Decode*:*Graph*' > $R/tests_e1.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests_e1.txt | head -3 | tr '\n' ' ')"
B=build-gpu/bin/attention-bench
for r in 1 2; do for m in 0 1; do
  for c in "64 1 8192 4" "64 1 32768 4" "128 1 16384 3"; do
    set -- $c; echo -n "end $m: "; LL_MERGE_TRIGGER_END=$m timeout 30 $B --decode $1 $2 $3 0 $4 1 1
  done
done; done | tee $R/kernel_cells.txt
M=tests/gpu/configs
for r in 1 2; do for m in 0 1; do
  for len in 2048 8192 32768; do
    LL_MERGE_TRIGGER_END=$m timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_e${m}_$r.json > /dev/null 2>&1
  done
  LL_MERGE_TRIGGER_END=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
      --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16584 -q --json $R/ab/q4b-16384_e${m}_$r.json > /dev/null 2>&1
  LL_MERGE_TRIGGER_END=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1,8 \
      --prompt-len 128 --gen-len 128 --runs 2 -q --json $R/ab/l1b-128_e${m}_$r.json > /dev/null 2>&1
  LL_MERGE_TRIGGER_END=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1,8 \
      --prompt-len 128 --gen-len 128 --runs 2 -q --json $R/ab/q4b-128_e${m}_$r.json > /dev/null 2>&1
  echo "round $r end $m $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab.txt
rm -f $R/ab/*_e[01]_[12].json
cp tmp_exp/r63.sh $R/; echo "total $((SECONDS-S)) s"
