#!/usr/bin/env bash
# Device run 31 (1 x H100): decode attention timeline (globaltimer per block, instrumented build
# from tmp_exp/timeline.patch) at batch 1 / 4, plus the 3a419c6 refactor's kernel tests.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
q() { nvidia-smi --query-gpu=index,name,temperature.gpu,power.draw,clocks.sm,clocks_throttle_reasons.active --format=csv,noheader; }
q
if nvidia-smi --query-gpu=temperature.gpu,name --format=csv,noheader | head -1 | awk -F', ' '$1>55 || $2 !~ /H100/{b=1} END{exit !b}'; then echo "hot or not H100: skip"; exit 0; fi
git log --oneline -1 2>/dev/null
R=/tmp/r31; mkdir -p $R
rm -rf /tmp/tl && mkdir -p /tmp/tl && git archive HEAD | tar -x -C /tmp/tl && cp -r .deps /tmp/tl/ && (cd /tmp/tl && git init -q && git apply $OLDPWD/tmp_exp/timeline.patch) || { echo patch failed; exit 1; }
(CUDAFLAGS=-DLITE_LLAMA_DECODE_TIMELINE CXXFLAGS=-DLITE_LLAMA_DECODE_TIMELINE BUILD_DIR=/tmp/tl/build bash /tmp/tl/tests/gpu/build_gpu.sh attention-bench > $R/build_tl.txt 2>&1; echo "tl build rc $?" >> $R/build_tl.txt) &
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; }
wait
tail -3 $R/build_tl.txt
echo "build $((SECONDS-S)) s"
timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaQkvRopeGemv*:*CudaRope*:*CudaLinear*:*Attention*:*Decode*' > $R/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/tests.txt | head -20
T=/tmp/tl/build/bin/attention-bench
for c in "64 1 8192 1" "64 1 8192 0" "128 1 8192 1" "64 1 32768 1" "64 4 8192 1" "128 1 32768 1"; do
  set -- $c
  f=$R/tl_D$1_B$2_C$3_P$4.txt
  timeout 60 $T --timeline $1 $2 $3 $4 > $f 2>&1 || echo "timeline failed $c"
  head -1 $f
  timeout 60 build-gpu/bin/attention-bench --decode $1 $2 $3 0 $( [ $1 -eq 64 ] && echo 4 || echo 3 ) $4 >> $R/decode.txt 2>&1
  timeout 60 $T --decode $1 $2 $3 0 $( [ $1 -eq 64 ] && echo 4 || echo 3 ) $4 | sed 's/^/instrumented /' >> $R/decode.txt 2>&1
done
cat $R/decode.txt
q
cp tmp_exp/r31.sh tmp_exp/timeline.patch $R/
tar czf $OUT/r31.tgz -C /tmp r31
echo "total $((SECONDS-S)) s"
