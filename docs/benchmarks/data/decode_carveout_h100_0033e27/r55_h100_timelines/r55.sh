#!/usr/bin/env bash
# Device run 55 (1 x H100): decode attention timelines (instrumented build) with and without the
# max shared-memory carveout on the split and merge kernels (LL_CARVEOUT 0 / 1, r54's patch).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r55; mkdir -p $R/tl
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
CMAKE_FLAGS=-DLITE_LLAMA_DECODE_TIMELINE=ON BUILD_DIR=$PWD/build-tl bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
T=build-tl/bin/attention-bench
for m in 0 1; do
  for c in "64 1 8192" "64 1 32768" "128 1 16384" "64 4 8192"; do
    set -- $c; f=$R/tl/tl_D$1_B$2_C$3_m$m.txt
    LL_CARVEOUT=$m timeout 60 $T --timeline $1 $2 $3 1 > $f 2>&1 || echo "timeline failed $c"
    head -1 $f
  done
done
for f in $R/tl/*.txt; do echo "== $f"; python3 tools/kernel_bench/decode_timeline.py $f | tail -3; done > $R/medians.txt 2>&1
tar czf $R/timelines.tgz -C $R tl && rm -rf $R/tl
cp tmp_exp/r55.sh $R/; echo "total $((SECONDS-S)) s"
