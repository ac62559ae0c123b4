#!/usr/bin/env bash
# Device run 141 (H200): short prompts against 1c8df9c (the last full short-prompt sweep, H100):
# tests/gpu/ab_builds.sh, prompt 128, 256 new tokens, batch 1/8/64, four models, 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r141; mkdir -p $R
git log --oneline -1 > $R/commit.txt
bash tests/gpu/device_setup.sh >/dev/null 2>&1 || true
( cmake -S tmp_exp/base_src -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
    -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > $R/base_cmake.txt 2>&1 &&
  cmake --build build-base -j 8 --target lite-llama > $R/base_build.txt 2>&1 ) &
BP=$!
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
wait $BP || { tail -20 $R/base_build.txt; exit 1; }
echo "builds $((SECONDS-S)) s"
BASE_BUILD=$PWD/build-base timeout 420 bash tests/gpu/ab_builds.sh tmp_exp/base_src $R/short 2 llama-3.2-1b qwen3-4b llama-3.2-3b qwen2.5-3b > $R/short.txt 2>&1
tail -26 $R/short.txt
(cd $R && tar czf short.tgz short && rm -rf short)
cp tmp_exp/r141.sh $R/
echo "total $((SECONDS-S)) s"
