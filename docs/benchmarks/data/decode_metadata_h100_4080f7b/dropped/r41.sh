#!/usr/bin/env bash
# Device run 41 (1 x H100): in model steps, queries requested before any K/V tile
# (LITE_LLAMA_EXP_DECODE=1) against tile 0 first (0); long prompts batch 1 and 128-token prompts.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r41; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2; do for x in 0 1; do
  for len in 2048 8192 32768; do
    LITE_LLAMA_EXP_DECODE=$x timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_x${x}_$r.json > /dev/null 2>&1
  done
  LITE_LLAMA_EXP_DECODE=$x timeout 40 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
    --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16600 -q --json $R/ab/q4b-16384_x${x}_$r.json > /dev/null 2>&1
  echo "round $r x$x $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab > $R/ab_long.txt; cat $R/ab_long.txt
bash tests/gpu/ab_env.sh $R/short 2 "LITE_LLAMA_EXP_DECODE=0" "LITE_LLAMA_EXP_DECODE=1" "" > $R/ab_short.txt 2>&1; tail -8 $R/ab_short.txt
rm -f $R/short/*_[ab]_*.json $R/ab/*_x*.json
cp tmp_exp/r41.sh $R/; echo "total $((SECONDS-S)) s"
