#!/usr/bin/env bash
# Device run 174 (H200): why the full attention-bench reads the 64 MiB cells slower than single-cell
# processes: (a) the full bench as it is, (b) with every decode cell's K/V carved from one arena
# allocated at start (LL_BENCH_ARENA), alternated 3 rounds, nvidia-smi logged at 100 ms; (c) single
# cells cool and right after 5 s of batch-64 calls; (d) steps with K/V runs on / off, 3 more rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r174; mkdir -p $R/runs
bash tests/gpu/build_gpu.sh lite-llama attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
for r in 1 2 3; do
  echo "full $r $(date +%T.%N)" >> $R/marks.txt; timeout 100 $B > $R/runs/full_$r.jsonl 2>&1
  echo "arena $r $(date +%T.%N)" >> $R/marks.txt; LL_BENCH_ARENA=1 timeout 100 $B > $R/runs/arena_$r.jsonl 2>&1
done
echo "end $(date +%T.%N)" >> $R/marks.txt
echo "bench $((SECONDS-S)) s"
python3 - $R/runs <<'PY'
import json, sys, glob, os, statistics as st, collections
d = collections.defaultdict(list)
W = ("full", "arena")
for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl")):
    which = os.path.basename(f).split("_")[0]
    for l in open(f):
        try: j = json.loads(l)
        except Exception: continue
        if j.get("kernel") == "copy": d[(which, "copy")].append(j["GB/s"])
        if j.get("kernel") == "decode_pdl" and j["batch"] <= 4: d[(which, j["D"], j["batch"], j["context"])].append((j["us"], j["of_copy"]))
print("copy", {w: d[(w, "copy")] for w in W})
for k in sorted(k for k in d if k[0] == "full" and k[1] != "copy"):
    print("pdl D %3d B %2d ctx %5d  " % k[1:] + "  ".join("%s %s" % (w, " ".join("%.1f/%.3f" % x for x in d[(w,) + k[1:]])) for w in W))
PY
for c in "128 1 16384" "64 4 8192"; do
  echo "cool $c: $(for i in 1 2 3; do sleep 2; $B --decode $c 0 3 1 2>&1 | tail -1 | grep -o '[0-9.]* us' | tr -d ' us'; done | tr '\n' ' ')"
  echo "hot  $c: $(for i in 1 2 3; do for j in 1 2 3; do $B --decode 64 64 32768 0 3 1 > /dev/null 2>&1; done; $B --decode $c 0 3 1 2>&1 | tail -1 | grep -o '[0-9.]* us' | tr -d ' us'; done | tr '\n' ' ')"
done
kill $SMI
python3 - $R/smi.csv <<'PY'
import sys, collections
rows=[l.strip().split(", ") for l in open(sys.argv[1])][1:]
clk=[int(r[1].split()[0]) for r in rows if len(r)>4]; pw=[float(r[3].split()[0]) for r in rows if len(r)>4]
print("smi samples", len(rows), "sm MHz min/median", min(clk), sorted(clk)[len(clk)//2], "power max", max(pw))
print("samples below 1900 MHz:", sum(c<1900 for c in clk))
PY
mkdir -p $R/e2e
run() {
  LITE_LLAMA_DECODE_KV_RUNS=$5 timeout 100 build-gpu/bin/lite-llama bench -q -m tests/gpu/configs/$2.json --load-format dummy --batch $3 --prompt-len $4 \
    --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c $(($4 + 128)) --json $R/e2e/${1}_${3}x${4}_$6.json > /dev/null 2>&1
}
for r in 1 2 3; do
  for m in 0 1; do
    tag=$([ $m = 1 ] && echo on || echo off)_$r
    run l1b llama-3.2-1b 4 8192 $m $tag
    run l1b llama-3.2-1b 1 32768 $m $tag
    run q4b qwen3-4b 1 16384 $m $tag
  done
done
python3 - $R/e2e <<'PY'
import json, glob, os, sys, statistics as st, collections
d = collections.defaultdict(list)
for f in glob.glob(sys.argv[1] + "/*.json"):
    cell, which, r = os.path.basename(f)[:-5].rsplit("_", 2)
    for x in json.load(open(f))["results"]:
        d[(cell, which)].append(x["step_ms"]["median"])
for cell in sorted({k[0] for k in d}):
    print(cell, "  ".join("%s step %s (median %.3f)" % (w, " ".join("%.3f" % a for a in d[(cell, w)]), st.median(d[(cell, w)])) for w in ("off", "on")))
PY
(cd $R && tar czf e2e.tgz e2e runs && rm -rf e2e runs)
cp tmp_exp/r174.sh $R/
echo "total $((SECONDS-S)) s"
