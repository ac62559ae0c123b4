#!/usr/bin/env bash
# Device run 50 (1 x H100): decode attention K/V rows by bulk copies (TMA engine, mbarrier per
# stage; CudaTuning::decode_bulk_kv 1, and 2 = the whole ring requested before the queries)
# against cp.async (0): kernel tests, attention-bench --decode alternated, long-context steps.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r50; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 240 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaAttention*Decode*:*CudaAttention*Mixed*' > $R/tests.txt 2>&1
echo "tests rc $? $((SECONDS-S)) s"; grep -E "PASSED|FAILED|tests ran" $R/tests.txt | tail -5
B=build-gpu/bin/attention-bench
for r in 1 2; do for bulk in 0 1 2; do
  for c in "64 1 8192 4" "64 1 16384 4" "64 1 32768 4" "128 1 8192 3" "128 1 16384 3" "128 1 32768 3" \
           "64 4 8192 4" "128 4 8192 3" "64 16 8192 4" "64 64 8192 3"; do
    set -- $c; timeout 30 $B --decode $1 $2 $3 0 $4 1 $bulk
  done
done; done | tee $R/kernel_ab.txt
echo "kernel $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2; do for bulk in 0 1 2; do
  for len in 2048 8192 32768; do
    LITE_LLAMA_DECODE_BULK_KV=$bulk timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_b${bulk}_$r.json > /dev/null 2>&1
  done
  LITE_LLAMA_DECODE_BULK_KV=$bulk timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
      --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16584 -q --json $R/ab/q4b-16384_b${bulk}_$r.json > /dev/null 2>&1
  echo "round $r bulk $bulk $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab_long.txt
cp tmp_exp/r50.sh $R/; echo "total $((SECONDS-S)) s"
