#!/usr/bin/env bash
# gate|up SwiGLU epilogue: tests, greedy equality, long-context and batch-1 A/B.
set -u
O=$OUT/gu; mkdir -p $O
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $O/build.txt 2>&1 || { cat $O/build.txt; exit 1; }
el build
git log --oneline -1 > $O/commit.txt; nvidia-smi --query-gpu=name --format=csv,noheader > $O/gpu.txt
build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaLinear*:*Graph*' > $O/tests.txt 2>&1; el "tests rc=$? $(grep -E 'PASSED|FAILED' $O/tests.txt | tr '\n' ' ')"
# Greedy tokens with the epilogue on and off (bit-equal kernels: equal tokens).
L=$(tests/gpu/dummy_llama.sh)
Q=$(mktemp -d)/qwen3-4b; mkdir -p $Q; cp tests/gpu/configs/qwen3-4b.json $Q/config.json; cp models/tokenizers/qwen3/* $Q/
for m in $L $Q; do for v in 0 1; do
  LITE_LLAMA_GATE_UP_SWIGLU=$v build-gpu/bin/lite-llama generate -m $m --load-format dummy --dtype bf16 -n 48 --temperature 0 --json -p "The capital of France is" > $O/gen_$(basename $m)_$v.json 2> $O/gen_$(basename $m)_$v.err
done; python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); f=lambda j: j['results'][0]['token_ids'] if 'results' in j else j.get('token_ids'); print(sys.argv[3], 'tokens equal:', f(a)==f(b), len(f(a) or []))" $O/gen_$(basename $m)_0.json $O/gen_$(basename $m)_1.json $(basename $m) || head -c 600 $O/gen_$(basename $m)_1.json $O/gen_$(basename $m)_1.err; done
el greedy
for rep in 1 2; do for v in 0 1; do
  LITE_LLAMA_GATE_UP_SWIGLU=$v build-gpu/bin/lite-llama bench -m tests/gpu/configs/qwen3-4b.json --load-format dummy --batch 1 --max-batched-tokens 16384 --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16512 --json $O/qwen16k_${v}_$rep.json > $O/qwen16k_${v}_$rep.txt 2>&1
  el "qwen3-4b 16k v$v rep $rep: $(grep -E '^1 ' $O/qwen16k_${v}_$rep.txt)"
  LITE_LLAMA_GATE_UP_SWIGLU=$v build-gpu/bin/lite-llama bench -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1 --max-batched-tokens 32768 --prompt-len 32768 --gen-len 128 --runs 2 --warmup 1 -c 32900 --json $O/llama32k_${v}_$rep.json > $O/llama32k_${v}_$rep.txt 2>&1
  el "llama 32k v$v rep $rep: $(grep -E '^1 ' $O/llama32k_${v}_$rep.txt)"
done; done
BATCHES=1 timeout 200 bash tests/gpu/ab_env.sh $O/ab_short 2 "LITE_LLAMA_GATE_UP_SWIGLU=0" "" "" llama-3.2-1b qwen3-4b llama-3.1-8b > $O/ab_short.txt 2>&1; el "ab short rc=$?"; cat $O/ab_short.txt | tail -30
cd $OUT && tar czf gu.tgz gu && rm -rf gu
