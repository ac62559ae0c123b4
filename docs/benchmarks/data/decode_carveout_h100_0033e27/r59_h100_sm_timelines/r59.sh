#!/usr/bin/env bash
# Device run 59 (1 x H100): timeline build at HEAD (records now hold the SM); D 64 batch 1 32k and
# 8k, D 64 batch 4 8k timelines, to tie fast and slow split blocks to SMs.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r59; mkdir -p $R/tl
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
CMAKE_FLAGS=-DLITE_LLAMA_DECODE_TIMELINE=ON BUILD_DIR=$PWD/build-tl bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
for c in "64 1 32768" "64 1 8192" "64 4 8192"; do
  set -- $c; f=$R/tl/tl_D$1_B$2_C$3.txt
  timeout 60 build-tl/bin/attention-bench --timeline $1 $2 $3 1 > $f 2>&1 || echo "timeline failed $c"
  head -2 $f
done
tar czf $R/timelines.tgz -C $R tl && rm -rf $R/tl
cp tmp_exp/r59.sh $R/; echo "total $((SECONDS-S)) s"
