#!/usr/bin/env bash
# Device run 130 (H200): unsplit decode grids with three K/V stages (experiment patch
# exp_unsplit3.diff: the launcher honours stages 3/4 at one split), and ncu of ours against cuDNN
# at D 128 batch 16 (where cuDNN reads ~10% faster).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r130; mkdir -p $R
git apply tmp_exp/exp_unsplit3.diff || exit 1
bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
for r in 1 2; do
  for c in "64 64 8192 1 2" "64 64 8192 1 3" "64 64 32768 1 2" "64 64 32768 1 3" "64 48 8192 1 2" "64 48 8192 1 3" \
           "128 32 8192 1 2" "128 32 8192 1 3" "128 32 32768 1 2" "128 32 32768 1 3"; do
    echo "$(timeout 60 build-gpu/bin/attention-bench --decode $c 1 2>&1 | tail -1)" >> $R/sweep.txt
  done
done
sort $R/sweep.txt | cut -c1-140
SEC="--section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SchedulerStats --section WarpStateStats"
timeout 100 ncu -k regex:decode_kernel --launch-skip 8 --launch-count 1 $SEC build-gpu/bin/attention-bench --decode 128 16 8192 2 3 1 > $R/ncu_lite_128_16.txt 2>&1
timeout 100 ncu --profile-from-start off $SEC python3 tmp_exp/peer_ncu.py 128,16,8192 > $R/ncu_cudnn_128_16.txt 2>&1
echo "ncu $((SECONDS-S)) s"
for f in $R/ncu_*.txt; do echo "== $f"; grep -E "^  [a-z_].*\(|Duration|DRAM Throughput|Grid Size|Registers Per|Dynamic Shared|Achieved Occupancy|L1/TEX Hit|L2 Hit Rate|Mem Busy|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|No Eligible" $f | cut -c1-120 | head -16; done
cp tmp_exp/r130.sh tmp_exp/exp_unsplit3.diff $R/
echo "total $((SECONDS-S)) s"
