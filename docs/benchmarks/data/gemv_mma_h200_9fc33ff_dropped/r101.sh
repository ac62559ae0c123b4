#!/usr/bin/env bash
# Device run 101: tree 9fc33ff + the tensor-core GEMV for 2-16 tokens (gemv_mma, uncommitted).
# The linear and graph kernel tests; then decode steps at batch 1-16 with LITE_LLAMA_GEMV_MMA_MAX=0
# (cuBLASLt, as before) against 16, one binary, alternated; round 1 with --profile (the GEMM
# family's ms a step); then a 16-token turn after 8,192 cached tokens (serve --log-timing -v).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r101; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
timeout 150 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaLinear*:*Graph*' > $R/tests.txt 2>&1
rc=$?
echo "tests rc $rc $(grep -E '^\[  PASSED|FAILED  \]' $R/tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s" | tee -a $R/summary.txt
grep -B2 -A8 "Failure" $R/tests.txt | head -40
[ $rc = 0 ] || exit 1
M=tests/gpu/configs
for r in 1 2; do for m in llama-3.2-1b qwen3-4b; do
  vs="0 16"; [ $r = 2 ] && vs="16 0"
  for v in $vs; do
    [ $((SECONDS-S)) -gt 400 ] && break 3
    p=""; [ $r = 1 ] && p="--profile"
    LITE_LLAMA_GEMV_MMA_MAX=$v timeout 90 build-gpu/bin/lite-llama bench -m $M/$m.json --load-format dummy --batch 1,2,4,8,16 \
      --prompt-len 128 --gen-len 128 --runs 2 $p --json $R/bench_${m}_${v}_r$r.json > $R/bench_${m}_${v}_r$r.txt 2>&1
    echo "bench $m $v r$r $((SECONDS-S)) s" >> $R/summary.txt
  done
done; done
for v in 0 16; do
  [ $((SECONDS-S)) -gt 440 ] && break
  LITE_LLAMA_GEMV_MMA_MAX=$v build-gpu/bin/lite-llama serve -m $M/llama-3.2-1b.json --load-format dummy -c 16384 --port 1840$v --log-timing -v > $R/server_$v.log 2>&1 &
  pid=$!
  for i in $(seq 1 120); do curl -sf -m 1 localhost:1840$v/v1/models > /dev/null && break; sleep 0.5; done
  timeout 40 python3 tmp_exp/turn_client.py 1840$v g$v 8192 16 6 > $R/turns_$v.jsonl 2>&1
  kill $pid; wait $pid 2>/dev/null
done
python3 - $R <<'PY' | tee $R/bench_summary.txt
import json,glob,os,sys,re,statistics,collections
R=sys.argv[1]; d=collections.defaultdict(list); prof={}
for f in glob.glob(os.path.join(R,'bench_*.json')):
    _,m,v,r=os.path.basename(f)[:-5].split('_')
    try: j=json.load(open(f))
    except Exception as e: print('bad',f,e); continue
    for res in j.get('results',[]):
        b=res.get('batch'); st=res.get('step_ms') or res.get('decode_step_ms')
        if isinstance(st,dict): st=st.get('median')
        d[(m,b,v)].append(st)
        p=res.get('profile')
        if p: prof[(m,b,v)]=p
print("model batch | step ms cuBLASLt (0) | gemv_mma (16) | ratio")
for m,b in sorted({(k[0],k[1]) for k in d}):
    a=[x for x in d[(m,b,'0')] if x]; c=[x for x in d[(m,b,'16')] if x]
    if a and c: print(f"{m:13} {b:3} | {statistics.median(a):.3f} {a} | {statistics.median(c):.3f} {c} | {statistics.median(c)/statistics.median(a):.3f}")
for k in sorted(prof): print('profile',k,json.dumps(prof[k])[:400])
for v in ('0','16'):
    steps=[]
    f=os.path.join(R,f'server_{v}.log')
    if os.path.exists(f):
        for l in open(f):
            mm=re.search(r'step: 16 tokens.*run (\d+) us',l)
            if mm: steps.append(int(mm.group(1)))
    print('16-token turn steps', v, steps[1:], statistics.median(steps[1:]) if len(steps)>1 else None)
PY
(cd $R && tar -czf raw.tgz *.txt *.json *.log 2>/dev/null; rm -f bench_*.txt server_*.log build.txt)
cp tmp_exp/r101.sh $R/
echo "total $((SECONDS-S)) s" | tee -a $R/summary.txt
