#!/usr/bin/env bash
# Device run 148 (H200): which half of r147's change made D 128 prefill slower: LL_EXP_PF 0 = new
# addresses + new descriptors, 1 = old addresses + new descriptors, 2 = new addresses + old
# descriptors, 3 = both old (= HEAD); attention-bench --prefill D 128, alternated 3 rounds. Then
# TTFT end to end (Llama-3.2-1B 32k and 8k prompt, D 64) against HEAD's build, 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r148; mkdir -p $R
git diff HEAD > $R/diff.txt
bash tests/gpu/device_setup.sh >/dev/null 2>&1 || true
( cmake -S tmp_exp/base_src -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
    -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > $R/base_cmake.txt 2>&1 &&
  cmake --build build-base -j 8 --target lite-llama > $R/base_build.txt 2>&1 ) &
BP=$!
bash tests/gpu/build_gpu.sh lite-llama attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
for r in 1 2 3; do
  for c in "128 8192" "128 16384" "128 32768"; do
    for x in 0 1 2 3; do
      echo "x$x $(LL_EXP_PF=$x timeout 60 build-gpu/bin/attention-bench --prefill $c 2>&1 | tail -1)" >> $R/cells.txt
    done
  done
done
echo "cells $((SECONDS-S)) s"
python3 - $R/cells.txt <<'PY'
import re, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"x(\d) prefill D (\d+) tokens (\d+) .*: ([\d.]+) ms", line)
    if m: d[(int(m[3]), int(m[1]))].append(float(m[4]))
for k in sorted(d): print("L %5d x%d %s median %.4f" % (k + (sorted(d[k]), sorted(d[k])[1])))
PY
wait $BP || { tail -20 $R/base_build.txt; exit 1; }
echo "base build $((SECONDS-S)) s"
mkdir -p $R/e2e
for r in 1 2; do
  for which in base new; do
    bin=build-gpu/bin/lite-llama; [ $which = base ] && bin=build-base/bin/lite-llama
    for len in 8192 32768; do
      timeout 120 $bin bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1 --prompt-len $len \
        --gen-len 16 --max-batched-tokens 32768 --runs 2 --warmup 1 -c $((len + 64)) --json $R/e2e/l1b${len}_${which}_$r.json > /dev/null 2>&1
    done
    timeout 120 $bin bench -q -m tests/gpu/configs/qwen3-4b.json --load-format dummy --batch 1 --prompt-len 16384 \
        --gen-len 16 --max-batched-tokens 32768 --runs 2 --warmup 1 -c 16448 --json $R/e2e/q4b16k_${which}_$r.json > /dev/null 2>&1
  done
  echo "e2e round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py $R/e2e | sort
(cd $R && tar czf e2e.tgz e2e && rm -rf e2e)
cp tmp_exp/r148.sh $R/
echo "total $((SECONDS-S)) s"
