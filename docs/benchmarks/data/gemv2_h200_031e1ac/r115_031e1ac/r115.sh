#!/usr/bin/env bash
# Device run 115: tree = see README. Every kernel test with the 2-token default, then decode steps of
# four models (prompt 128, batch 1/2/4/8) with the default (gemv_max_tokens -1 = 2 here) against
# LITE_LLAMA_GEMV_MAX=1 (cuBLASLt from 2 tokens), alternated, $ROUNDS rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r115; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt
[ -x build-gpu/bin/lite-llama ] || bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
timeout 240 build-gpu/bin/test_cuda_kernels > $R/tests.txt 2>&1
echo "tests rc $? $((SECONDS-S)) s: $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $R/tests.txt | tr '\n' ' ')" | tee -a $R/summary.txt
grep -E "^\[  FAILED|^\[  SKIPPED" $R/tests.txt | head -20
for r in $(seq 1 ${ROUNDS:-2}); do
  for m in $MODELS; do
    for g in -1 1; do
      LITE_LLAMA_GEMV_MAX=$g timeout 100 build-gpu/bin/lite-llama bench -m tests/gpu/configs/$m.json --load-format dummy \
        --batch 1,2,4,8 --runs 3 --gen-len 128 -q --json $R/${m}_g${g}_r$r.json > /dev/null 2>$R/${m}_g${g}_r$r.err
    done
  done
  echo "round $r $((SECONDS-S)) s" | tee -a $R/summary.txt
done
python3 - $R <<'PY' | tee $R/steps.txt
import json,glob,sys,collections,statistics as st
d=collections.defaultdict(list); t=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/*_g*_r*.json')):
    n=f.split('/')[-1][:-5]; m,g,r=n.rsplit('_',2)
    for res in json.load(open(f))['results']:
        d[(m,res['batch'],g)].append(res['step_ms']['median']); t[(m,res['batch'],g)].append(res['ttft_ms']['median'])
for (m,b,g),v in sorted(d.items()):
    print(m,'batch',b,g,'step ms',[round(x,4) for x in v],'median',round(st.median(v),4),'ttft ms median',round(st.median(t[(m,b,g)]),3))
PY
(cd $R && tar -czf runs.tgz *.json *.err && rm -f *.json *.err)
cp tmp_exp/r115.sh $R/
