#!/usr/bin/env bash
# Device run 51 (1 x H100): decode attention with deeper K/V rings (D 64: 6 / 8 / 12 stages, D 128:
# 4 / 5 / 6) and the fewer splits that then fill one wave (2 or 1 blocks an SM), against the
# defaults (D 64: 4 stages, 3 blocks an SM; D 128: 3 stages, 2 blocks), PDL, alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r51; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
for r in 1 2; do
  for ctx in 8192 16384 32768; do
    for c in "4 49" "6 33" "8 16" "12 16" "6 16"; do set -- $c; timeout 20 $B --decode 64 1 $ctx $2 $1 1; done
    for c in "3 33" "4 16" "5 16" "6 16"; do set -- $c; timeout 20 $B --decode 128 1 $ctx $2 $1 1; done
  done
  for c in "4 12" "6 8" "8 4" "12 4"; do set -- $c; timeout 20 $B --decode 64 4 8192 $2 $1 1; done
  for c in "3 8" "4 4" "6 4"; do set -- $c; timeout 20 $B --decode 128 4 8192 $2 $1 1; done
  for c in "4 3" "6 2"; do set -- $c; timeout 20 $B --decode 64 16 8192 $2 $1 1; done
  echo "round $r $((SECONDS-S)) s"
done | tee $R/sweep.txt
cp tmp_exp/r51.sh $R/; echo "total $((SECONDS-S)) s"
