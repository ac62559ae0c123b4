#!/usr/bin/env bash
# Device run 166 (H200): the decode merge unrolled to the grid's split bound (kN 16 / 4 where splits
# <= 16 / 4: batch 4 and up) against the committed merge (LL_MERGE64) and eight thread groups at > 16
# splits (LL_MERGE_G8): full attention-bench alternated 3 rounds, decode tests, steps 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r166; mkdir -p $R
PHASE=${1:-bench}
git diff HEAD -- src/backends > $R/diff.txt
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
if [ $PHASE = bench ]; then
B=build-gpu/bin/attention-bench
mkdir -p $R/runs
for r in 1 2 3; do
  timeout 100 $B > $R/runs/new_$r.jsonl 2>&1
  LL_MERGE64=1 timeout 100 $B > $R/runs/old_$r.jsonl 2>&1
  LL_MERGE_G8=1 timeout 100 $B > $R/runs/g8_$r.jsonl 2>&1
done
echo "runs $((SECONDS-S)) s"
python3 - $R/runs <<'PY'
import json, sys, glob, os, statistics as st, collections
d = collections.defaultdict(list)
W = ("old", "new", "g8")
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
for m in new g8; do
  if [ $m = g8 ]; then export LL_MERGE_G8=1; fi
  timeout 240 build-gpu/bin/test_cuda_kernels > $R/tests_$m.txt 2>&1
  echo "tests $m rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $R/tests_$m.txt | tr '\n' ' ')"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/tests_$m.txt > $R/tests_${m}_summary.txt; rm -f $R/tests_$m.txt
  unset LL_MERGE_G8
done
fi
if [ $PHASE = e2e ]; then
mkdir -p $R/e2e
run() { # tag env... 
  local tag=$1; shift
  env "$@" timeout 100 build-gpu/bin/lite-llama bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch $BATCH --prompt-len $LEN \
    --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c $((LEN + 128)) --json $R/e2e/l1b_b${BATCH}_${LEN}_${tag}_$r.json > /dev/null 2>&1
}
for r in 1 2; do
  for c in "1 32768" "4 8192" "16 2048" "64 512"; do
    set -- $c; BATCH=$1; LEN=$2
    run new LL_X=0; run old LL_MERGE64=1; run g8 LL_MERGE_G8=1
  done
  for m in new old; do
    e=LL_X=0; [ $m = old ] && e=LL_MERGE64=1
    env $e timeout 100 build-gpu/bin/lite-llama bench -q -m tests/gpu/configs/qwen3-4b.json --load-format dummy --batch 4 --prompt-len 4096 \
        --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c 4224 --json $R/e2e/q4b_b4_4096_${m}_$r.json > /dev/null 2>&1
  done
done
python3 tests/gpu/ab_summary.py $R/e2e | sort
(cd $R && tar czf e2e.tgz e2e && rm -rf e2e)
fi
cp tmp_exp/r166.sh $R/
echo "total $((SECONDS-S)) s"
