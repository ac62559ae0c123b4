#!/usr/bin/env bash
# Device run 116: tree = see README. Batch-2 decode steps after long prompts with the 2-token GEMV
# (the default on an H200) against LITE_LLAMA_GEMV_MAX=1 (cuBLASLt), alternated, 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r116; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt
[ -x build-gpu/bin/lite-llama ] || bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
for r in 1 2; do
  for mp in "llama-3.2-1b 8192" "llama-3.2-1b 32768" "qwen3-4b 16384"; do
    set -- $mp
    for g in -1 1; do
      LITE_LLAMA_GEMV_MAX=$g timeout 100 build-gpu/bin/lite-llama bench -m tests/gpu/configs/$1.json --load-format dummy \
        --batch 2 --prompt-len $2 -c $(($2 + 80)) --max-batched-tokens $((2 * $2)) --runs 2 --gen-len 64 -q \
        --json $R/$1_p$2_g${g}_r$r.json > /dev/null 2>$R/$1_p$2_g${g}_r$r.err
    done
  done
  echo "round $r $((SECONDS-S)) s" | tee -a $R/summary.txt
done
python3 - $R <<'PY' | tee $R/steps.txt
import json,glob,sys,collections,statistics as st
d=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/*_g*_r*.json')):
    n=f.split('/')[-1][:-5]; m,p,g,r=n.rsplit('_',3)
    for res in json.load(open(f))['results']:
        d[(m,p,res['batch'],g)].append(res['step_ms']['median'])
for k,v in sorted(d.items()):
    print(*k,'step ms',[round(x,4) for x in v],'median',round(st.median(v),4))
PY
(cd $R && tar -czf runs.tgz *.json *.err && rm -f *.json *.err)
cp tmp_exp/r116.sh $R/
