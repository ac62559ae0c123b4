#!/usr/bin/env bash
# Device run 68 (1 x H100): this tree (intra-warpgroup overlap in the wgmma prefill kernel,
# LL_PF_OVERLAP 0/1; softmax with one fma and ex2.approx.ftz in every attention kernel; no zeroing
# before the first S wgmma) against a build of HEAD (tmp_exp/base_src), alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r68; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
cmake -S tmp_exp/base_src -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
  -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > $R/base_cmake.txt 2>&1 && \
  cmake --build build-base -j 16 --target lite-llama attention-bench > $R/base_build.txt 2>&1 || { tail -30 $R/base_build.txt; exit 1; }
echo "base build $((SECONDS-S)) s"
LL_PF_OVERLAP=1 timeout 120 build-gpu/bin/test_cuda_kernels --gtest_filter='*Attention*:*Prefill*:*Graph*:*Decode*' > $R/tests.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests.txt | head -5 | tr '\n' ' ') $((SECONDS-S)) s"
NB=build-gpu/bin/attention-bench; BB=build-base/bin/attention-bench
for r in 1 2 3; do
  for D in 64 128; do for L in 2048 8192 16384 32768; do
    echo -n "base r$r: "; timeout 30 $BB --prefill $D $L
    echo -n "new0 r$r: "; LL_PF_OVERLAP=0 timeout 30 $NB --prefill $D $L
    echo -n "new1 r$r: "; LL_PF_OVERLAP=1 timeout 30 $NB --prefill $D $L
  done; done
  for D in 64 128; do for L in 8192 32768; do
    echo -n "base r$r: "; timeout 30 $BB --prefill $D $L mma
    echo -n "new r$r: "; timeout 30 $NB --prefill $D $L mma
  done; done
done | tee $R/prefill_cells.txt
echo "prefill cells $((SECONDS-S)) s"
for r in 1 2; do
  for c in "64 1 8192 4" "64 1 16384 4" "64 1 32768 4" "128 1 8192 3" "128 1 16384 3" "128 1 32768 3" "64 4 8192 4" "64 16 8192 4"; do
    set -- $c
    echo -n "base r$r: "; timeout 30 $BB --decode $1 $2 $3 0 $4 1 1
    echo -n "new r$r: "; timeout 30 $NB --decode $1 $2 $3 0 $4 1 1
  done
done | tee $R/decode_cells.txt
echo "decode cells $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2; do for w in base new; do
  bin=build-gpu/bin/lite-llama; [ $w = base ] && bin=build-base/bin/lite-llama
  timeout 60 $bin bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 --prompt-len 32000 --gen-len 64 --runs 2 --warmup 1 -c 32200 -q --json $R/ab/l1b-32000_${w}_$r.json > /dev/null 2>&1
  timeout 60 $bin bench -m $M/qwen3-4b.json --load-format dummy --batch 1 --prompt-len 16000 --gen-len 64 --runs 2 --warmup 1 -c 16200 -q --json $R/ab/q4b-16000_${w}_$r.json > /dev/null 2>&1
  timeout 60 $bin bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1,8 --prompt-len 128 --gen-len 128 --runs 2 -q --json $R/ab/l1b-128_${w}_$r.json > /dev/null 2>&1
  timeout 60 $bin bench -m $M/qwen3-4b.json --load-format dummy --batch 1,8 --prompt-len 128 --gen-len 128 --runs 2 -q --json $R/ab/q4b-128_${w}_$r.json > /dev/null 2>&1
  echo "round $r $w $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab.txt
rm -f $R/ab/*_base_[12].json $R/ab/*_new_[12].json
cp tmp_exp/r68.sh $R/; echo "total $((SECONDS-S)) s"
