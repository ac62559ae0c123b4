#!/usr/bin/env bash
# Device run 66 (1 x H100): EXPERIMENT LL_PF_OVERLAP (0: the wgmma prefill kernel as committed,
# 1: FlashAttention-3's intra-warpgroup overlap, three K/V stages). Attention tests in both modes,
# prefill kernel cells alternated 3 rounds, GEMM peak, TTFT alternated 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r66; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
for m in 1 0; do
  LL_PF_OVERLAP=$m timeout 120 build-gpu/bin/test_cuda_kernels --gtest_filter='*Attention*:*Prefill*:*Graph*:*Decode*' > $R/tests_m$m.txt 2>&1
  echo "tests m$m rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests_m$m.txt | head -5 | tr '\n' ' ') $((SECONDS-S)) s"
done
B=build-gpu/bin/attention-bench
for r in 1 2 3; do for m in 0 1; do
  for D in 64 128; do for L in 2048 8192 16384 32768; do
    echo -n "m$m r$r: "; LL_PF_OVERLAP=$m timeout 30 $B --prefill $D $L
  done; done
done; done | tee $R/kernel_cells.txt
echo "cells $((SECONDS-S)) s"
LL_PF_OVERLAP=1 timeout 100 $B --quick > $R/attention_bench_quick.jsonl 2>&1; grep -E 'gemm|"prefill' $R/attention_bench_quick.jsonl
M=tests/gpu/configs
for r in 1 2; do for m in 0 1; do
  LL_PF_OVERLAP=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
    --prompt-len 32000 --gen-len 16 --runs 2 --warmup 1 -c 32200 -q --json $R/ab/l1b-32000_p${m}_$r.json > /dev/null 2>&1
  LL_PF_OVERLAP=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
    --prompt-len 16000 --gen-len 16 --runs 2 --warmup 1 -c 16200 -q --json $R/ab/q4b-16000_p${m}_$r.json > /dev/null 2>&1
  echo "round $r m $m $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab.txt
cp tmp_exp/r66.sh $R/; echo "total $((SECONDS-S)) s"
