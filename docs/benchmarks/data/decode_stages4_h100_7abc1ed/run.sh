#!/usr/bin/env bash
# stages4 branch: tests, attention-bench sweep, Llama 32k A/B.
set -u
O=$OUT/s4; mkdir -p $O
t0=$(date +%s)
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $O/build.txt 2>&1 || { cat $O/build.txt; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $O/gpu.txt
build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaAttention*:*Graph*' > $O/tests.txt 2>&1; echo "tests rc=$? $(tail -3 $O/tests.txt | tr '\n' ' ')"
for rep in 1 2; do
for pdl in 0 1; do for st in 3 4; do for b in 1 4; do for c in 8192 16384 32768; do
  build-gpu/bin/attention-bench --decode 64 $b $c 0 $st $pdl
done; done; done; done
for pdl in 0 1; do for b in 1 4; do for c in 8192 16384 32768; do build-gpu/bin/attention-bench --decode 128 $b $c 0 3 $pdl; done; done; done
done > $O/decode.txt 2>&1
echo "bench $(( $(date +%s) - t0 )) s"
cat $O/decode.txt
for rep in 1 2 3; do for st in 3 4; do
  LITE_LLAMA_DECODE_STAGES=$st build-gpu/bin/lite-llama bench -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1 --max-batched-tokens 32768 --prompt-len 32768 --gen-len 128 --runs 2 --warmup 1 -c 32900 --json $O/llama32k_st${st}_$rep.json > $O/llama32k_st${st}_$rep.txt 2>&1
  echo "st $st rep $rep: $(grep -E '^1 ' $O/llama32k_st${st}_$rep.txt)"
done; done
echo "total $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf s4.tgz s4 && rm -rf s4
