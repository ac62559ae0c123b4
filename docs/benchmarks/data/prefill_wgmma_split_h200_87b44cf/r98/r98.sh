#!/usr/bin/env bash
# Device run 98: tree = 2874343 + the wgmma key-split patch (final form). The next turn of a chat
# end to end: serve --log-timing -v (dummy weights, -c 16384), 8,192 cached + N new tokens,
# max_tokens 1; the engine's step time ("run") and the request's total from the server log, and
# the client's wall ms. LITE_LLAMA_PREFILL_WGMMA_SPLIT=0 (base: split mma.sync) against 1 (new),
# one binary, 3 rounds alternated. Then all of test_cuda_kernels.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r98; mkdir -p $R; touch $R/client_err.txt
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
M=tests/gpu/configs
session() {  # tag model port
  local v=1; [ $1 = base ] && v=0
  LITE_LLAMA_PREFILL_WGMMA_SPLIT=$v build-gpu/bin/lite-llama serve -m $M/$2.json --load-format dummy -c 16384 --port $3 --log-timing -v > $R/server_$1_$2_$3.log 2>&1 &
  local pid=$!
  for i in $(seq 1 120); do curl -sf -m 1 localhost:$3/v1/models > /dev/null && break; sleep 0.5; done
  timeout 60 python3 tmp_exp/turn_client.py $3 $1 8192 16,64,128,256 4 >> $R/turns_$2.jsonl 2>> $R/client_err.txt
  kill $pid; wait $pid 2>/dev/null
}
port=18300
for r in 1 2 3; do
  ws="base new"; [ $r = 2 ] && ws="new base"
  for m in llama-3.2-1b qwen3-4b; do for w in $ws; do
    [ $((SECONDS-S)) -gt 250 ] && break 3
    port=$((port+1)); session $w $m $port
  done; done
done
echo "e2e $((SECONDS-S)) s" | tee -a $R/summary.txt
python3 - $R <<'PY' | tee $R/steps_summary.txt
import re,glob,collections,statistics,os,sys
step=collections.defaultdict(list); tot=collections.defaultdict(list)
for f in glob.glob(os.path.join(sys.argv[1],'server_*.log')):
    _,tag,model,_=os.path.basename(f).split('_')
    first=set()
    for l in open(f):
        m=re.search(r'prompt=(\d+) completion=1 ([\d.]+) ms.*step (\d+)',l)
        if not m or int(m.group(1))<=8192: continue
        n=int(m.group(1))-8192
        if n not in first: first.add(n); continue  # each size's first request in a server: warm-up
        step[(model,n,tag)].append(int(m.group(3))/1e3); tot[(model,n,tag)].append(float(m.group(2)))
print("model new_tokens | step ms base new new/base | request ms base new (server log; medians, the first of each size per server left out)")
for model,n in sorted({(a,b) for a,b,c in step}):
    sb,sn=statistics.median(step[(model,n,'base')]),statistics.median(step[(model,n,'new')])
    tb,tn=statistics.median(tot[(model,n,'base')]),statistics.median(tot[(model,n,'new')])
    print(f"{model:13} {n:4} | {sb:6.3f} {sn:6.3f} {sn/sb:.3f} | {tb:6.2f} {tn:6.2f}  (n {len(step[(model,n,'base')])}/{len(step[(model,n,'new')])})")
PY
timeout 420 build-gpu/bin/test_cuda_kernels > $R/tests.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|^\[  SKIPPED|FAILED  \]' $R/tests.txt | head -8 | tr '\n' ' ') $((SECONDS-S)) s" | tee -a $R/summary.txt
grep -E "^\[  FAILED" $R/tests.txt | head
(cd $R && tar -czf logs.tgz *.log build.txt client_err.txt tests.txt && rm -f *.log build.txt client_err.txt)
cp tmp_exp/r98.sh $R/
