#!/usr/bin/env bash
# Device run 147 (H200): wgmma prefill with cheap load addresses and descriptors (base + offset)
# against HEAD (tmp_exp/base_src): attention kernel tests, then attention-bench --prefill cells with
# the two builds alternated, 3 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r147; mkdir -p $R
git log --oneline -1 > $R/commit.txt; git diff HEAD > $R/diff.txt
bash tests/gpu/device_setup.sh >/dev/null 2>&1 || true
( cmake -S tmp_exp/base_src -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
    -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > $R/base_cmake.txt 2>&1 &&
  cmake --build build-base -j 8 --target attention-bench lite-llama > $R/base_build.txt 2>&1 ) &
BP=$!
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*Attention*:*Graph*:*LongStep*' > $R/tests.txt 2>&1
echo "tests rc=$?: $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $R/tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s"
wait $BP || { tail -20 $R/base_build.txt; exit 1; }
echo "base build $((SECONDS-S)) s"
for r in 1 2 3; do
  for c in "64 2048" "64 8192" "64 16384" "64 32768" "128 2048" "128 8192" "128 16384" "128 32768"; do
    for which in base new; do
      bin=build-gpu/bin/attention-bench; [ $which = base ] && bin=build-base/bin/attention-bench
      echo "$which $(timeout 60 $bin --prefill $c 2>&1 | tail -1)" >> $R/cells.txt
    done
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 - $R/cells.txt <<'PY'
import re, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) prefill D (\d+) tokens (\d+) .*: ([\d.]+) ms", line)
    if m: d[(int(m[2]), int(m[3]))].append((m[1], float(m[4])))
for k in sorted(d):
    b = sorted(x[1] for x in d[k] if x[0] == "base"); n = sorted(x[1] for x in d[k] if x[0] == "new")
    print("D %3d L %5d: base %s new %s  new/base (medians) %.3f" % (k + (b, n, n[len(n)//2] / b[len(b)//2])))
PY
cp tmp_exp/r147.sh $R/
echo "total $((SECONDS-S)) s"
