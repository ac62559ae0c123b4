#!/usr/bin/env bash
# Device run 106: tree = commit named in the data README (gemv_tc, off by default). Kernel bench,
# the linear kernel tests, then decode steps with LITE_LLAMA_GEMV_TC_MAX=0 (cuBLASLt) vs 16, 2 rounds alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r106; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels gemv-tc-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
timeout 120 build-gpu/bin/gemv-tc-bench --json $R/gemv_tc_bench.json > $R/gemv_tc_bench.txt 2>&1; echo "bench rc $?" >> $R/summary.txt
cat $R/gemv_tc_bench.txt
timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaLinear*TensorCore*' > $R/tests.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|^\[  FAILED' $R/tests.txt | head -3 | tr '\n' ' ') $((SECONDS-S)) s" | tee -a $R/summary.txt
grep -E "^\[  FAILED|Failure" $R/tests.txt | head -5
M=tests/gpu/configs
for r in 1 2; do
  vs="base small all"; [ $r = 2 ] && vs="all small base"
  for m in llama-3.2-1b qwen3-4b; do for v in $vs; do
    [ $((SECONDS-S)) -gt 500 ] && break 3
    case $v in base) e="LITE_LLAMA_GEMV_TC_MAX=0";; small) e="LITE_LLAMA_GEMV_TC_MAX=16 LITE_LLAMA_GEMV_TC_MAX_ELEMS=8000000";; all) e="LITE_LLAMA_GEMV_TC_MAX=16";; esac
    env $e timeout 120 build-gpu/bin/lite-llama bench -q -m $M/$m.json --load-format dummy --batch 1,2,4,8,16 \
      --prompt-len 128 --gen-len 128 --runs 2 --warmup 1 --json $R/step_${m}_${v}_r$r.json > $R/step_${m}_${v}_r$r.txt 2>&1
  done; done
done
echo "steps $((SECONDS-S)) s" | tee -a $R/summary.txt
python3 - $R <<'PY' | tee $R/steps_summary.txt
import json,glob,os,sys,collections,statistics
d=collections.defaultdict(list)
for f in glob.glob(sys.argv[1]+'/step_*.json'):
    _,m,v,r=os.path.basename(f)[:-5].split('_')
    for x in json.load(open(f))['results']: d[(m,x['batch'],v)].append(x['step_ms']['median'])
print("model batch | step ms base (cuBLASLt) / small (gemv_tc for N x K <= 8M) / all (gemv_tc 2-16 tokens), ratios to base (median of rounds)")
for m,b in sorted({(a,b) for a,b,c in d}):
    c0,c1,c2=[statistics.median(d[(m,b,v)]) for v in ('base','small','all')]
    print(f"{m:13} {b:3} | {c0:.3f} {c1:.3f} {c2:.3f} | {c1/c0:.3f} {c2/c0:.3f}")
PY
(cd $R && tar -czf logs.tgz step_* build.txt tests.txt && rm -f step_* build.txt)
cp tmp_exp/r105.sh $R/
