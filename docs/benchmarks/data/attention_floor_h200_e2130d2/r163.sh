#!/usr/bin/env bash
# Device run 163 (H200): tiles requested before the PDL wait in split decode attention (LL_PRE 1, the
# committed kernel; 2; 3 = the whole ring at four stages): the full attention-bench alternated 3
# rounds, the decode tests, and steps (Llama-3.2-1B 128 / 8k / 32k, Qwen3-4B 16k) alternated 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r163; mkdir -p $R
git diff HEAD > $R/diff.txt
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
mkdir -p $R/runs
for r in 1 2 3; do
  for p in 1 2 3; do LL_PRE=$p timeout 100 $B > $R/runs/p${p}_$r.jsonl 2>&1; done
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
print("copy", {w: d[(w, "copy")] for w in ("p1", "p2", "p3")})
for k in sorted(k for k in d if k[0] == "p1" and k[1] != "copy"):
    out = []
    for w in ("p1", "p2", "p3"):
        v = d[(w,) + k[1:]]
        out.append("%s %.2f/%.3f" % (w, st.median(x[0] for x in v), st.median(x[1] for x in v)))
    print("D %3d B %2d ctx %5d  %s" % (k[1], k[2], k[3], "  ".join(out)))
PY
(cd $R && tar czf runs.tgz runs && rm -rf runs)
for p in 2 3; do
  LL_PRE=$p timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*Decode*:*Attention*:*Graph*' > $R/tests_p$p.txt 2>&1
  echo "tests pre $p rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $R/tests_p$p.txt | tr '\n' ' ')"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/tests_p$p.txt > $R/tests_p${p}_summary.txt; rm -f $R/tests_p$p.txt
done
mkdir -p $R/e2e
for r in 1 2; do
  for p in 1 2 3; do
    for len in 128 8192 32768; do
      LL_PRE=$p timeout 100 build-gpu/bin/lite-llama bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1 --prompt-len $len \
        --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c $((len + 128)) --json $R/e2e/l1b${len}_p${p}_$r.json > /dev/null 2>&1
    done
    LL_PRE=$p timeout 100 build-gpu/bin/lite-llama bench -q -m tests/gpu/configs/qwen3-4b.json --load-format dummy --batch 1 --prompt-len 16384 \
        --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c 16512 --json $R/e2e/q4b16k_p${p}_$r.json > /dev/null 2>&1
  done
done
python3 tests/gpu/ab_summary.py $R/e2e | sort
(cd $R && tar czf e2e.tgz e2e && rm -rf e2e)
cp tmp_exp/r163.sh $R/
echo "total $((SECONDS-S)) s"
