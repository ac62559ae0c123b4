#!/usr/bin/env bash
# Device run 16 (2 GPUs): gemv1_ordered_prefetch on by default at tp > 1, and gemv1_l2_prefetch_groups
# (LITE_LLAMA_GEMV1_L2_PREFETCH). Build, GEMV + TP kernel tests, greedy tp 2 vs tp 1 tokens,
# Llama-3.1-8B tp 1 / tp 2 batch 1 and 8 with the settings alternated run by run, one-GPU short A/B.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/r16/tp
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > /tmp/r16/build.txt 2>&1 || { tail -30 /tmp/r16/build.txt; grep -E "error" build-gpu.build.log | head; exit 1; }
echo "build $((SECONDS-S)) s"
export NCCL_NVLS_ENABLE=0
timeout 150 build-gpu/bin/test_cuda_kernels --gtest_filter='*Gemv*:*Linear*:*TensorParallel*' > /tmp/r16/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" /tmp/r16/tests.txt | tail -8
L=$(tests/gpu/dummy_llama.sh)
for v in tp1:1: tp2:2: tp2l2:2:LITE_LLAMA_GEMV1_L2_PREFETCH=2; do
  IFS=: read l tp e <<< "$v"
  env $e timeout 60 build-gpu/bin/lite-llama generate -m $L --load-format dummy --dtype bf16 --tp $tp -n 40 --temperature 0 --json \
    -p "The capital of France is" -p "1 2 3" > /tmp/r16/gen_$l.json 2>/tmp/r16/gen_$l.err || echo "gen FAILED $l"
done
python3 -c "
import json
f=lambda p:[r['token_ids'] for r in json.load(open(p))['results']]
a=f('/tmp/r16/gen_tp1.json'); print('greedy tp2 == tp1:', f('/tmp/r16/gen_tp2.json')==a, ' tp2 L2 == tp1:', f('/tmp/r16/gen_tp2l2.json')==a)"
echo "tests+gen $((SECONDS-S)) s"
for r in 1 2 3; do
  for c in tp1-def:1: tp1-l2g2:1:LITE_LLAMA_GEMV1_L2_PREFETCH=2 tp2-off:2:LITE_LLAMA_GEMV1_ORDERED_PREFETCH=0 tp2-def:2: \
           tp2-l2g1:2:LITE_LLAMA_GEMV1_L2_PREFETCH=1 tp2-l2g2:2:LITE_LLAMA_GEMV1_L2_PREFETCH=2; do
    IFS=: read l tp e <<< "$c"
    env $e timeout 90 build-gpu/bin/lite-llama bench --load-format dummy -m tests/gpu/configs/llama-3.1-8b.json \
      --tp $tp --dtype bf16 --batch 1,8 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 -q \
      --json /tmp/r16/tp/llama-3.1-8b-${l%-*}_${l#*-}_$r.json >/dev/null 2>>/tmp/r16/err.txt || echo "FAILED $l $r"
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py /tmp/r16/tp
cp tmp_exp/r16.sh /tmp/r16/
tar czf $OUT/r16.tgz -C /tmp r16
export CUDA_VISIBLE_DEVICES=0
timeout 200 build-gpu/bin/attention-bench > /tmp/r16/attention_bench.jsonl 2>&1; echo "attention-bench rc $? $((SECONDS-S)) s"
grep decode_pdl /tmp/r16/attention_bench.jsonl | grep '"batch": [14],' | head -12
tar czf $OUT/r16.tgz -C /tmp r16
BATCHES=1,8 bash tests/gpu/ab_env.sh /tmp/r16/short 2 "" "LITE_LLAMA_GEMV1_L2_PREFETCH=2" "" llama-3.2-1b qwen3-4b
echo "short $((SECONDS-S)) s"
tar czf $OUT/r16.tgz -C /tmp r16
