#!/usr/bin/env bash
# Device run 168 (H200): split blocks share a long sequence's tiles through a counter
# (CudaTuning::decode_steal, now only grids of <= 4 splits: batch 16) against static splits (LITE_LLAMA_DECODE_STEAL=0): the attention,
# decode and graph tests, then the full attention-bench alternated 3 rounds (phase bench), then
# steps alternated 2 rounds (phase e2e).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r168; mkdir -p $R
PHASE=${1:-bench}
git diff HEAD -- src/backends tools/kernel_bench tests/kernels > $R/diff.txt
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
if [ $PHASE = bench ]; then
timeout 300 build-gpu/bin/test_cuda_kernels --gtest_filter='*Decode*:*Graph*:*Mixed*' > $R/tests.txt 2>&1
echo "tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $R/tests.txt | tr '\n' ' ') $((SECONDS-S)) s"
grep -E "FAILED|Failure|error" $R/tests.txt | head -20
grep -q "^\[  PASSED" $R/tests.txt && ! grep -q "FAILED  \]" $R/tests.txt || exit 1
B=build-gpu/bin/attention-bench
mkdir -p $R/runs
for r in 1 2 3; do
  timeout 100 $B > $R/runs/new_$r.jsonl 2>&1
  LITE_LLAMA_DECODE_STEAL=0 timeout 100 $B > $R/runs/old_$r.jsonl 2>&1
done
echo "runs $((SECONDS-S)) s"
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
        if j.get("kernel") in ("decode_pdl", "decode"): d[(which, j["kernel"], j["D"], j["batch"], j["context"])].append((j["us"], j["of_copy"]))
print("copy", {w: d[(w, "copy")] for w in W})
for k in sorted(k for k in d if k[0] == "new" and k[1] != "copy"):
    out = []
    for w in W:
        v = d[(w,) + k[1:]]
        if v: out.append("%s %.2f/%.3f" % (w, st.median(x[0] for x in v), st.median(x[1] for x in v)))
    print("%-10s D %3d B %2d ctx %5d  %s" % (k[1], k[2], k[3], k[4], "  ".join(out)))
PY
(cd $R && tar czf runs.tgz runs && rm -rf runs)
fi
if [ $PHASE = e2e ]; then
mkdir -p $R/e2e
for r in 1 2; do
  for c in "l1b 16 16384" "l1b 16 4096" "l1b 1 32768" "q4b 16 8192"; do
    set -- $c; M=$1; BATCH=$2; LEN=$3
    cfg=tests/gpu/configs/llama-3.2-1b.json; [ $M = q4b ] && cfg=tests/gpu/configs/qwen3-4b.json
    for m in new old; do
      e=LL_X=0; [ $m = old ] && e=LITE_LLAMA_DECODE_STEAL=0
      env $e timeout 120 build-gpu/bin/lite-llama bench -q -m $cfg --load-format dummy --batch $BATCH --prompt-len $LEN \
        --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c $((LEN + 128)) --json $R/e2e/${M}_b${BATCH}_${LEN}_${m}_$r.json > /dev/null 2>&1
    done
  done
done
python3 tests/gpu/ab_summary.py $R/e2e | sort
(cd $R && tar czf e2e.tgz e2e && rm -rf e2e)
fi
cp tmp_exp/r168.sh $R/
echo "total $((SECONDS-S)) s"
