#!/usr/bin/env bash
# Device run 2: MoE (Qwen3-30B-A3B, dummy 16-bit weights) A/B of the GEMV preload, few-step row
# groups and the one-token GEMV loop. usage: r2.sh LOOP_N ROUNDS
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
L=${1:-2}; R=${2:-3}
[ -x build-gpu/bin/lite-llama ] || bash tests/gpu/build_gpu.sh lite-llama > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "ready $((SECONDS-S)) s"
BIN=build-gpu/bin/lite-llama
mkdir -p $OUT/moe
run() {  # label round env...
  local l=$1 r=$2; shift 2
  env "$@" $BIN bench -m tests/gpu/configs/qwen3-30b-a3b.json --load-format dummy --batch 1,64 --max-num-seqs 64 \
    --ctx 1024 --prompt-len 128 --gen-len 128 --runs 2 -q \
    --json $OUT/moe/qwen3-30b-a3b_${l}_${r}.json > /dev/null 2>>$OUT/moe/err.txt || echo "FAILED $l $r"
}
for r in $(seq 1 $R); do
  run base $r
  run pre $r LITE_LLAMA_MOE_GEMV_PRELOAD=1
  run pre-f2 $r LITE_LLAMA_MOE_GEMV_PRELOAD=1 LITE_LLAMA_MOE_GEMV_FEW_ROW_GROUPS=2
  run loop$L $r LITE_LLAMA_GEMV1_LOOP=$L
  run all $r LITE_LLAMA_MOE_GEMV_PRELOAD=1 LITE_LLAMA_MOE_GEMV_FEW_ROW_GROUPS=2 LITE_LLAMA_GEMV1_LOOP=$L
  echo "round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py $OUT/moe
cp tmp_exp/r2.sh $OUT/
