#!/usr/bin/env bash
# Issue 27: the all-reduce + norm under PDL. Tests, greedy equality, batch-1 A/B with tp1 baseline.
set -u
R=$OUT/res.txt
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*" | tee -a $R; }
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > /tmp/build.txt 2>&1 || { tail -20 /tmp/build.txt | tee -a $R; exit 1; }
el build; nvidia-smi --query-gpu=name --format=csv,noheader >> $R; git rev-parse --short HEAD >> $R
export NCCL_NVLS_ENABLE=0
for v in 0 1; do LITE_LLAMA_PDL_ALL_REDUCE=$v timeout 150 build-gpu/bin/test_cuda_kernels --gtest_filter='*TensorParallel*' > /tmp/t$v.txt 2>&1; el "TP tests pdl_all_reduce=$v rc=$? $(grep -E 'PASSED|FAILED' /tmp/t$v.txt | tr '\n' ' ')"; done
L=$(tests/gpu/dummy_llama.sh)
for v in 0 1; do LITE_LLAMA_PDL_ALL_REDUCE=$v timeout 60 build-gpu/bin/lite-llama generate -m $L --load-format dummy --dtype bf16 --tp 2 -n 40 --temperature 0 --json -p "The capital of France is" -p "1 2 3" > $OUT/gen_$v.json 2>&1; done
python3 -c "
import json,sys
f=lambda p:[r['token_ids'] for r in json.load(open(p))['results']]
a,b=f('$OUT/gen_0.json'),f('$OUT/gen_1.json'); print('tp2 greedy tokens equal:',a==b,[len(x) for x in a])" 2>&1 | tee -a $R
el greedy
mkdir -p /tmp/ab
for rep in 1 2 3; do for cfg in "1 1" "2 0" "2 1"; do set -- $cfg
  LITE_LLAMA_PDL_ALL_REDUCE=$2 timeout 60 build-gpu/bin/lite-llama bench --load-format dummy -m tests/gpu/configs/llama-3.1-8b.json --tp $1 --dtype bf16 --batch 1,8 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 --json /tmp/ab/tp$1_v$2_$rep.json > /tmp/b.txt 2>&1
  el "8b tp$1 pdl_all_reduce=$2 rep $rep: $(grep -E '^(1|8) ' /tmp/b.txt | tr '\n' '|')"
done; done
tar czf $OUT/ab.tgz -C /tmp ab
