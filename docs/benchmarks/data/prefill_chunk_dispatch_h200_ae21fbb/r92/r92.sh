#!/usr/bin/env bash
# Device run 92: the next turn of a chat end to end. lite-llama serve (dummy weights), a 8,192-token
# prompt fills the prefix cache, then 8,192 cached + N new tokens, max_tokens 1, wall ms per request
# (tmp_exp/turn_client.py). HEAD (ae21fbb, build-gpu) against e547965 (tmp_exp/base_e547, before
# the wgmma chunk rule); order alternated; a time guard stops new sessions.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r92; mkdir -p $R; touch $R/client_err.txt
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 &
NB=$!
(cmake -S tmp_exp/base_e547 -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
  -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > $R/base_cmake.txt 2>&1 && \
  cmake --build build-base -j 16 --target lite-llama > $R/base_build.txt 2>&1) &
BB=$!
wait $NB || { tail -30 $R/build.txt; exit 1; }
wait $BB || { tail -30 $R/base_build.txt; exit 1; }
echo "builds $((SECONDS-S)) s" | tee $R/summary.txt
M=tests/gpu/configs
session() {  # build model port
  local bin=build-gpu/bin/lite-llama; [ $1 = base ] && bin=build-base/bin/lite-llama
  $bin serve -m $M/$2.json --load-format dummy -c 16384 --port $3 > $R/server_$1_$2_$3.log 2>&1 &
  local pid=$!
  for i in $(seq 1 120); do curl -sf -m 1 localhost:$3/v1/models > /dev/null && break; sleep 0.5; done
  timeout 60 python3 tmp_exp/turn_client.py $3 $1 8192 256,384,512,768 3 >> $R/turns_$2.jsonl 2>> $R/client_err.txt
  kill $pid; wait $pid 2>/dev/null
  echo "$1 $2 done $((SECONDS-S)) s" >> $R/summary.txt
}
port=18100
for r in 1 2; do
  ws="base new"; [ $r = 2 ] && ws="new base"
  for m in llama-3.2-1b qwen3-4b; do for w in $ws; do
    [ $((SECONDS-S)) -gt 215 ] && break 3
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
(cd $R && tar -czf logs.tgz *.log build.txt base_*.txt client_err.txt 2>/dev/null && rm -f *.log build.txt base_*.txt client_err.txt)
cp tmp_exp/r92.sh $R/
echo "total $((SECONDS-S)) s" | tee -a $R/summary.txt
