#!/usr/bin/env bash
# Device run 138 (H200): with swizzled tiles, D 64 batch-1 decode with three stages (64 splits)
# against four (49), in model steps: LITE_LLAMA_DECODE_STAGES=4 (a) vs 3 (b), one binary, 3 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r138; mkdir -p $R
[ -x build-gpu/bin/lite-llama ] || { bash tests/gpu/device_setup.sh >/dev/null 2>&1; bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1; }
echo "build $((SECONDS-S)) s"
for p in "32768 32900" "8192 8330" "2048 2200"; do
  set -- $p
  BATCHES=1 timeout 170 bash tests/gpu/ab_env.sh $R/p$1 3 "LITE_LLAMA_DECODE_STAGES=4" "LITE_LLAMA_DECODE_STAGES=3" \
    "--prompt-len $1 --gen-len 128 --max-batched-tokens 32768 -c $2" llama-3.2-1b 2>&1 | tail -2
  echo "p$1 $((SECONDS-S)) s"
done
BATCHES=1,2 timeout 150 bash tests/gpu/ab_env.sh $R/p128 3 "LITE_LLAMA_DECODE_STAGES=4" "LITE_LLAMA_DECODE_STAGES=3" "" llama-3.2-1b 2>&1 | tail -4
(cd $R && tar czf runs.tgz p* && rm -rf p*)
cp tmp_exp/r138.sh $R/
echo "total $((SECONDS-S)) s"
