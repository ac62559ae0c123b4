#!/usr/bin/env bash
# Device run 173 (H200): decode K/V runs in model steps (LITE_LLAMA_DECODE_KV_RUNS 0 / 1, 2 rounds
# alternated), greedy generation equal on / off, and the two missed 64 MiB cells in 10 separate
# processes each (is a run's mode set per process?).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r173; mkdir -p $R
git log --oneline -1 > $R/head.txt
bash tests/gpu/build_gpu.sh lite-llama attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
for m in 1 0; do
  LITE_LLAMA_DECODE_KV_RUNS=$m timeout 120 build-gpu/bin/lite-llama generate -m tmp_exp/l1b/config.json --load-format dummy \
    -f tmp_exp/prompts.txt -n 48 --temp 0 --ignore-eos -q -c 8192 > $R/gen_$m.txt 2> $R/gen_$m.err
  echo "gen $m rc=$? $(wc -c < $R/gen_$m.txt) bytes $((SECONDS-S)) s"; head -3 $R/gen_$m.err
done
cmp $R/gen_1.txt $R/gen_0.txt && echo "generation: equal with runs on and off"
for c in "128 1 16384" "64 4 8192"; do
  echo "== $c: $(for i in 1 2 3 4 5 6 7 8 9 10; do build-gpu/bin/attention-bench --decode $c 0 3 1 2>&1 | tail -1 | grep -o '[0-9.]* us' | tr -d ' us'; done | tr '\n' ' ')"
done
mkdir -p $R/e2e
run() { # model cfg batch len tag
  LITE_LLAMA_DECODE_KV_RUNS=$5 timeout 100 build-gpu/bin/lite-llama bench -q -m tests/gpu/configs/$2.json --load-format dummy --batch $3 --prompt-len $4 \
    --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c $(($4 + 128)) --json $R/e2e/${1}_${3}x${4}_$6.json > /dev/null 2>&1
}
for r in 1 2; do
  for m in 1 0; do
    tag=$([ $m = 1 ] && echo on || echo off)_$r
    run l1b llama-3.2-1b 1 8192 $m $tag
    run l1b llama-3.2-1b 1 32768 $m $tag
    run l1b llama-3.2-1b 4 8192 $m $tag
    run q4b qwen3-4b 1 16384 $m $tag
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 - $R/e2e <<'PY'
import json, glob, os, sys, statistics as st, collections
d = collections.defaultdict(list)
for f in glob.glob(sys.argv[1] + "/*.json"):
    cell, which, r = os.path.basename(f)[:-5].rsplit("_", 2)
    for x in json.load(open(f))["results"]:
        d[(cell, which)].append((x["step_ms"]["median"], x["decode_tokens_per_s"]["median"]))
for cell in sorted({k[0] for k in d}):
    print(cell, "  ".join("%s step %s ms" % (w, " ".join("%.3f" % a for a, b in d[(cell, w)])) for w in ("off", "on")))
PY
(cd $R && tar czf e2e.tgz e2e && rm -rf e2e)
cp tmp_exp/r173.sh $R/
echo "total $((SECONDS-S)) s"
