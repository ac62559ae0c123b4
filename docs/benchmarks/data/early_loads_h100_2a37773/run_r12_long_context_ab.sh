#!/usr/bin/env bash
# Device run 12 (warm after r10, GPU 0 of the x2 H100 machine): long-context batch-1 decode, base vs new.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
mkdir -p /tmp/lc
for r in 1 2; do
  for w in base new; do
    bin=build-gpu/bin/lite-llama; [ $w = base ] && bin=build-base/bin/lite-llama
    CUDA_VISIBLE_DEVICES=0 timeout 90 $bin bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1 --prompt-len 32768 \
      --gen-len 128 --runs 2 --warmup 1 -c 32900 --max-batched-tokens 32768 --json /tmp/lc/llama-3.2-1b-32k_${w}_$r.json >/dev/null 2>>/tmp/lc/err.txt || echo "FAILED l $w"
    CUDA_VISIBLE_DEVICES=0 timeout 90 $bin bench -q -m tests/gpu/configs/qwen3-4b.json --load-format dummy --batch 1 --prompt-len 16384 \
      --gen-len 128 --runs 2 --warmup 1 -c 16500 --max-batched-tokens 16384 --json /tmp/lc/qwen3-4b-16k_${w}_$r.json >/dev/null 2>>/tmp/lc/err.txt || echo "FAILED q $w"
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py /tmp/lc
cp tmp_exp/r12.sh /tmp/lc/
tar czf $OUT/lc.tgz -C /tmp lc
