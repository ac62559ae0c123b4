#!/usr/bin/env bash
# Device run 177 (H200): the decode merge in four thread groups also for 5-16 splits (kN 16) and
# unrolled to 36 for 17-36 splits (LL_MERGE_MODE 1) against the committed dispatch, full
# attention-bench alternated 3 rounds; decode and attention tests with mode 1.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r177; mkdir -p $R/runs
bash tests/gpu/build_gpu.sh attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
for r in 1 2 3; do
  timeout 100 $B > $R/runs/old_$r.jsonl 2>&1
  LL_MERGE_MODE=1 timeout 100 $B > $R/runs/new_$r.jsonl 2>&1
done
echo "bench $((SECONDS-S)) s"
python3 - $R/runs <<'PY'
import json, sys, glob, os, statistics as st, collections
d = collections.defaultdict(list)
W = ("old", "new")
for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl")):
    which = os.path.basename(f).split("_")[0]
    for l in open(f):
        try: j = json.loads(l)
        except Exception: continue
        if j.get("kernel") == "copy": d[(which, "copy")].append(j["GB/s"])
        if j.get("kernel") in ("decode_pdl",): d[(which, j["kernel"], j["D"], j["batch"], j["context"])].append((j["us"], j["of_copy"]))
print("copy", {w: d[(w, "copy")] for w in W})
for k in sorted(k for k in d if k[0] == "new" and k[1] != "copy"):
    print("%-10s D %3d B %2d ctx %5d  " % k[1:] + "  ".join("%s %.2f/%.3f [%s]" % (w, st.median(x[0] for x in d[(w,) + k[1:]]), st.median(x[1] for x in d[(w,) + k[1:]]), " ".join("%.3f" % x[1] for x in d[(w,) + k[1:]])) for w in W))
PY
(cd $R && tar czf runs.tgz runs && rm -rf runs)
LL_MERGE_MODE=1 timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*Attention*:*Graph*:*Decode*' > $R/tests.txt 2>&1
echo "tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $R/tests.txt | tr '\n' ' ') $((SECONDS-S)) s"
grep -E "FAILED  \]" $R/tests.txt | head
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/tests.txt > $R/tests_summary.txt; rm -f $R/tests.txt
cp tmp_exp/r177.sh $R/
echo "total $((SECONDS-S)) s"
