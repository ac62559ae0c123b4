#!/usr/bin/env bash
# Device run 6 (H100): route-kernel change A/B (this tree vs tmp_exp/base_src), MoE tests.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
bash tests/gpu/device_setup.sh >/dev/null 2>&1 || true
( cmake -S tmp_exp/base_src -B /tmp/base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
    -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > $OUT/base_cmake.log 2>&1 &&
  cmake --build /tmp/base -j 8 --target lite-llama > $OUT/base_build.log 2>&1; echo "base rc $?" > $OUT/base_rc.txt ) &
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaMoe*:*Graph*' > $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED  \]" $OUT/tests.txt | tail -12
wait; cat $OUT/base_rc.txt; echo "base built $((SECONDS-S)) s"
mkdir -p $OUT/ab
for r in 1 2 3; do
  for side in base new; do
    bin=build-gpu/bin/lite-llama; [ $side = base ] && bin=/tmp/base/bin/lite-llama
    $bin bench -m tests/gpu/configs/qwen3-30b-a3b.json --load-format dummy --batch 1,8 --max-num-seqs 64 --ctx 1024 \
      --prompt-len 128 --gen-len 128 --runs 2 -q --json $OUT/ab/qwen3-30b-a3b_${side}_$r.json >/dev/null 2>>$OUT/ab/err.txt || echo "FAILED $side $r"
  done
done
python3 tests/gpu/ab_summary.py $OUT/ab
echo "done $((SECONDS-S)) s"
cp tmp_exp/r6.sh $OUT/
cd $OUT && tar czf ab.tgz ab && rm -rf ab
