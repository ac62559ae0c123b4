#!/usr/bin/env bash
# Device run 97: why Llama-3.2-1B's 16-token turn after 8,192 cached tokens was 0.4 ms slower with
# the wgmma split (r95): serve --log-timing -v, both settings alternated, 16 / 64 new tokens.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r97; mkdir -p $R; touch $R/client_err.txt
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
M=tests/gpu/configs
session() {  # tag model port extra
  local v=1; [ $1 = base ] && v=0
  LITE_LLAMA_PREFILL_WGMMA_SPLIT=$v build-gpu/bin/lite-llama serve -m $M/$2.json --load-format dummy -c 16384 --port $3 --log-timing -v $4 > $R/server_$1_$2_$3.log 2>&1 &
  local pid=$!
  for i in $(seq 1 120); do curl -sf -m 1 localhost:$3/v1/models > /dev/null && break; sleep 0.5; done
  timeout 60 python3 tmp_exp/turn_client.py $3 $1 8192 16,64 5 >> $R/turns_$2.jsonl 2>> $R/client_err.txt
  kill $pid; wait $pid 2>/dev/null
}
port=18200
for r in 1 2; do
  ws="base new"; [ $r = 2 ] && ws="new base"
  for w in $ws; do port=$((port+1)); session $w llama-3.2-1b $port ""; done
done
for w in base new; do port=$((port+1)); session $w llama-3.2-1b $port "--dtype bf16"; done
echo "done $((SECONDS-S)) s" >> $R/summary.txt
for f in $R/server_*.log; do echo "== $f"; grep -v "GET /v1" $f | tail -40; done > $R/logs_tail.txt
(cd $R && tar -czf logs.tgz *.log build.txt client_err.txt && rm -f *.log build.txt client_err.txt)
cp tmp_exp/r97.sh $R/
