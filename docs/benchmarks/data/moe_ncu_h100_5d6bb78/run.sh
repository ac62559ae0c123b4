#!/usr/bin/env bash
# MoE decode kernels under ncu (4-layer Qwen3-30B-A3B, batch 1 and 64).
set -u
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
bash tests/gpu/build_gpu.sh lite-llama > /tmp/build.txt 2>&1 || { tail -20 /tmp/build.txt; exit 1; }
el build
mkdir -p /tmp/n
C=tests/gpu/configs/qwen3-30b-a3b-4l.json
B=build-gpu/bin/lite-llama
for b in 1 64; do
  timeout 200 ncu --graph-profiling node -k 'regex:gemv_kernel|moe_combine|moe_route|rms|gemv1' --launch-skip 200 --launch-count 30 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    $B bench --load-format dummy -m $C --batch $b --max-num-seqs 64 --ctx 512 --prompt-len 32 --gen-len 16 --runs 1 --warmup 0 > /tmp/n/ncu_b$b.txt 2>&1
  el "ncu b$b rc=$?"
  python3 - /tmp/n/ncu_b$b.txt <<'PY'
import re,sys
name=None
for line in open(sys.argv[1]):
    s=line.rstrip()
    if re.match(r'^  \S.*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)', s): name=s.strip()[:150]; print(name)
    for k in ('Duration','DRAM Throughput','Memory Throughput','Achieved Occupancy','Registers Per Thread','Theoretical Occupancy','Block Limit Registers','Dynamic Shared Memory Per Block'):
        if s.strip().startswith(k+' '): print('   ',' '.join(s.split()))
PY
done
for b in 1 64; do timeout 200 $B bench --load-format dummy -m $C --batch $b --max-num-seqs 64 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 2 --profile > /tmp/n/prof_b$b.txt 2>&1; el "prof b$b"; grep -A25 -i 'profile' /tmp/n/prof_b$b.txt | head -40; done
tar czf $OUT/n.tgz -C /tmp n
