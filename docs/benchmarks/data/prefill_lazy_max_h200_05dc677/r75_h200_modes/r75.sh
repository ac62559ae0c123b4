#!/usr/bin/env bash
# Device run 75: EXPERIMENT LL_PF_MODE for the wgmma prefill kernel (bf16): 0 as committed at
# 05dc677, 1 lazy maximum (FA4), 2 / 3 / 4 every 8th / 4th / 2nd score pair's exp2 by a cubic on
# the FMA pipe (FA4), 5 lazy + every 4th. Prefill tests a mode, cells alternated, TTFT for 0/3/5.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r75; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
git log --oneline -1 > $R/commit.txt 2>/dev/null; git diff > $R/experiment.diff 2>/dev/null
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
for m in 1 2 3 4 5; do
  LL_PF_MODE=$m timeout 60 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaAttention*Prefill*:*CudaAttention*Chunk*:*CudaAttention*Mixed*' > $R/tests_m$m.txt 2>&1
  echo "tests m$m rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests_m$m.txt | head -4 | tr '\n' ' ') $((SECONDS-S)) s"
done
B=build-gpu/bin/attention-bench
for r in 1 2; do for m in 0 1 2 3 4 5; do
  for D in 64 128; do for L in 8192 16384 32768; do
    echo -n "m$m r$r: "; LL_PF_MODE=$m timeout 30 $B --prefill $D $L
  done; done
done; done > $R/kernel_cells.txt 2>&1
grep -v "^m" $R/kernel_cells.txt | head -5
python3 - $R/kernel_cells.txt <<'PY' | tee $R/cells_summary.txt
import sys,re,collections
d=collections.defaultdict(list)
for ln in open(sys.argv[1]):
    m=re.match(r"m(\d) r\d: prefill D (\d+) tokens (\d+) .*: ([\d.]+) ms",ln)
    if m: d[(int(m[2]),int(m[3]),int(m[1]))].append(float(m[4]))
keys=sorted({(D,L) for D,L,_ in d})
for D,L in keys:
    base=min(d[(D,L,0)])
    print(f"D {D} L {L}: " + "  ".join(f"m{mm} {min(d[(D,L,mm)]):.3f} ({min(d[(D,L,mm)])/base:.3f})" for mm in range(6) if (D,L,mm) in d))
PY
echo "cells $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2; do for m in 0 3 5; do
  [ $((SECONDS-S)) -gt 540 ] && break 2
  LL_PF_MODE=$m timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
    --prompt-len 32000 --gen-len 8 --runs 2 --warmup 1 -c 32200 -q --json $R/ab/l1b-32000_p${m}_$r.json > /dev/null 2>&1
  LL_PF_MODE=$m timeout 40 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
    --prompt-len 16000 --gen-len 8 --runs 2 --warmup 1 -c 16200 -q --json $R/ab/q4b-16000_p${m}_$r.json > /dev/null 2>&1
  echo "round $r m $m $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab.txt
cp tmp_exp/r75.sh $R/; echo "total $((SECONDS-S)) s"
