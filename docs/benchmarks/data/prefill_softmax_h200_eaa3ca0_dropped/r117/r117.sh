#!/usr/bin/env bash
# Device run 117 (H200): where the wgmma prefill kernel's time goes, per SASS instruction (stall
# samples), D 64 (three warpgroups) and D 128 at 16k tokens; and the prefill sweep as it is.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r117; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
for D in 64 128; do for T in 8192 16384 32768; do
  build-gpu/bin/attention-bench --prefill $D $T | tee -a $R/prefill.jsonl | cut -c1-400
done; done
for D in 64 128; do
  timeout 150 ncu --set full --import-source yes -k regex:prefill_sm90 -c 1 -o $R/ncu_d$D build-gpu/bin/attention-bench --prefill $D 16384 > $R/ncu_d$D.log 2>&1
  ncu -i $R/ncu_d$D.ncu-rep --page details > $R/details_d$D.txt 2>&1
  ncu -i $R/ncu_d$D.ncu-rep --page raw --csv > $R/raw_d$D.csv 2>&1
  ncu -i $R/ncu_d$D.ncu-rep --page source --csv --print-source sass > $R/sass_d$D.csv 2>&1
  echo "ncu D $D $((SECONDS-S)) s"
done
grep -E "Duration|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|Registers Per|Block Size" $R/details_d*.txt
rm -f $R/*.ncu-rep
cp tmp_exp/r117.sh $R/
cd $OUT && tar czf r117.tgz r117 && rm -rf r117
echo "total $((SECONDS-S)) s"
