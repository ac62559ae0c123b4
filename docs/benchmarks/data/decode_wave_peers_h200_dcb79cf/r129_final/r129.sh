#!/usr/bin/env bash
# Device run 129 (H200): the final D 64 decode wave rule (three-stage one-wave grids; multi-wave as
# before): attention/decode/graph/long-step kernel tests and the attention-bench table.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r129; mkdir -p $R
git log --oneline -1 > $R/commit.txt; git diff HEAD > $R/diff.txt
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*Attention*:*Decode*:*Graph*:*LongStep*' > $R/tests.txt 2>&1
echo "tests rc=$?: $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $R/tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s"
timeout 150 build-gpu/bin/attention-bench > $R/attention_bench.jsonl 2>&1
grep -E '"copy"|decode_pdl' $R/attention_bench.jsonl | cut -c1-190
cp tmp_exp/r129.sh $R/
echo "total $((SECONDS-S)) s"
