#!/usr/bin/env bash
# Device run 112: tree = see README. The GEMV of up to 4 tokens: kernel tests, then decode steps
# (bench, prompt 128, batch 1/2/3/4/8) with LITE_LLAMA_GEMV_MAX=1 (cuBLASLt from 2 tokens), 2 and 4,
# alternated, $ROUNDS rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r112; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt
[ -x build-gpu/bin/lite-llama ] || bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
timeout 150 build-gpu/bin/test_cuda_kernels --gtest_filter="${TESTS:-*Linear*:*Gemv*:*Graph*:*QkvRope*}" > $R/tests.txt 2>&1
echo "tests rc $? $((SECONDS-S)) s: $(grep -E '^\[  (PASSED|FAILED)' $R/tests.txt | tr '\n' ' ')" | tee -a $R/summary.txt
for r in $(seq 1 ${ROUNDS:-2}); do
  for m in $MODELS; do
    for g in 1 2 4; do
      LITE_LLAMA_GEMV_MAX=$g timeout 100 build-gpu/bin/lite-llama bench -m tests/gpu/configs/$m.json --load-format dummy \
        --batch 1,2,3,4,8 --runs 3 --gen-len 128 -q --json $R/${m}_g${g}_r$r.json > /dev/null 2>$R/${m}_g${g}_r$r.err
    done
  done
  echo "round $r $((SECONDS-S)) s" | tee -a $R/summary.txt
done
python3 - $R <<'PY' | tee $R/steps.txt
import json,glob,sys,collections,statistics as st
d=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/*_g*_r*.json')):
    n=f.split('/')[-1][:-5]; m,g,r=n.rsplit('_',2)
    for res in json.load(open(f))['results']:
        d[(m,res['batch'],g)].append(res['step_ms']['median'] if isinstance(res.get('step_ms'),dict) else res.get('step_ms'))
for (m,b,g),v in sorted(d.items()):
    print(m,'batch',b,g,'step ms',v,'median',round(st.median(v),4))
PY
(cd $R && tar -czf runs.tgz *.json *.err && rm -f *.json *.err)
cp tmp_exp/r112.sh $R/
