#!/usr/bin/env bash
# Device run 29 (2 x H100 wanted): the defaults after qkv_rope_gemv became -1 (on with tp only):
# kernel tests, tp 2 greedy tokens against LITE_LLAMA_QKV_ROPE_GEMV=0, tp 1 / tp 2 Llama-3.1-8B
# batch 1 and 8, 4 alternated rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
q() { nvidia-smi --query-gpu=index,name,temperature.gpu,power.draw,clocks.sm,clocks_throttle_reasons.active --format=csv,noheader; }
q
if nvidia-smi --query-gpu=temperature.gpu,name --format=csv,noheader | awk -F', ' '$1>55 || $2 !~ /H100/{b=1} END{exit !b}'; then echo "hot or not H100: skip"; exit 0; fi
git log --oneline -1 2>/dev/null
mkdir -p /tmp/r29/tp
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > /tmp/r29/build.txt 2>&1 || { tail -30 /tmp/r29/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
export NCCL_NVLS_ENABLE=0
timeout 300 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaQkvRopeGemv*:*CudaRope*:*CudaLinear*:*CudaTensorParallel*:*CudaLongStep*Rope*' > /tmp/r29/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" /tmp/r29/tests.txt | head -20
L=$(tests/gpu/dummy_llama.sh)
for e in 0 -1; do
  LITE_LLAMA_QKV_ROPE_GEMV=$e timeout 60 build-gpu/bin/lite-llama generate -m $L --load-format dummy --dtype bf16 --tp 2 -n 40 --temperature 0 --json \
    -p "The capital of France is" -p "1 2 3" > /tmp/r29/gen_$e.json 2>/tmp/r29/gen_$e.err || echo "gen FAILED $e"
done
python3 -c "
import json
f=lambda p:[r['token_ids'] for r in json.load(open(p))['results']]
print('tp 2 greedy default == QKV_ROPE_GEMV=0:', f('/tmp/r29/gen_-1.json')==f('/tmp/r29/gen_0.json'))"
for r in 1 2 3 4; do
  for tp in 1 2; do
    timeout 90 build-gpu/bin/lite-llama bench --load-format dummy -m tests/gpu/configs/llama-3.1-8b.json \
      --tp $tp --dtype bf16 --batch 1,8 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 -q \
      --json /tmp/r29/tp/llama-3.1-8b_tp${tp}_$r.json >/dev/null 2>>/tmp/r29/err.txt || echo "FAILED $tp $r"
  done
  echo "round $r $((SECONDS-S)) s"; q
done
python3 tests/gpu/ab_summary.py /tmp/r29/tp
cp tmp_exp/r29.sh /tmp/r29/
tar czf $OUT/r29.tgz -C /tmp r29
