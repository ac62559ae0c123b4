#!/usr/bin/env bash
# Device run 156 (H200): ncu stall reasons of the decode merge and split kernels at HEAD (D 64
# batch 1 8k and 32k, PDL, the engine's stages), caches not flushed between kernels.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r156; mkdir -p $R
git log --oneline -1 > $R/commit.txt 2>/dev/null; git diff HEAD --stat > $R/diff_stat.txt
bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
for c in "64 1 8192 0 4 1" "64 1 32768 0 4 1"; do
  n=$(echo $c | cut -d' ' -f1-3 | tr ' ' _)
  for k in merge_kernel decode_kernel; do
    timeout 200 $NCU --kernel-name regex:$k --launch-skip 20 --launch-count 2 --cache-control none \
      --section WarpStateStats --section LaunchStats --section SpeedOfLight \
      --metrics 'regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,gpu__time_duration.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum' \
      build-gpu/bin/attention-bench --decode $c > $R/ncu_${k}_$n.txt 2>&1
    echo "== $k $c rc=$? $((SECONDS-S)) s"
    grep -E "gpu__time_duration|hit_rate|inst_executed.sum|Warp Cycles Per Issued|Registers Per" $R/ncu_${k}_$n.txt | head -8
    grep -E "issue_stalled" $R/ncu_${k}_$n.txt | awk '$NF+0 > 0.05' | head -30
  done
done
cp tmp_exp/r156.sh $R/
echo "total $((SECONDS-S)) s"
