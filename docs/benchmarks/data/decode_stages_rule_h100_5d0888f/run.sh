#!/usr/bin/env bash
set -u
O=$OUT/st; mkdir -p $O
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $O/build.txt 2>&1 || { cat $O/build.txt; exit 1; }
el build
nvidia-smi --query-gpu=name --format=csv,noheader > $O/gpu.txt
build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaAttention*:*Graph*' > $O/tests.txt 2>&1; el "tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $O/tests.txt | tr '\n' ' ')"
BATCHES=1,8,64 timeout 130 bash tests/gpu/ab_env.sh $O/ab_short 3 "LITE_LLAMA_DECODE_STAGES=3" "" "" llama-3.2-1b > $O/ab_short.txt 2>&1; el "ab short rc=$?"; tail -6 $O/ab_short.txt
for rep in 1 2; do for v in 3 4; do
  LITE_LLAMA_DECODE_STAGES=$v build-gpu/bin/lite-llama bench -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1,16 --max-batched-tokens 32768 --prompt-len 8192 --gen-len 128 --runs 1 --warmup 1 -c 8320 --json $O/llama8k_${v}_$rep.json > $O/llama8k_${v}_$rep.txt 2>&1
  el "llama 8k stages $v rep $rep: $(grep -E '^(1|16) ' $O/llama8k_${v}_$rep.txt | tr '\n' '|')"
done; done
cd $OUT && tar czf st.tgz st && rm -rf st
