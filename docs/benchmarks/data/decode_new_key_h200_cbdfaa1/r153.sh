#!/usr/bin/env bash
# Device run 153 (H200): r152's two builds (still on the machine), steps alternated 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r153; mkdir -p $R
mkdir -p $R/e2e
for r in 1 2; do
  for which in base new; do
    bin=build-gpu/bin/lite-llama; [ $which = base ] && bin=build-base/bin/lite-llama
    for len in 8192 32768; do
      timeout 100 $bin bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1 --prompt-len $len \
        --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c $((len + 128)) --json $R/e2e/l1b${len}_${which}_$r.json > /dev/null 2>&1
    done
    timeout 100 $bin bench -q -m tests/gpu/configs/qwen3-4b.json --load-format dummy --batch 1 --prompt-len 16384 \
        --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c 16512 --json $R/e2e/q4b16k_${which}_$r.json > /dev/null 2>&1
  done
  echo "e2e round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py $R/e2e | sort
(cd $R && tar czf e2e.tgz e2e && rm -rf e2e)
cp tmp_exp/r153.sh $R/
echo "total $((SECONDS-S)) s"
