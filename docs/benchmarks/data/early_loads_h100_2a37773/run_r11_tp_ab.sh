#!/usr/bin/env bash
# Device run 11 (2 x H100, after r10): Llama-3.1-8B tp 1 / tp 2, base vs new, batch 1 and 8, alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
export NCCL_NVLS_ENABLE=0
mkdir -p $OUT/tp
for r in 1 2 3; do
  for c in tp1-base:1 tp1-new:1 tp2-base:2 tp2-new:2; do
    IFS=: read l tp <<< "$c"
    bin=build-gpu/bin/lite-llama; [[ $l == *base ]] && bin=build-base/bin/lite-llama
    timeout 90 $bin bench --load-format dummy -m tests/gpu/configs/llama-3.1-8b.json \
      --tp $tp --dtype bf16 --batch 1,8 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 -q \
      --json $OUT/tp/llama-3.1-8b_${l}_$r.json >/dev/null 2>>$OUT/tp/err.txt || echo "FAILED $l $r"
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py $OUT/tp
cp tmp_exp/r11.sh $OUT/
cd $OUT && tar czf tp.tgz tp && rm -rf tp
