#!/usr/bin/env bash
# Device run 60 (1 x H100): EXPERIMENT LL_L2PF, K/V rows of split tiles 1..N prefetched into L2
# before the PDL wait (prefetch.global.L2, or +256: cp.async.bulk.prefetch.L2). Part a: build,
# decode tests, copy bandwidth, attention-bench cells with modes alternated. Part b: model steps.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r60; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
B=build-gpu/bin/attention-bench
if [ "$1" = a ]; then
  bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
  echo "build $((SECONDS-S)) s"
  for m in 2 258 6; do
    LL_L2PF=$m timeout 60 build-gpu/bin/test_cuda_kernels --gtest_filter='*Decode*' > $R/tests_$m.txt 2>&1
    echo "tests $m rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests_$m.txt | head -3 | tr '\n' ' ')"
  done
  timeout 120 $B --quick > $R/attention_bench_quick.jsonl 2>&1; grep -E '"copy"' $R/attention_bench_quick.jsonl
  for r in 1 2; do for m in 0 2 258 6; do
    for c in "64 1 8192 4" "64 1 16384 4" "64 1 32768 4" "128 1 8192 3" "128 1 16384 3" "128 1 32768 3" "64 4 8192 4" "128 4 8192 3" "64 16 8192 3"; do
      set -- $c; echo -n "l2pf $m: "; LL_L2PF=$m timeout 30 $B --decode $1 $2 $3 0 $4 1 1
    done
  done; done | tee $R/kernel_cells.txt
  echo "kernel $((SECONDS-S)) s"
fi
if [ "$1" = b ]; then
  M=tests/gpu/configs
  for r in 1 2; do for m in $2; do
    for len in 8192 32768; do
      LL_L2PF=$m timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
        --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_p${m}_$r.json > /dev/null 2>&1
    done
    LL_L2PF=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
        --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16584 -q --json $R/ab/q4b-16384_p${m}_$r.json > /dev/null 2>&1
    echo "round $r l2pf $m $((SECONDS-S)) s"
  done; done
  python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab_long.txt
fi
cp tmp_exp/r60.sh $R/; echo "total $((SECONDS-S)) s"
