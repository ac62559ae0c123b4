#!/usr/bin/env bash
# Device run 108: tree = the commit named in the data README. Batch-1 decode steps with
# LITE_LLAMA_GEMV1_LOOP=0, =4 and unset (the new default: by the GPU's bandwidth), 2 rounds alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r108; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm,clocks.max.mem --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
M=tests/gpu/configs
run() {  # tag model prompt
  local e=""; [ $1 != auto ] && e="LITE_LLAMA_GEMV1_LOOP=${1#loop}"
  env $e timeout 100 build-gpu/bin/lite-llama bench -q -m $M/$2.json --load-format dummy --batch 1 --prompt-len $3 \
    --gen-len 128 --runs 2 --warmup 1 -c $(($3 + 136)) --max-batched-tokens 32768 --json $R/step_$2_$3_$1_r$r.json > /dev/null 2>&1
}
for r in 1 2; do
  tags="loop0 loop4 auto"; [ $r = 2 ] && tags="auto loop4 loop0"
  for c in "llama-3.2-1b 128" "llama-3.2-1b 32768" "qwen3-4b 128" "qwen3-4b 16384"; do for t in $tags; do
    [ $((SECONDS-S)) -gt 520 ] && break 3
    run $t $c
  done; done
done
echo "steps $((SECONDS-S)) s" | tee -a $R/summary.txt
python3 - $R <<'PY' | tee $R/steps_summary.txt
import json,glob,os,sys,collections,statistics
d=collections.defaultdict(list)
for f in glob.glob(sys.argv[1]+'/step_*.json'):
    parts=os.path.basename(f)[5:-5].split('_'); m,p,t=parts[0],parts[1],parts[2]
    for x in json.load(open(f))['results']: d[(m,int(p),t)].append(x['step_ms']['median'])
print("model prompt | batch-1 step ms loop0 / loop4 / auto (median of rounds) | auto/loop0")
for m,p in sorted({(a,b) for a,b,c in d}):
    v=[statistics.median(d[(m,p,t)]) if d[(m,p,t)] else float('nan') for t in ('loop0','loop4','auto')]
    print(f"{m:13} {p:6} | {v[0]:.3f} {v[1]:.3f} {v[2]:.3f} | {v[2]/v[0]:.3f}   {[round(x,3) for x in d[(m,p,'loop0')]]} {[round(x,3) for x in d[(m,p,'auto')]]}")
PY
(cd $R && tar -czf logs.tgz step_* build.txt && rm -f step_* build.txt)
cp tmp_exp/r108.sh $R/
