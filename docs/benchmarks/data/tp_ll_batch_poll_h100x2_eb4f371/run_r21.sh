#!/usr/bin/env bash
# Device run 21 (2 GPUs): CudaTuning::peer_ll_batch_poll. Build, tensor-parallel kernel tests (both
# poll modes), greedy tp 2 tokens with it on / off, Llama-3.1-8B tp 1 and tp 2 (off / on) batch 1
# and 8, 3 alternated rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/r21/tp
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > /tmp/r21/build.txt 2>&1 || { tail -30 /tmp/r21/build.txt; grep -E "error" build-gpu.build.log | head; exit 1; }
echo "build $((SECONDS-S)) s"
export NCCL_NVLS_ENABLE=0
timeout 120 build-gpu/bin/test_cuda_kernels --gtest_filter='CudaTensorParallel*' > /tmp/r21/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" /tmp/r21/tests.txt | tail -6
L=$(tests/gpu/dummy_llama.sh)
for v in on: off:LITE_LLAMA_PEER_LL_BATCH_POLL=0; do
  IFS=: read l e <<< "$v"
  env $e timeout 60 build-gpu/bin/lite-llama generate -m $L --load-format dummy --dtype bf16 --tp 2 -n 40 --temperature 0 --json \
    -p "The capital of France is" -p "1 2 3" > /tmp/r21/gen_$l.json 2>/tmp/r21/gen_$l.err || echo "gen FAILED $l"
done
python3 -c "
import json
f=lambda p:[r['token_ids'] for r in json.load(open(p))['results']]
print('tp 2 greedy, batch poll on == off:', f('/tmp/r21/gen_on.json')==f('/tmp/r21/gen_off.json'))"
echo "tests+gen $((SECONDS-S)) s"
for r in 1 2 3; do
  for c in tp1-def:1: tp2-off:2:LITE_LLAMA_PEER_LL_BATCH_POLL=0 tp2-def:2:; do
    IFS=: read l tp e <<< "$c"
    env $e timeout 90 build-gpu/bin/lite-llama bench --load-format dummy -m tests/gpu/configs/llama-3.1-8b.json \
      --tp $tp --dtype bf16 --batch 1,8 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 -q \
      --json /tmp/r21/tp/llama-3.1-8b-${l%-*}_${l#*-}_$r.json >/dev/null 2>>/tmp/r21/err.txt || echo "FAILED $l $r"
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py /tmp/r21/tp
cp tmp_exp/r21.sh /tmp/r21/
tar czf $OUT/r21.tgz -C /tmp r21
