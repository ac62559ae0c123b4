#!/usr/bin/env bash
# Device run 131 (H200): which load of the decode kernel wastes sector bytes (ncu: 24.4 of 32
# bytes a sector used, 34% L2 hits) - per-SASS source counters, D 128 batch 16 8k and D 64 batch 64 8k.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r131; mkdir -p $R
bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
for c in "128 16 8192 2 3 1" "64 64 8192 1 3 1"; do
  set -- $c; n=d$1_b$2
  timeout 100 ncu --section SourceCounters --section MemoryWorkloadAnalysis_Tables --import-source yes -k regex:decode_kernel \
    --launch-skip 8 -c 1 -o $R/$n build-gpu/bin/attention-bench --decode $c > $R/$n.log 2>&1
  ncu -i $R/$n.ncu-rep --page details > $R/details_$n.txt 2>&1
  ncu -i $R/$n.ncu-rep --page source --csv --print-source sass > $R/sass_$n.csv 2>&1
  echo "ncu $n $((SECONDS-S)) s"
done
python3 - $R <<'PY'
import csv, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/sass_*.csv")):
    rows = list(csv.reader(open(f)))
    hdr = next((i for i, r in enumerate(rows) if "Source" in r and any("Sectors" in c for c in r)), None)
    if hdr is None:
        print(f, "no header", rows[:2]); continue
    h = rows[hdr]
    cols = [i for i, c in enumerate(h) if "Sector" in c or "Request" in c or "L2" in c]
    src = h.index("Source")
    print("==", f, [h[i] for i in cols])
    for r in rows[hdr + 1:]:
        if len(r) <= max(cols): continue
        vals = [r[i] for i in cols]
        if any(v not in ("", "0") for v in vals) and ("LDG" in r[src] or "STG" in r[src] or "LDGSTS" in r[src] or "ST" in r[src][:4]):
            print(r[src][:70], vals)
PY
grep -A12 "Uncoalesced\|uncoalesced" $R/details_*.txt | cut -c1-160 | head -40
rm -f $R/*.ncu-rep
cp tmp_exp/r131.sh $R/
echo "total $((SECONDS-S)) s"
