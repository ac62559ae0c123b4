#!/usr/bin/env bash
# Device run 170 (H200): decode with no slot-id trip (bench slots are contiguous: an upper bound)
# and 2 tiles before the PDL wait. LL_DMODE 0 now, 1 direct, 2 direct + 2 tiles, 3 slots + 2 tiles.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r170; mkdir -p $R
git diff HEAD -- src/backends > $R/diff.txt
bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
for r in 1 2 3; do
  for c in "64 1 8192 4" "64 1 16384 4" "64 1 32768 4" "64 4 8192 3" "128 1 8192 3" "128 1 16384 3" "128 1 32768 3"; do
    set -- $c
    for m in 0 1 2 3; do
      echo "m$m $(LL_DMODE=$m timeout 30 $B --decode $1 $2 $3 0 $4 1 2>&1 | tail -1)" >> $R/cells.txt
    done
  done
done
echo "runs $((SECONDS-S)) s"
python3 - $R/cells.txt <<'PY'
import sys, re, collections, statistics as st
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = re.match(r"m(\d) decode D (\d+) batch (\d+) context (\d+).*: ([\d.]+) us", l)
    if m: d[(int(m[2]), int(m[3]), int(m[4]))].append((int(m[1]), float(m[5])))
for k in sorted(d):
    print("D %3d B %d ctx %5d " % k, "  ".join("m%d %.2f" % (mm, st.median(u for x, u in d[k] if x == mm)) for mm in range(4)))
PY
cp tmp_exp/r170.sh $R/
echo "total $((SECONDS-S)) s"
