#!/usr/bin/env bash
# Device run 102: tree HEAD (the split-partial helpers). The split-chunk kernel tests.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r102; mkdir -p $R
bash tests/gpu/build_gpu.sh test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
timeout 120 build-gpu/bin/test_cuda_kernels --gtest_filter='*ShortChunk*:*ChunkAfterLong*:*MixedDecodeAndPrefill*' > $R/tests.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s" | tee -a $R/summary.txt
rm -f $R/build.txt
