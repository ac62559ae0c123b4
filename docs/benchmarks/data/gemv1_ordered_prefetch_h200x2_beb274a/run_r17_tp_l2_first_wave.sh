#!/usr/bin/env bash
# Device run 17 (2 GPUs): gemv1_ordered_prefetch (on at tp > 1) and the first-wave-only
# gemv1_l2_prefetch_groups. Build, greedy tokens at tp 2 with the settings (must be equal: same sums),
# Llama-3.1-8B tp 1 / tp 2 batch 1 and 8 alternated, then one-GPU batch 1 / 8 with L2 prefetch.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/r17/tp
bash tests/gpu/build_gpu.sh lite-llama > /tmp/r17/build.txt 2>&1 || { tail -30 /tmp/r17/build.txt; grep -E "error" build-gpu.build.log | head; exit 1; }
echo "build $((SECONDS-S)) s"
export NCCL_NVLS_ENABLE=0
L=$(tests/gpu/dummy_llama.sh)
for v in off:LITE_LLAMA_GEMV1_ORDERED_PREFETCH=0 def: l2:LITE_LLAMA_GEMV1_L2_PREFETCH=2; do
  IFS=: read l e <<< "$v"
  env $e timeout 60 build-gpu/bin/lite-llama generate -m $L --load-format dummy --dtype bf16 --tp 2 -n 40 --temperature 0 --json \
    -p "The capital of France is" -p "1 2 3" > /tmp/r17/gen_$l.json 2>/tmp/r17/gen_$l.err || echo "gen FAILED $l"
done
python3 -c "
import json
f=lambda p:[r['token_ids'] for r in json.load(open(p))['results']]
a=f('/tmp/r17/gen_off.json'); print('tp 2 greedy, ordered == off:', f('/tmp/r17/gen_def.json')==a, ' L2 == off:', f('/tmp/r17/gen_l2.json')==a, [len(x) for x in a])"
echo "gen $((SECONDS-S)) s"
for r in 1 2 3; do
  for c in tp1-def:1: tp1-l2g2:1:LITE_LLAMA_GEMV1_L2_PREFETCH=2 tp2-off:2:LITE_LLAMA_GEMV1_ORDERED_PREFETCH=0 tp2-def:2: \
           tp2-l2g2:2:LITE_LLAMA_GEMV1_L2_PREFETCH=2; do
    IFS=: read l tp e <<< "$c"
    env $e timeout 90 build-gpu/bin/lite-llama bench --load-format dummy -m tests/gpu/configs/llama-3.1-8b.json \
      --tp $tp --dtype bf16 --batch 1,8 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 -q \
      --json /tmp/r17/tp/llama-3.1-8b-${l%-*}_${l#*-}_$r.json >/dev/null 2>>/tmp/r17/err.txt || echo "FAILED $l $r"
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py /tmp/r17/tp
cp tmp_exp/r17.sh /tmp/r17/
tar czf $OUT/r17.tgz -C /tmp r17
export CUDA_VISIBLE_DEVICES=0
BATCHES=1,8 bash tests/gpu/ab_env.sh /tmp/r17/short 2 "" "LITE_LLAMA_GEMV1_L2_PREFETCH=2" "" llama-3.2-1b qwen3-4b
echo "short $((SECONDS-S)) s"
tar czf $OUT/r17.tgz -C /tmp r17
