#!/usr/bin/env bash
# Device run 178 (H200): model steps with the merge dispatch of r177 (LL_MERGE_MODE 1) against the
# committed one, 2 rounds alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r178; mkdir -p $R/e2e
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
run() {
  LL_MERGE_MODE=$5 timeout 100 build-gpu/bin/lite-llama bench -q -m tests/gpu/configs/$2.json --load-format dummy --batch $3 --prompt-len $4 \
    --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c $(($4 + 128)) --json $R/e2e/${1}_${3}x${4}_$6.json > /dev/null 2>&1
}
for r in 1 2; do
  for m in 0 1; do
    tag=$([ $m = 1 ] && echo new || echo old)_$r
    run l1b llama-3.2-1b 4 8192 $m $tag
    run l1b llama-3.2-1b 16 2048 $m $tag
    run q4b qwen3-4b 1 16384 $m $tag
    run q4b qwen3-4b 4 4096 $m $tag
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 - $R/e2e <<'PY'
import json, glob, os, sys, statistics as st, collections
d = collections.defaultdict(list)
for f in glob.glob(sys.argv[1] + "/*.json"):
    cell, which, r = os.path.basename(f)[:-5].rsplit("_", 2)
    for x in json.load(open(f))["results"]:
        d[(cell, which)].append(x["step_ms"]["median"])
for cell in sorted({k[0] for k in d}):
    print(cell, "  ".join("%s step %s" % (w, " ".join("%.3f" % a for a in d[(cell, w)])) for w in ("old", "new")))
PY
(cd $R && tar czf e2e.tgz e2e && rm -rf e2e)
cp tmp_exp/r178.sh $R/
echo "total $((SECONDS-S)) s"
