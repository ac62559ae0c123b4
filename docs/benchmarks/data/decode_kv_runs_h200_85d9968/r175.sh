#!/usr/bin/env bash
# Device run 175 (H200): attention-bench with each pool's K and V in one block and a cell's pools in
# one block, pool after pool (the engine's KV layout), against K and V in separate allocations
# (LL_BENCH_SEPARATE_KV, the layout before), full bench alternated 3 rounds; K/V runs on.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r175; mkdir -p $R/runs
bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
for r in 1 2 3; do
  LL_BENCH_SEPARATE_KV=1 timeout 100 $B > $R/runs/sep_$r.jsonl 2>&1
  timeout 100 $B > $R/runs/block_$r.jsonl 2>&1
done
echo "bench $((SECONDS-S)) s"
python3 - $R/runs <<'PY'
import json, sys, glob, os, statistics as st, collections
d = collections.defaultdict(list)
W = ("sep", "block")
for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl")):
    which = os.path.basename(f).split("_")[0]
    for l in open(f):
        try: j = json.loads(l)
        except Exception: continue
        if j.get("kernel") == "copy": d[(which, "copy")].append(j["GB/s"])
        if j.get("kernel") in ("decode_pdl", "decode"): d[(which, j["kernel"], j["D"], j["batch"], j["context"])].append((j["us"], j["of_copy"]))
        if j.get("kernel") in ("prefill",): d[(which, "prefill", j["D"], 1, j["tokens"])].append((j["ms"], j["of_gemm_peak"]))
print("copy", {w: d[(w, "copy")] for w in W})
for k in sorted(k for k in d if k[0] == "block" and k[1] != "copy"):
    print("%-10s D %3d B %2d ctx %5d  " % k[1:] + "  ".join("%s %.2f/%.3f [%s]" % (w, st.median(x[0] for x in d[(w,) + k[1:]]), st.median(x[1] for x in d[(w,) + k[1:]]), " ".join("%.3f" % x[1] for x in d[(w,) + k[1:]])) for w in W))
PY
(cd $R && tar czf runs.tgz runs && rm -rf runs)
for c in "128 1 16384" "64 4 8192" "128 1 32768" "128 1 8192"; do
  echo "single $c: $(for i in 1 2 3; do $B --decode $c 0 3 1 2>&1 | tail -1 | grep -o '[0-9.]* us' | tr -d ' us'; done | tr '\n' ' ')"
done
cp tmp_exp/r175.sh $R/
echo "total $((SECONDS-S)) s"
