#!/usr/bin/env bash
# Device run 95: the next turn of a chat end to end, tree = HEAD 2874343 + the wgmma key-split patch.
# lite-llama serve (dummy weights, -c 16384), a 8,192-token prompt fills the prefix cache, then
# 8,192 cached + N new tokens, max_tokens 1, wall ms per request (turn_client.py). One binary,
# LITE_LLAMA_PREFILL_WGMMA_SPLIT=0 (base: split mma.sync) against 1 (new), order alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r95; mkdir -p $R; touch $R/client_err.txt
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
M=tests/gpu/configs
session() {  # tag model port
  local v=1; [ $1 = base ] && v=0
  LITE_LLAMA_PREFILL_WGMMA_SPLIT=$v build-gpu/bin/lite-llama serve -m $M/$2.json --load-format dummy -c 16384 --port $3 > $R/server_$1_$2_$3.log 2>&1 &
  local pid=$!
  for i in $(seq 1 120); do curl -sf -m 1 localhost:$3/v1/models > /dev/null && break; sleep 0.5; done
  timeout 60 python3 tmp_exp/turn_client.py $3 $1 8192 16,64,128,256 3 >> $R/turns_$2.jsonl 2>> $R/client_err.txt
  kill $pid; wait $pid 2>/dev/null
  echo "$1 $2 done $((SECONDS-S)) s" >> $R/summary.txt
}
port=18100
for r in 1 2 3; do
  ws="base new"; [ $r = 2 ] && ws="new base"
  for m in llama-3.2-1b qwen3-4b; do for w in $ws; do
    [ $((SECONDS-S)) -gt 480 ] && break 3
    port=$((port+1)); session $w $m $port
  done; done
done
python3 - $R <<'PY' | tee $R/turns_summary.txt
import sys,json,glob,collections,statistics,os
for f in sorted(glob.glob(os.path.join(sys.argv[1],'turns_*.jsonl'))):
    d=collections.defaultdict(list); cached=set()
    for ln in open(f):
        j=json.loads(ln)
        if j.get('fill'): continue
        d[(j['new'],j['tag'])].append(j['ms']); cached.add(j['cached'])
    print(os.path.basename(f), 'cached tokens seen:', sorted(cached))
    for n in sorted({k[0] for k in d}):
        a=d[(n,'base')]; b=d[(n,'new')]
        if a and b: print(f"  {n:4} new tokens: base {statistics.median(a):8.2f} ms  new {statistics.median(b):8.2f} ms  new/base {statistics.median(b)/statistics.median(a):.3f}  runs {a} {b}")
PY
(cd $R && tar -czf logs.tgz *.log build.txt client_err.txt 2>/dev/null && rm -f *.log build.txt client_err.txt)
cp tmp_exp/r95.sh $R/
echo "total $((SECONDS-S)) s" | tee -a $R/summary.txt
