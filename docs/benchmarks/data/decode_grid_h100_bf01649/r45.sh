#!/usr/bin/env bash
# Device run 45 (1 x H100): D 64 decode with three K/V stages (room for a 4th block an SM, which
# the next kernel's blocks can take) against four, in Llama-3.2-1B steps (LITE_LLAMA_DECODE_STAGES).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r45; mkdir -p $R/ab $R/short
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2 3; do for st in 4 3; do
  for len in 2048 8192 32768; do
    LITE_LLAMA_DECODE_STAGES=$st timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_s${st}_$r.json > /dev/null 2>&1
  done
  echo "round $r s$st $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab_long.txt
BATCHES=1,8,16 timeout 200 bash tests/gpu/ab_env.sh $R/short 2 "LITE_LLAMA_DECODE_STAGES=4" "LITE_LLAMA_DECODE_STAGES=3" "" llama-3.2-1b | tee $R/ab_short.txt
rm -f $R/ab/*_s*_[123].json $R/short/*_[ab]_[12].json
cp tmp_exp/r45.sh $R/; echo "total $((SECONDS-S)) s"
