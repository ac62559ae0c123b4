#!/usr/bin/env bash
# Device run 127 (H200): decode grid sweep. attention-bench --decode D B CTX SPLITS STAGES PDL=1;
# splits 1 runs two stages, D 128 always three (launcher). Two rounds, the second in reverse order.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r127; mkdir -p $R
[ -x build-gpu/bin/attention-bench ] || bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
cases=()
for ctx in 8192 32768; do
  for c in "64 64 1 2" "64 64 2 3" "64 64 3 3" "64 64 4 3" \
           "64 32 1 2" "64 32 2 3" "64 32 2 4" \
           "64 16 3 4" "64 16 4 3" \
           "64 4 12 4" "64 4 16 3" \
           "64 1 49 4" "64 1 66 3" \
           "128 64 3 3" "128 64 1 2" "128 64 2 3" "128 64 4 3" \
           "128 32 1 2" "128 32 2 3" \
           "128 16 2 3" "128 16 1 2" \
           "128 4 8 3" "128 1 33 3"; do
    set -- $c; cases+=("$1 $2 $ctx $3 $4 1")
  done
done
for round in 1 2; do
  if [ $round = 1 ]; then order=("${cases[@]}"); else order=(); for ((i=${#cases[@]}-1;i>=0;i--)); do order+=("${cases[$i]}"); done; fi
  for c in "${order[@]}"; do
    echo "r$round $(timeout 60 build-gpu/bin/attention-bench --decode $c 2>&1 | tail -1)" >> $R/sweep.txt
  done
  echo "round $round $((SECONDS-S)) s"
done
python3 - $R/sweep.txt <<'PY'
import re, sys, collections
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.search(r"decode D (\d+) batch (\d+) context (\d+) splits (\d+) stages (\d+) pdl \d max_carveout \d: ([\d.]+) us, ([\d.]+) GB/s", line)
    if m: d[m.groups()[:5]].append((float(m.group(6)), float(m.group(7))))
for k, v in sorted(d.items(), key=lambda kv: tuple(map(int, kv[0]))):
    print("D %s B %s ctx %s splits %s st %s: us %s GB/s %s" % (*k, " / ".join(str(x[0]) for x in v), " / ".join(str(x[1]) for x in v)))
PY
cp tmp_exp/r127.sh $R/
echo "total $((SECONDS-S)) s"
