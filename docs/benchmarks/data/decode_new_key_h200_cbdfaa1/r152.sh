#!/usr/bin/env bash
# Device run 152 (H200): the split holding the new key starts its slot ids and tile 0 before the
# PDL wait where that key is not in tile 0 (working tree) against HEAD (build-base): decode cells
# alternated 3 rounds, the new side's timelines, decode kernel tests, then steps (Llama-3.2-1B 8k /
# 32k, Qwen3-4B 16k, batch 1, 64 new tokens) alternated 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r152; mkdir -p $R
git diff HEAD > $R/diff.txt
bash tests/gpu/device_setup.sh >/dev/null 2>&1 || true
( cmake -S tmp_exp/base_src -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
    -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > $R/base_cmake.txt 2>&1 &&
  cmake --build build-base -j 6 --target lite-llama attention-bench > $R/base_build.txt 2>&1 ) &
BP=$!
( BUILD_DIR=build-tl CMAKE_FLAGS=-DLITE_LLAMA_DECODE_TIMELINE=ON bash tests/gpu/build_gpu.sh attention-bench > $R/build_tl.txt 2>&1 ) &
TP=$!
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
wait $BP || { tail -20 $R/base_build.txt; exit 1; }
echo "builds $((SECONDS-S)) s"
for r in 1 2 3; do
  for c in "64 1 8192" "64 1 16384" "64 1 32768" "64 4 8192" "128 1 8192" "128 1 16384" "128 1 32768"; do
    for which in base new; do
      bin=build-gpu/bin/attention-bench; [ $which = base ] && bin=build-base/bin/attention-bench
      echo "$which $(timeout 60 $bin --decode $c 0 0 1 2>&1 | tail -1)" >> $R/cells.txt
    done
  done
done
python3 - $R/cells.txt <<'PY'
import re, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) decode D (\d+) batch (\d+) context (\d+) .*: ([\d.]+) us", line)
    if m: d[(int(m[2]), int(m[3]), int(m[4]))].append((m[1], float(m[5])))
for k in sorted(d):
    b = sorted(x for w, x in d[k] if w == "base"); n = sorted(x for w, x in d[k] if w == "new")
    print("D %d B %d ctx %5d  base %s  new %s  median %.2f -> %.2f us" % (k + (b, n, b[len(b)//2], n[len(n)//2])))
PY
echo "cells $((SECONDS-S)) s"
timeout 150 build-gpu/bin/test_cuda_kernels --gtest_filter='*Decode*:*Attention*:*Graph*' > $R/tests.txt 2>&1
echo "tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $R/tests.txt | head -5 | tr '\n' ' ') $((SECONDS-S)) s"
wait $TP && { mkdir -p $R/tl; for c in "64 1 32768" "64 4 8192" "128 1 16384"; do
  n=$(echo $c | tr ' ' _); timeout 60 build-tl/bin/attention-bench --timeline $c 1 > $R/tl/$n.txt 2>&1
  echo "== $c"; python3 tools/kernel_bench/decode_timeline.py $R/tl/$n.txt 2>&1 | tail -1; done
  (cd $R && tar czf tl.tgz tl && rm -rf tl); }
cp tmp_exp/r152.sh $R/
echo "total $((SECONDS-S)) s"
