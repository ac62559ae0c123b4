#!/usr/bin/env bash
# Device run 172 (H200): decode K/V runs (CudaTuning::decode_kv_runs): all CUDA kernel tests,
# greedy generation equal with runs on and off (random weights, real tokenizer, 4 prompts of which
# one repeats a cached prefix), and the full attention-bench alternated on / off 3 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r172; mkdir -p $R
git log --oneline -1 > $R/head.txt; git diff HEAD --stat > $R/diff_stat.txt
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
mkdir -p $R/runs
for r in 1 2 3; do
  timeout 100 $B > $R/runs/on_$r.jsonl 2>&1
  LITE_LLAMA_DECODE_KV_RUNS=0 timeout 100 $B > $R/runs/off_$r.jsonl 2>&1
done
echo "bench $((SECONDS-S)) s"
python3 - $R/runs <<'PY'
import json, sys, glob, os, statistics as st, collections
d = collections.defaultdict(list)
W = ("off", "on")
for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl")):
    which = os.path.basename(f).split("_")[0]
    for l in open(f):
        try: j = json.loads(l)
        except Exception: continue
        if j.get("kernel") == "copy": d[(which, "copy")].append(j["GB/s"])
        if j.get("kernel") in ("decode_pdl", "decode"): d[(which, j["kernel"], j["D"], j["batch"], j["context"])].append((j["us"], j["of_copy"]))
print("copy", {w: d[(w, "copy")] for w in W})
for k in sorted(k for k in d if k[0] == "on" and k[1] != "copy"):
    print("%-10s D %3d B %2d ctx %5d  " % k[1:] + "  ".join("%s %.2f/%.3f [%s]" % (w, st.median(x[0] for x in d[(w,) + k[1:]]), st.median(x[1] for x in d[(w,) + k[1:]]), " ".join("%.3f" % x[1] for x in d[(w,) + k[1:]])) for w in W))
PY
(cd $R && tar czf runs.tgz runs && rm -rf runs)
for m in 1 0; do
  LITE_LLAMA_DECODE_KV_RUNS=$m timeout 120 build-gpu/bin/lite-llama generate -m tmp_exp/l1b/config.json --load-format dummy \
    -f tmp_exp/prompts.txt -n 48 --temp 0 --ignore-eos -q -c 8192 > $R/gen_$m.txt 2> $R/gen_$m.err
  echo "gen $m rc=$? $(wc -c < $R/gen_$m.txt) bytes $((SECONDS-S)) s"
done
cmp $R/gen_1.txt $R/gen_0.txt && echo "generation: equal with runs on and off"
head -c 600 $R/gen_1.txt; echo
timeout $((560 - (SECONDS - S))) build-gpu/bin/test_cuda_kernels > $R/kernels.txt 2>&1
echo "kernels rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|tests, listed below' $R/kernels.txt | tr '\n' ' ') $((SECONDS-S)) s"
grep -E "FAILED  \]" $R/kernels.txt | head
grep -A12 "DecodeReadsContiguousRuns" $R/kernels.txt | grep -E "OK|FAILED|Failure|error" | head
grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|SKIPPED \]|^\[       OK \].*Runs" $R/kernels.txt > $R/kernels_summary.txt; rm -f $R/kernels.txt
cp tmp_exp/r172.sh $R/
echo "total $((SECONDS-S)) s"
