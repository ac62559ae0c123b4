#!/usr/bin/env bash
# Device run 128 (H200): the D 64 decode wave rule (three-stage waves of four blocks an SM) against
# its parent aae6815: kernel tests, the grid choices it changes at batch 2 / 8 / 128 / 256, and
# Llama-3.2-1B steps at 4k prompts, batch 4-64, the two builds alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r128; mkdir -p $R
git log --oneline -1 > $R/commit.txt; git diff --stat HEAD > $R/diffstat.txt
bash tests/gpu/device_setup.sh >/dev/null 2>&1 || true
( cmake -S tmp_exp/base_src -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
    -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > $R/base_cmake.txt 2>&1 &&
  cmake --build build-base -j 8 --target lite-llama > $R/base_build.txt 2>&1 ) &
BP=$!
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*Attention*:*Decode*:*Graph*:*LongStep*' > $R/tests.txt 2>&1
echo "tests rc=$?: $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $R/tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s"
for c in "64 2 8192" "64 2 8192 24 4" "64 2 32768" "64 2 32768 24 4" "64 8 8192" "64 8 8192 6 4" "64 8 32768" "64 8 32768 6 4" \
         "64 128 8192" "64 128 8192 2 3" "64 256 8192" "64 256 8192 1 2" "64 1 8192" "64 4 8192" "64 32 8192" "64 64 8192"; do
  for r in 1 2; do echo "$(timeout 60 build-gpu/bin/attention-bench --decode $c 0 0 1 2>&1 | tail -1)" >> $R/sweep.txt; done
done
sed -i 's/^/  /' $R/sweep.txt; cat $R/sweep.txt | sort | uniq -c | cut -c1-150 | head -40
wait $BP || { tail -20 $R/base_build.txt; exit 1; }
echo "base build $((SECONDS-S)) s"
for r in 1 2; do
  for which in base new; do
    bin=build-gpu/bin/lite-llama; [ $which = base ] && bin=build-base/bin/lite-llama
    timeout 120 $bin bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 4,16,32,64 \
      --prompt-len 4096 --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c 4160 \
      --json $R/llama-3.2-1b_${which}_$r.json > $R/bench_${which}_$r.txt 2>&1 || tail -3 $R/bench_${which}_$r.txt
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py $R
cp tmp_exp/r128.sh $R/
echo "total $((SECONDS-S)) s"
