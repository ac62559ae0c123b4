#!/usr/bin/env bash
# Device run 61 (1 x H100): (1) timelines of LL_L2PF 0 / 2 (r60's L2 prefetch, dropped) at D 64
# batch 1 8k / 32k; (2) the kernel-attribute cache (set_func_attr): eager steps (--no-cuda-graph)
# with LL_ATTR_CACHE=0 (a driver call each launch) against the cache, alternated; kernel tests.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r61; mkdir -p $R/tl $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
CMAKE_FLAGS=-DLITE_LLAMA_DECODE_TIMELINE=ON BUILD_DIR=$PWD/build-tl bash tests/gpu/build_gpu.sh attention-bench > $R/build_tl.txt 2>&1 || echo "timeline build failed"
echo "build $((SECONDS-S)) s"
timeout 150 build-gpu/bin/test_cuda_kernels > $R/tests.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|FAILED  \]|SKIPPED \]' $R/tests.txt | head -4 | tr '\n' ' ')"
T=build-tl/bin/attention-bench
for m in 0 2; do for c in "64 1 8192" "64 1 32768"; do
  set -- $c; f=$R/tl/tl_D$1_B$2_C$3_m$m.txt
  LL_L2PF=$m timeout 60 $T --timeline $1 $2 $3 1 > $f 2>&1 || echo "timeline failed $c"
done; done
for f in $R/tl/*.txt; do echo "== $f"; python3 tools/kernel_bench/decode_timeline.py $f | tail -4; done > $R/medians.txt 2>&1
cat $R/medians.txt
tar czf $R/timelines.tgz -C $R tl && rm -rf $R/tl
echo "timeline $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2; do for m in 0 1; do
  LL_ATTR_CACHE=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1,16 \
      --prompt-len 128 --gen-len 128 --runs 2 -q --no-cuda-graph --json $R/ab/l1b-eager_a${m}_$r.json > /dev/null 2>&1
  LL_ATTR_CACHE=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
      --prompt-len 128 --gen-len 128 --runs 2 -q --no-cuda-graph --json $R/ab/q4b-eager_a${m}_$r.json > /dev/null 2>&1
  LL_ATTR_CACHE=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len 8192 --gen-len 64 --runs 2 -c 8400 -q --json $R/ab/l1b-8192graph_a${m}_$r.json > /dev/null 2>&1
  echo "round $r cache $m $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab.txt
cp tmp_exp/r61.sh $R/; echo "total $((SECONDS-S)) s"
