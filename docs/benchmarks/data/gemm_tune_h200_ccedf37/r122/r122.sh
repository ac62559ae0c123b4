#!/usr/bin/env bash
# Device run 122 (H200): cuBLASLt algorithms timed at load (CudaTuning::gemm_tune) against the
# heuristic's first (LITE_LLAMA_GEMM_TUNE=0), one binary, alternated, 2 rounds; the CudaLinear and
# graph kernel tests first.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r122; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 120 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaLinear*:*CudaGraph*' > $R/tests.txt 2>&1
echo "tests: $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST|Failure' $R/tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s"
for r in 1 2; do
  for m in qwen3-4b llama-3.2-3b llama-3.2-1b; do
    for t in 1 0; do
      LITE_LLAMA_GEMM_TUNE=$t timeout 60 build-gpu/bin/lite-llama bench -m tests/gpu/configs/$m.json --load-format dummy \
        --batch 4,8,16,64 --prompt-len 128 --gen-len 128 --runs 2 --json $R/${m}_t${t}_r$r.json > $R/${m}_t${t}_r$r.txt 2>&1
    done
  done
  echo "round $r $((SECONDS-S)) s"
done
grep -h "projections:" $R/*_t1_r1.txt
python3 - $R <<'PY' | tee $R/steps.txt
import json,glob,sys,collections,statistics as st
d=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/*_t*_r*.json')):
    n=f.split('/')[-1][:-5]; m,t,r=n.rsplit('_',2)
    for res in json.load(open(f))['results']:
        d[(m,res['batch'],t)].append(res['step_ms']['median'])
for (m,b,t),v in sorted(d.items()):
    if t=='t1':
        base=st.median(d[(m,b,'t0')]); new=st.median(v)
        print(f'{m:14s} batch {b:3d}: heuristic {base:.4f} ms, tuned {new:.4f} ms ({new/base-1:+.1%})  runs {[round(x,4) for x in d[(m,b,"t0")]]} {[round(x,4) for x in v]}')
PY
cp tmp_exp/r122.sh $R/
cd $OUT && tar czf r122.tgz r122 && rm -rf r122
echo "total $((SECONDS-S)) s"
