#!/usr/bin/env bash
# Device run 134 (H200): swizzled K/V tiles in the decode kernel (no 16-byte row pad) against HEAD
# (tmp_exp/base_src): kernel tests, then attention-bench --decode cells with the builds alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r134; mkdir -p $R
git log --oneline -1 > $R/commit.txt; git diff HEAD > $R/diff.txt
bash tests/gpu/device_setup.sh >/dev/null 2>&1 || true
( cmake -S tmp_exp/base_src -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
    -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > $R/base_cmake.txt 2>&1 &&
  cmake --build build-base -j 8 --target lite-llama attention-bench > $R/base_build.txt 2>&1 ) &
BP=$!
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*Attention*:*Decode*:*Graph*:*LongStep*' > $R/tests.txt 2>&1
echo "tests rc=$?: $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $R/tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s"
wait $BP || { tail -20 $R/base_build.txt; exit 1; }
echo "base build $((SECONDS-S)) s"
nvcc -O3 -arch=sm_90a -std=c++17 -o /tmp/probe2 tmp_exp/ldgsts_probe2.cu && /tmp/probe2 > $R/probe.txt 2>&1
for r in 1 2; do
  for c in "64 1 8192" "64 1 16384" "64 1 32768" "64 4 8192" "64 4 32768" "64 16 8192" "64 16 32768" "64 64 8192" "64 64 32768" \
           "128 1 8192" "128 1 16384" "128 1 32768" "128 4 8192" "128 4 32768" "128 16 8192" "128 16 32768" "128 64 8192" "128 64 32768"; do
    for which in base new; do
      bin=build-gpu/bin/attention-bench; [ $which = base ] && bin=build-base/bin/attention-bench
      echo "$which $(timeout 60 $bin --decode $c 0 0 1 2>&1 | tail -1)" >> $R/cells.txt
    done
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 - $R/cells.txt <<'PY'
import re, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) decode D (\d+) batch (\d+) context (\d+) splits (\d+) stages (\d+).*: ([\d.]+) us", line)
    if m: d[(int(m[2]), int(m[3]), int(m[4]))].append((m[1], float(m[7]), m[5], m[6]))
for k in sorted(d):
    b = sorted(x[1] for x in d[k] if x[0] == "base"); n = sorted(x[1] for x in d[k] if x[0] == "new")
    sp = [x for x in d[k] if x[0] == "new"][0]
    print("D %3d B %2d ctx %5d splits %s stages %s: base %s new %s us  ratio %.3f" % (k + (sp[2], sp[3], b, n, sum(n) / sum(b))))
PY
cat $R/probe.txt | head -3
cp tmp_exp/r134.sh $R/
echo "total $((SECONDS-S)) s"
