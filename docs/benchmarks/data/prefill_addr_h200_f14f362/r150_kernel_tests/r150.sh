#!/usr/bin/env bash
# Device run 150 (H200): all of test_cuda_kernels on the committed tree (r149's run was cut at 200 s).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r150; mkdir -p $R
git log --oneline -1 > $R/commit.txt; git diff HEAD > $R/diff.txt
bash tests/gpu/build_gpu.sh test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 330 build-gpu/bin/test_cuda_kernels > $R/tests_full.txt 2>&1
echo "tests rc=$?: $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $R/tests_full.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s"
(grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED TEST|tests ran|^\[       OK|^\[  FAILED" $R/tests_full.txt) > $R/tests_summary.txt
tail -3 $R/tests_full.txt; rm -f $R/tests_full.txt
cp tmp_exp/r150.sh $R/
