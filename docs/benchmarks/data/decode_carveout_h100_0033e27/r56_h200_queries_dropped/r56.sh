#!/usr/bin/env bash
# Device run 56 (1 x H100), all with LL_CARVEOUT=1 (split + merge at the max shared carveout):
# LL_QMODE 0 as now; 1 the queries by a bulk copy (TMA) after the PDL wait; 2 that and the whole
# K/V ring requested before the wait; 3 nothing requested before the wait. Decode tests with each
# mode, attention-bench cells alternated, timelines (instrumented build), steps.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r56; mkdir -p $R/ab $R/tl
export LL_CARVEOUT=1
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
(CMAKE_FLAGS=-DLITE_LLAMA_DECODE_TIMELINE=ON BUILD_DIR=$PWD/build-tl bash tests/gpu/build_gpu.sh attention-bench > $R/build_tl.txt 2>&1; echo "tl rc $?" >> $R/build_tl.txt) &
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
wait; tail -1 $R/build_tl.txt
echo "build $((SECONDS-S)) s"
for m in 0 1 2 3; do
  LL_QMODE=$m timeout 60 build-gpu/bin/test_cuda_kernels --gtest_filter='*Decode*' > $R/tests_q$m.txt 2>&1
  echo "tests qmode $m rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests_q$m.txt | head -3 | tr '\n' ' ')"
done
B=build-gpu/bin/attention-bench
for r in 1 2; do for m in 0 1 2 3; do
  for c in "64 1 8192 4" "64 1 16384 4" "64 1 32768 4" "128 1 8192 3" "128 1 16384 3" "64 4 8192 4"; do
    set -- $c; echo -n "qmode $m: "; LL_QMODE=$m timeout 30 $B --decode $1 $2 $3 0 $4 1
  done
done; done | tee $R/kernel_cells.txt
echo "kernel $((SECONDS-S)) s"
for m in 0 1 2 3; do for c in "64 1 8192" "64 1 32768"; do
  set -- $c; f=$R/tl/tl_D$1_B$2_C$3_q$m.txt
  LL_QMODE=$m timeout 60 build-tl/bin/attention-bench --timeline $1 $2 $3 1 > $f 2>&1 || echo "timeline failed $c"
done; done
for f in $R/tl/*.txt; do echo "== $f"; python3 tools/kernel_bench/decode_timeline.py $f | tail -1; done > $R/medians.txt 2>&1
cat $R/medians.txt
tar czf $R/timelines.tgz -C $R tl && rm -rf $R/tl
echo "timelines $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1; do for m in 0 1 2; do
  for len in 8192 32768; do
    LL_QMODE=$m timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_q${m}_$r.json > /dev/null 2>&1
  done
  LL_QMODE=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
      --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16584 -q --json $R/ab/q4b-16384_q${m}_$r.json > /dev/null 2>&1
  echo "round $r qmode $m $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab_long.txt
rm -f $R/ab/*_q[0-3]_[12].json
cp tmp_exp/r56.sh $R/; echo "total $((SECONDS-S)) s"
