#!/usr/bin/env bash
# Device run 28 (warm 2 x H100 after r27): LITE_LLAMA_QKV_ROPE_GEMV=0 / 1 on Llama-3.1-8B tp 1 / tp 2, batch 1, 6 alternated rounds
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
export NCCL_NVLS_ENABLE=0
mkdir -p /tmp/r28/ab
for r in 1 2 3 4 5 6; do
  for c in 2:off 2:on 1:off 1:on; do
    IFS=: read tp side <<< "$c"
    e=1; [ $side = off ] && e=0
    LITE_LLAMA_QKV_ROPE_GEMV=$e timeout 60 build-gpu/bin/lite-llama bench --load-format dummy -m tests/gpu/configs/llama-3.1-8b.json \
      --tp $tp --dtype bf16 --batch 1 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 -q \
      --json /tmp/r28/ab/llama-3.1-8b-tp${tp}_${side}_$r.json >/dev/null 2>>/tmp/r28/err.txt || echo "FAILED $c $r"
  done
  echo "round $r $((SECONDS-S)) s"
done
nvidia-smi --query-gpu=index,temperature.gpu,clocks.sm,clocks_throttle_reasons.active --format=csv,noheader
python3 tests/gpu/ab_summary.py /tmp/r28/ab
cp tmp_exp/r28.sh /tmp/r28/
tar czf $OUT/r28.tgz -C /tmp r28
