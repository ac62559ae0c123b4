#!/usr/bin/env bash
# Device run 19 (2 x H100 wanted): the tp 2 / tp 1 goal with gemv1_ordered_prefetch on by default at
# tp > 1: Llama-3.1-8B tp 1, tp 2 with it off, tp 2 default, batch 1 and 8, 3 alternated rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/r19/tp
bash tests/gpu/build_gpu.sh lite-llama > /tmp/r19/build.txt 2>&1 || { tail -30 /tmp/r19/build.txt; grep -E "error" build-gpu.build.log | head; exit 1; }
echo "build $((SECONDS-S)) s"
export NCCL_NVLS_ENABLE=0
for r in 1 2 3; do
  for c in tp1-def:1: tp2-off:2:LITE_LLAMA_GEMV1_ORDERED_PREFETCH=0 tp2-def:2:; do
    IFS=: read l tp e <<< "$c"
    env $e timeout 90 build-gpu/bin/lite-llama bench --load-format dummy -m tests/gpu/configs/llama-3.1-8b.json \
      --tp $tp --dtype bf16 --batch 1,8 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 -q \
      --json /tmp/r19/tp/llama-3.1-8b-${l%-*}_${l#*-}_$r.json >/dev/null 2>>/tmp/r19/err.txt || echo "FAILED $l $r"
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py /tmp/r19/tp
cp tmp_exp/r19.sh /tmp/r19/
tar czf $OUT/r19.tgz -C /tmp r19
