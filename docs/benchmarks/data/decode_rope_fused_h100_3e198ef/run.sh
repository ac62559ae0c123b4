#!/usr/bin/env bash
# decode-rope fusion: tests, greedy equality, A/B, then the long-context regeneration.
set -u
O=$OUT/dr; mkdir -p $O
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $O/build.txt 2>&1 || { cat $O/build.txt; exit 1; }
el build
nvidia-smi --query-gpu=name --format=csv,noheader > $O/gpu.txt
build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaAttention*:*CudaRope*:*Graph*:*CudaLinear*' > $O/tests.txt 2>&1; el "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $O/tests.txt | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is" $O/tests.txt | head -20
L=$(tests/gpu/dummy_llama.sh)
for v in 0 1; do
  LITE_LLAMA_DECODE_ROPE=$v build-gpu/bin/lite-llama generate -m $L --load-format dummy --dtype bf16 -n 48 --temperature 0 --json -p "The capital of France is" > $O/gen1_$v.json 2>&1
  LITE_LLAMA_DECODE_ROPE=$v build-gpu/bin/lite-llama generate -m $L --load-format dummy --dtype bf16 -n 48 --temperature 0 --json -p "The capital of France is" -p "Once upon a time, in a land far away" -p "1 2 3" > $O/gen3_$v.json 2>&1
done
python3 - $O <<'PY'
import json,sys
O=sys.argv[1]
def ids(p):
    j=json.load(open(p)); return [r['token_ids'] for r in j['results']] if 'results' in j else [j['token_ids']]
for n in ('gen1','gen3'):
    a,b=ids(f'{O}/{n}_0.json'),ids(f'{O}/{n}_1.json'); print(n,'tokens equal:',a==b,[len(x) for x in a])
PY
el greedy
for rep in 1 2; do for v in 0 1; do
  LITE_LLAMA_DECODE_ROPE=$v build-gpu/bin/lite-llama bench -m tests/gpu/configs/qwen3-4b.json --load-format dummy --batch 1 --max-batched-tokens 16384 --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16512 --json $O/qwen16k_${v}_$rep.json > $O/qwen16k_${v}_$rep.txt 2>&1
  el "qwen3-4b 16k v$v rep $rep: $(grep -E '^1 ' $O/qwen16k_${v}_$rep.txt)"
  LITE_LLAMA_DECODE_ROPE=$v build-gpu/bin/lite-llama bench -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1 --max-batched-tokens 32768 --prompt-len 32768 --gen-len 128 --runs 2 --warmup 1 -c 32900 --json $O/llama32k_${v}_$rep.json > $O/llama32k_${v}_$rep.txt 2>&1
  el "llama 32k v$v rep $rep: $(grep -E '^1 ' $O/llama32k_${v}_$rep.txt)"
done; done
BATCHES=1,8,64 timeout 170 bash tests/gpu/ab_env.sh $O/ab_short 2 "LITE_LLAMA_DECODE_ROPE=0" "" "" llama-3.2-1b qwen3-4b > $O/ab_short.txt 2>&1; el "ab short rc=$?"; tail -20 $O/ab_short.txt
cd $OUT && tar czf dr.tgz dr && rm -rf dr
