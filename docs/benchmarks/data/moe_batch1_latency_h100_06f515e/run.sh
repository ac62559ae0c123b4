#!/usr/bin/env bash
# MoE batch-1 latency: down GEMV with 8 chunks in flight, combine reads the routing before its wait. A/B vs base build.
set -u
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
mkdir -p /tmp/m
( bash tests/gpu/device_setup.sh >/dev/null 2>&1; cmake -S tmp_exp/base_src -B /tmp/base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > /tmp/m/base_cmake.txt 2>&1 && cmake --build /tmp/base -j 6 --target lite-llama > /tmp/m/base_build.txt 2>&1; echo done > /tmp/m/base_done ) &
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > /tmp/m/build.txt 2>&1 || { tail -20 /tmp/m/build.txt; exit 1; }
el build
timeout 300 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaMoe*' > /tmp/m/tests.txt 2>&1; el "tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/m/tests.txt | tr '\n' ' ')"
grep -B3 -A12 'Failure' /tmp/m/tests.txt | head -40
while [ ! -f /tmp/m/base_done ]; do sleep 2; done; el "base build $(ls /tmp/base/bin/lite-llama 2>&1)"
C=tests/gpu/configs/qwen3-30b-a3b.json
F="--load-format dummy -m $C --batch 1,8,64 --max-num-seqs 64 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 2"
for r in 1 2 3; do
  for v in base new; do
    B=build-gpu/bin/lite-llama; [ $v = base ] && B=/tmp/base/bin/lite-llama
    timeout 200 $B bench $F --json /tmp/m/ab_${v}_$r.json > /tmp/m/ab_${v}_$r.txt 2>&1
    el "$v r$r: $(grep -E '^(1|8|64) ' /tmp/m/ab_${v}_$r.txt | awk '{print $1, $4, $6}' | tr '\n' '|')"
  done
done
tar czf $OUT/m.tgz -C /tmp m --exclude=base_build.txt
