#!/usr/bin/env bash
# Device run 110: the default-context tests of test_engine on a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r110; mkdir -p $R
bash tests/gpu/build_gpu.sh test_engine > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
build-gpu/bin/test_engine --gtest_filter='*DefaultContext*:*DummyWeights*' 2>&1 | tee $R/tests.txt | grep -E "^\[  (OK|SKIPPED|FAILED|PASSED)|Failure|context"
