#!/usr/bin/env bash
# Device run 27 (2 x H100 wanted): the QKV GEMV with the RoPE + KV write in its epilogue
# (CudaTuning::qkv_rope_gemv) against LITE_LLAMA_QKV_ROPE_GEMV=0 in one binary: kernel tests,
# greedy tokens equal both ways (tp 1 and 2), step time of Llama-3.1-8B tp 1 / 2, Llama-3.2-1B and
# Qwen2.5-3B (QKV bias) tp 1, batch 1 and 8, 3 alternated rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
q() { nvidia-smi --query-gpu=index,name,temperature.gpu,power.draw,clocks.sm,clocks_throttle_reasons.active --format=csv,noheader; }
q
if nvidia-smi --query-gpu=temperature.gpu,name --format=csv,noheader | awk -F', ' '$1>55 || $2 !~ /H100/{b=1} END{exit !b}'; then echo "hot or not H100: skip"; exit 0; fi
mkdir -p /tmp/r27/ab
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > /tmp/r27/build.txt 2>&1 || { tail -30 /tmp/r27/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
export NCCL_NVLS_ENABLE=0
timeout 300 build-gpu/bin/test_cuda_kernels --gtest_filter='CudaQkvRopeGemv*:CudaRope*:CudaLinear*:CudaTensorParallel*:CudaLongStep*Rope*' > /tmp/r27/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" /tmp/r27/tests.txt | head -20
echo "tests $((SECONDS-S)) s"
L=$(tests/gpu/dummy_llama.sh)
for tp in 1 2; do for e in 0 1; do
  LITE_LLAMA_QKV_ROPE_GEMV=$e timeout 60 build-gpu/bin/lite-llama generate -m $L --load-format dummy --dtype bf16 --tp $tp -n 40 --temperature 0 --json \
    -p "The capital of France is" -p "1 2 3" > /tmp/r27/gen_${tp}_$e.json 2>/tmp/r27/gen_${tp}_$e.err || echo "gen FAILED $tp $e"
done; done
python3 -c "
import json
f=lambda p:[r['token_ids'] for r in json.load(open(p))['results']]
for tp in (1,2): print('tp', tp, 'greedy fused == apart:', f(f'/tmp/r27/gen_{tp}_1.json')==f(f'/tmp/r27/gen_{tp}_0.json'))"
for r in 1 2 3; do
  for c in 8b:2:off 8b:2:on 8b:1:off 8b:1:on 1b:1:off 1b:1:on q25:1:off q25:1:on; do
    IFS=: read m tp side <<< "$c"
    case $m in 8b) cfg=llama-3.1-8b; name=llama-3.1-8b-tp$tp;; 1b) cfg=llama-3.2-1b; name=llama-3.2-1b;; q25) cfg=qwen2.5-3b; name=qwen2.5-3b;; esac
    e=1; [ $side = off ] && e=0
    LITE_LLAMA_QKV_ROPE_GEMV=$e timeout 90 build-gpu/bin/lite-llama bench --load-format dummy -m tests/gpu/configs/$cfg.json \
      --tp $tp --dtype bf16 --batch 1,8 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 -q \
      --json /tmp/r27/ab/${name}_${side}_$r.json >/dev/null 2>>/tmp/r27/err.txt || echo "FAILED $c $r"
  done
  echo "round $r $((SECONDS-S)) s"; q
done
python3 tests/gpu/ab_summary.py /tmp/r27/ab
cp tmp_exp/r27.sh /tmp/r27/
tar czf $OUT/r27.tgz -C /tmp r27
