#!/usr/bin/env bash
# Device run 155 (H200): the full attention-bench of HEAD (build-base) and of the working tree (the
# split holding the new key starts before the PDL wait), alternated 5 rounds: each run's decode
# tables against its own copy.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r155; mkdir -p $R
git diff HEAD > $R/diff.txt
bash tests/gpu/device_setup.sh >/dev/null 2>&1 || true
( cmake -S tmp_exp/base_src -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
    -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > $R/base_cmake.txt 2>&1 &&
  cmake --build build-base -j 8 --target attention-bench > $R/base_build.txt 2>&1 ) &
BP=$!
bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
wait $BP || { tail -20 $R/base_build.txt; exit 1; }
echo "builds $((SECONDS-S)) s"
mkdir -p $R/runs
for r in 1 2 3 4 5; do
  for which in base new; do
    bin=build-gpu/bin/attention-bench; [ $which = base ] && bin=build-base/bin/attention-bench
    timeout 100 $bin > $R/runs/${which}_$r.jsonl 2>&1
  done
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
        if j.get("kernel") == "decode_pdl": d[(which, j["D"], j["batch"], j["context"])].append((j["us"], j["of_copy"]))
print("copy GB/s base %s new %s" % (d[("base", "copy")], d[("new", "copy")]))
for k in sorted(k for k in d if k[0] == "base" and k[1] != "copy"):
    n = ("new",) + k[1:]
    b = sorted(d[k]); w = sorted(d[n])
    print("D %3d B %2d ctx %5d  us base %s new %s | of_copy median %.3f -> %.3f" % (k[1], k[2], k[3],
          [x[0] for x in b], [x[0] for x in w], st.median(x[1] for x in b), st.median(x[1] for x in w)))
PY
(cd $R && tar czf runs.tgz runs && rm -rf runs)
cp tmp_exp/r155.sh $R/
echo "total $((SECONDS-S)) s"
