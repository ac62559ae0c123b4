#!/usr/bin/env bash
# MoE: route fix + fused combine. Tests, A/B against the base build, ncu at batch 64.
set -u
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
mkdir -p /tmp/m
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > /tmp/m/build.txt 2>&1 || { tail -20 /tmp/m/build.txt; exit 1; }
el build
( cmake -S tmp_exp/base_src -B /tmp/base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > /tmp/m/base_cmake.txt 2>&1 && cmake --build /tmp/base -j 12 --target lite-llama > /tmp/m/base_build.txt 2>&1; echo done > /tmp/m/base_done ) &
timeout 300 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaMoe*:*Graph*' > /tmp/m/tests.txt 2>&1; el "tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/m/tests.txt | tr '\n' ' ')"
grep -B3 -A10 'Failure' /tmp/m/tests.txt | head -40
while [ ! -f /tmp/m/base_done ]; do sleep 2; done; el "base build $(ls /tmp/base/bin/lite-llama 2>&1)"
C=tests/gpu/configs/qwen3-30b-a3b.json
F="--load-format dummy -m $C --batch 1,64 --max-num-seqs 64 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 2"
for r in 1 2; do
  for v in base f0 f1; do
    B=build-gpu/bin/lite-llama; E=""
    [ $v = base ] && B=/tmp/base/bin/lite-llama
    [ $v = f0 ] && E="LITE_LLAMA_MOE_FUSED_COMBINE=0"
    env $E timeout 200 $B bench $F --json /tmp/m/ab_${v}_$r.json > /tmp/m/ab_${v}_$r.txt 2>&1
    el "$v r$r: $(grep -E '^(1|64) ' /tmp/m/ab_${v}_$r.txt | awk '{print $1, $4, $6}' | tr '\n' '|')"
  done
done
C4=tests/gpu/configs/qwen3-30b-a3b-4l.json
for b in 1 64; do
  timeout 200 ncu -k 'regex:gemv_kernel|moe_combine|moe_route' --launch-skip 60 --launch-count 12 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
    build-gpu/bin/lite-llama bench --load-format dummy -m $C4 --dtype bf16 --no-cuda-graph --batch $b --max-num-seqs 64 --ctx 512 --prompt-len 32 --gen-len 16 --runs 1 --warmup 0 > /tmp/m/ncu_b$b.txt 2>&1
  el "ncu b$b rc=$?"
done
python3 - <<'PY'
import re
for b in (1,64):
    print("== ncu b",b)
    name=None
    for line in open(f'/tmp/m/ncu_b{b}.txt'):
        s=line.rstrip()
        m=re.match(r'^  (\S.*?)\((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\)', s)
        if m: name=m.group(1)[:70]+' grid(%s,%s,%s)'%(m.group(2),m.group(3),m.group(4)); d={}
        for k in ('Duration','DRAM Throughput','Achieved Occupancy','Registers Per Thread','Issued Warp Per Scheduler','No Eligible'):
            if s.strip().startswith(k+' '):
                d[k]=s.split()[-1]
                if k=='Achieved Occupancy': print(name, d)
PY
tar czf $OUT/m.tgz -C /tmp m
