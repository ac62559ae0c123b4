#!/usr/bin/env bash
# Device run 70 (1 x H100): ncu of the wgmma prefill kernel at 579d72d, D 64 and D 128, 16k tokens:
# where its time goes now (stall reasons, pipe use), for the next change.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r70; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
git log --oneline -1 > $R/commit.txt 2>/dev/null
bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
for D in 64 128; do
  timeout 100 ncu --set full --import-source yes -k regex:prefill_sm90 -c 1 -o $R/ncu_d$D build-gpu/bin/attention-bench --prefill $D 16384 > $R/ncu_d$D.log 2>&1
  ncu -i $R/ncu_d$D.ncu-rep --page details > $R/details_d$D.txt 2>&1
  ncu -i $R/ncu_d$D.ncu-rep --page raw --csv > $R/raw_d$D.csv 2>&1
  ncu -i $R/ncu_d$D.ncu-rep --page source --csv --print-source sass > $R/sass_d$D.csv 2>&1
  echo "ncu D $D $((SECONDS-S)) s"
done
gzip -9 $R/sass_d*.csv $R/raw_d*.csv; rm -f $R/*.ncu-rep
grep -E "Duration|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued" $R/details_d*.txt
cp tmp_exp/r70.sh $R/; echo "total $((SECONDS-S)) s"
