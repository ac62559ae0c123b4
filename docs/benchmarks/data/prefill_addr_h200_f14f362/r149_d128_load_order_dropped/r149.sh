#!/usr/bin/env bash
# Device run 149 (H200): D 128 prefill with cheap addresses and the tile's loads issued later
# (LL_EXP_PF 1: after S is issued, 2: after P V too; 0: the committed kernel), kernel cells and
# Qwen3-4B 16k TTFT alternated; then all kernel tests and the full attention-bench on this build
# (its default path is the committed code: the switch only changes D 128 bf16 when set).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r149; mkdir -p $R
git log --oneline -1 > $R/commit.txt; git diff HEAD > $R/diff.txt
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
for r in 1 2 3; do
  for c in "128 8192" "128 16384" "128 32768"; do
    for x in 0 1 2; do
      echo "x$x $(LL_EXP_PF=$x timeout 60 build-gpu/bin/attention-bench --prefill $c 2>&1 | tail -1)" >> $R/cells.txt
    done
  done
done
python3 - $R/cells.txt <<'PY'
import re, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"x(\d) prefill D (\d+) tokens (\d+) .*: ([\d.]+) ms", line)
    if m: d[(int(m[3]), int(m[1]))].append(float(m[4]))
for k in sorted(d): print("L %5d x%d %s median %.4f" % (k + (sorted(d[k]), sorted(d[k])[1])))
PY
echo "cells $((SECONDS-S)) s"
mkdir -p $R/e2e
for r in 1 2; do
  for x in 0 1 2; do
    LL_EXP_PF=$x timeout 100 build-gpu/bin/lite-llama bench -q -m tests/gpu/configs/qwen3-4b.json --load-format dummy --batch 1 --prompt-len 16384 \
        --gen-len 8 --max-batched-tokens 32768 --runs 2 --warmup 1 -c 16448 --json $R/e2e/q4b16k_x${x}_$r.json > /dev/null 2>&1
  done
done
python3 tests/gpu/ab_summary.py $R/e2e | sort
(cd $R && tar czf e2e.tgz e2e && rm -rf e2e)
echo "e2e $((SECONDS-S)) s"
timeout 200 build-gpu/bin/test_cuda_kernels > $R/tests_full.txt 2>&1
echo "tests rc=$?: $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $R/tests_full.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s"
(grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED TEST|tests ran" $R/tests_full.txt; grep -c "^\[       OK" $R/tests_full.txt) > $R/tests_summary.txt
rm -f $R/tests_full.txt
timeout $((590 - (SECONDS-S))) build-gpu/bin/attention-bench > $R/attention_bench.jsonl 2>&1
echo "attention-bench rc=$? $((SECONDS-S)) s"
grep -E '"copy"|gemm|"prefill"' $R/attention_bench.jsonl | head -12
cp tmp_exp/r149.sh $R/
