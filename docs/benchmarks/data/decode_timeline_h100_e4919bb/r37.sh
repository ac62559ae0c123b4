#!/usr/bin/env bash
# Device run 37 (1 x H100): the final decode kernel (5e14bf5): attention, decode, graph and
# long-step kernel tests; attention-bench decode cases.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader
R=/tmp/r37; mkdir -p $R
bash tests/gpu/build_gpu.sh attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*Attention*:*Decode*:*Graph*:*LongStep*' > $R/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/tests.txt | head -10
for c in "64 1 8192" "64 1 32768" "128 1 16384"; do set -- $c; st=$( [ $1 -eq 64 ] && echo 4 || echo 3 )
  for p in 0 1; do timeout 30 build-gpu/bin/attention-bench --decode $1 $2 $3 0 $st $p; done; done | tee $R/decode.txt
cp tmp_exp/r37.sh $R/; tar czf $OUT/r37.tgz -C /tmp r37; echo "total $((SECONDS-S)) s"
