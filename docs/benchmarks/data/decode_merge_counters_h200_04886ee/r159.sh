#!/usr/bin/env bash
# Device run 159 (H200): merge blocks spin on per-(sequence, query head) counters that split blocks
# release (LL_COUNTS), optionally with the split's trigger at its start (LL_EARLY), against the PDL wait.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r159; mkdir -p $R
git diff HEAD > $R/diff.txt
bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
for c in "64 1 8192 4" "64 1 32768 4" "128 1 16384 3" "64 4 8192 3" "64 16 8192 3" "128 64 8192 3" "64 3 5000 3"; do
  set -- $c
  for early in "" 1; do
    LL_CHECK=1 LL_COUNTS=1 LL_EARLY=$early timeout 30 $B --decode $1 $2 $3 0 $4 1 2>&1 | grep check
    LL_CHECK=1 LL_COUNTS=1 LL_EARLY=$early timeout 30 $B --decode $1 $2 $3 0 $4 0 2>&1 | grep check
  done
done > $R/check.txt
cat $R/check.txt | grep -v '"differ": 0}' | head
echo "checks $(wc -l < $R/check.txt) $((SECONDS-S)) s"
mkdir -p $R/runs
for r in 1 2 3; do
  timeout 100 $B > $R/runs/base_$r.jsonl 2>&1
  LL_COUNTS=1 timeout 100 $B > $R/runs/new_$r.jsonl 2>&1
  LL_COUNTS=1 LL_EARLY=1 timeout 100 $B > $R/runs/early_$r.jsonl 2>&1
done
echo "runs $((SECONDS-S)) s"
python3 - $R/runs <<'PY'
import json, sys, glob, os, statistics as st, collections
d = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl")):
    which = os.path.basename(f).split("_")[0]
    for l in open(f):
        try: j = json.loads(l)
        except Exception: continue
        if j.get("kernel") == "copy": d[(which, "copy")].append(j["GB/s"])
        if j.get("kernel") in ("decode_pdl", "decode"): d[(which, j["kernel"], j["D"], j["batch"], j["context"])].append((j["us"], j["of_copy"]))
print("copy GB/s", {w: d[(w, "copy")] for w in ("base", "new", "early")})
for k in sorted(k for k in d if k[0] == "base" and k[1] != "copy"):
    out = []
    for w in ("base", "new", "early"):
        v = sorted(d[(w,) + k[1:]])
        out.append("%s %.2f/%.3f" % (w, st.median(x[0] for x in v), st.median(x[1] for x in v)))
    print("%-10s D %3d B %2d ctx %5d  %s" % (k[1], k[2], k[3], k[4], "  ".join(out)))
PY
(cd $R && tar czf runs.tgz runs && rm -rf runs)
cp tmp_exp/r159.sh $R/
echo "total $((SECONDS-S)) s"
