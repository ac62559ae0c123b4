#!/usr/bin/env bash
# Device run 71 (1 x H100): EXPERIMENT LL_PF_PINGPONG (0: the wgmma prefill kernel as committed at
# 51f4a17, 1: FA3 ping-pong between the warpgroups, mbarrier stage hand-off). Attention tests in
# mode 1, prefill cells alternated 3 rounds, TTFT alternated, then every kernel test in mode 0.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r71; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
git log --oneline -1 > $R/commit.txt 2>/dev/null; git diff --stat >> $R/commit.txt 2>/dev/null
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
LL_PF_PINGPONG=1 timeout 120 build-gpu/bin/test_cuda_kernels --gtest_filter='*Attention*:*Prefill*:*Graph*:*Decode*' > $R/tests_m1.txt 2>&1
rc1=$?; echo "tests m1 rc $rc1 $(grep -E '^\[  PASSED|FAILED  \]' $R/tests_m1.txt | head -5 | tr '\n' ' ') $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
for r in 1 2 3; do for m in 0 1; do
  for D in 64 128; do for L in 2048 8192 16384 32768; do
    echo -n "m$m r$r: "; LL_PF_PINGPONG=$m timeout 30 $B --prefill $D $L
  done; done
done; done > $R/kernel_cells.txt 2>&1
grep -v "^m" $R/kernel_cells.txt | head -5
python3 - $R/kernel_cells.txt <<'PY'
import sys,re,collections
d=collections.defaultdict(list)
for ln in open(sys.argv[1]):
    m=re.match(r"m(\d) r\d: prefill D (\d+) tokens (\d+) .*: ([\d.]+) ms",ln)
    if m: d[(int(m[2]),int(m[3]),m[1])].append(float(m[4]))
for (D,L,mm) in sorted(d):
    if mm=='0': 
        a=sorted(d[(D,L,'0')]); b=sorted(d.get((D,L,'1'),[0]))
        print(f"D {D} L {L}: m0 {a[len(a)//2]:.3f} m1 {b[len(b)//2]:.3f} ms  ratio {b[len(b)//2]/a[len(a)//2]:.3f}")
PY
echo "cells $((SECONDS-S)) s"
M=tests/gpu/configs
if [ $rc1 -eq 0 ]; then for r in 1 2; do for m in 0 1; do
  LL_PF_PINGPONG=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
    --prompt-len 32000 --gen-len 16 --runs 2 --warmup 1 -c 32200 -q --json $R/ab/l1b-32000_p${m}_$r.json > /dev/null 2>&1
  LL_PF_PINGPONG=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
    --prompt-len 16000 --gen-len 16 --runs 2 --warmup 1 -c 16200 -q --json $R/ab/q4b-16000_p${m}_$r.json > /dev/null 2>&1
  echo "round $r m $m $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab.txt; fi
left=$((570-SECONDS+S)); echo "full tests with ${left} s"
timeout $left build-gpu/bin/test_cuda_kernels > $R/kernel_tests_m0.txt 2>&1
echo "tests m0 rc $? $(grep -E '^\[  PASSED|^\[  SKIPPED|FAILED  \]' $R/kernel_tests_m0.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s"
cp tmp_exp/r71.sh $R/; echo "total $((SECONDS-S)) s"
