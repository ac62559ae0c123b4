#!/usr/bin/env bash
# Device run 26 (warm 2 x H100 after r24): LITE_LLAMA_DECODE_SPLIT_KEYS=64 against the default, tp 1 / tp 2, Llama-3.1-8B
# and tp 1 Llama-3.2-1B, batch 1 and 8, 3 alternated rounds
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
q() { nvidia-smi --query-gpu=index,temperature.gpu,clocks.sm,clocks_throttle_reasons.active --format=csv,noheader; }
q
mkdir -p /tmp/r26/tp
export NCCL_NVLS_ENABLE=0
for r in 1 2 3; do
  for c in tp1-def:1 tp1-sk64:1 tp2-def:2 tp2-sk64:2 1b-def:1 1b-sk64:1; do
    IFS=: read l tp <<< "$c"
    m=tests/gpu/configs/llama-3.1-8b.json; name=llama-3.1-8b-${l%-*}
    [[ $l == 1b* ]] && { m=tests/gpu/configs/llama-3.2-1b.json; name=llama-3.2-1b; }
    e=""; [[ $l == *sk64 ]] && e="LITE_LLAMA_DECODE_SPLIT_KEYS=64"
    env $e timeout 90 build-gpu/bin/lite-llama bench --load-format dummy -m $m \
      --tp $tp --dtype bf16 --batch 1,8 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 -q \
      --json /tmp/r26/tp/${name}_${l#*-}_$r.json >/dev/null 2>>/tmp/r26/err.txt || echo "FAILED $l $r"
  done
  echo "round $r $((SECONDS-S)) s"; q
done
python3 tests/gpu/ab_summary.py /tmp/r26/tp
cp tmp_exp/r26.sh /tmp/r26/
tar czf $OUT/r26.tgz -C /tmp r26
