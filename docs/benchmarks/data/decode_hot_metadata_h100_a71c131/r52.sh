#!/usr/bin/env bash
# Device run 52 (1 x H100): is decode attention's prologue (step lengths, then slot ids: two
# dependent trips) slow because those are cold? (1) attention-bench --decode with every call
# reading one shared copy of the lengths and slot table (1) and the queries (2), against one per
# call (0), alternated. (2) Steps with the slot table read through persisting L2 lines
# (LITE_LLAMA_L2_HOT_TABLE=1, 8 MiB set aside) against without, alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r52; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama attention-bench > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
for r in 1 2; do for sh in 0 1 2; do
  for c in "64 1 8192 4" "64 1 16384 4" "64 1 32768 4" "128 1 8192 3" "128 1 16384 3" "64 4 8192 4"; do
    set -- $c; timeout 30 $B --decode $1 $2 $3 0 $4 1 $sh
  done
done; done | tee $R/kernel_shared.txt
echo "kernel $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2 3; do for hot in 0 1; do
  for len in 2048 8192 32768; do
    LITE_LLAMA_L2_HOT_TABLE=$hot timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_h${hot}_$r.json > /dev/null 2>&1
  done
  LITE_LLAMA_L2_HOT_TABLE=$hot timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
      --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16584 -q --json $R/ab/q4b-16384_h${hot}_$r.json > /dev/null 2>&1
  echo "round $r hot $hot $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab_long.txt
rm -f $R/ab/*_h[01]_[123].json
cp tmp_exp/r52.sh $R/; echo "total $((SECONDS-S)) s"
