#!/usr/bin/env bash
# MoE grouped GEMV on mma.sync: tests, A/B (LITE_LLAMA_MOE_GEMV_MMA=0|1), ncu.
set -u
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
mkdir -p /tmp/m
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > /tmp/m/build.txt 2>&1 || { tail -20 /tmp/m/build.txt; exit 1; }
el build
timeout 300 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaMoe*' > /tmp/m/tests.txt 2>&1; el "tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/m/tests.txt | tr '\n' ' ')"
grep -B3 -A12 'Failure' /tmp/m/tests.txt | head -50
C=tests/gpu/configs/qwen3-30b-a3b.json
F="--load-format dummy -m $C --batch 1,8,64 --max-num-seqs 64 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 2"
for r in 1 2; do
  for v in 0 1; do
    LITE_LLAMA_MOE_GEMV_MMA=$v timeout 200 build-gpu/bin/lite-llama bench $F --json /tmp/m/ab_mma${v}_$r.json > /tmp/m/ab_mma${v}_$r.txt 2>&1
    el "mma=$v r$r: $(grep -E '^(1|8|64) ' /tmp/m/ab_mma${v}_$r.txt | awk '{print $1, $4, $6}' | tr '\n' '|')"
  done
done
C4=tests/gpu/configs/qwen3-30b-a3b-4l.json
for b in 1 64; do
  LITE_LLAMA_MOE_GEMV_MMA=1 timeout 200 ncu -k 'regex:gemv_kernel' --launch-skip 40 --launch-count 4 \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
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
        if m: name=m.group(1)[:90]+' grid(%s,%s,%s)'%(m.group(2),m.group(3),m.group(4)); d={}
        for k in ('Duration','DRAM Throughput','Achieved Occupancy','Registers Per Thread','Issued Warp Per Scheduler','No Eligible'):
            if s.strip().startswith(k+' '):
                d[k]=s.split()[-1]
                if k=='Achieved Occupancy': print(name, d)
PY
tar czf $OUT/m.tgz -C /tmp m
