#!/usr/bin/env bash
# Device run 107: tree = 4dd... (see README): the whole 131,072-token context of Llama-3.2-1B.
# bench of one 131,000-token prompt in one step and in 8,192-token chunks; then the server with
# default settings: one 130,000-id prompt (16 tokens out) and one of 131,072 ids (must be a 400).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r107; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
M=tests/gpu/configs/llama-3.2-1b.json
for bud in 131016 8192; do
  timeout 150 build-gpu/bin/lite-llama bench -m $M --load-format dummy --batch 1 --prompt-len 131000 --gen-len 16 \
    --runs 1 --warmup 0 -c 131072 --max-batched-tokens $bud --json $R/bench_131k_$bud.json > $R/bench_131k_$bud.txt 2>&1
  echo "bench budget $bud rc $? $((SECONDS-S)) s: $(tail -1 $R/bench_131k_$bud.txt)" | tee -a $R/summary.txt
done
build-gpu/bin/lite-llama serve -m $M --load-format dummy --port 18600 > $R/server.log 2>&1 &
P=$!
for i in $(seq 1 240); do curl -sf localhost:18600/health > /dev/null && break; sleep 0.5; done
curl -s localhost:18600/v1/models | tee $R/models.json; echo
python3 - <<'PY' | tee -a $R/summary.txt
import json, time, urllib.request, random
def post(n, max_tokens):
    rng = random.Random(n)
    body = json.dumps({"prompt": [rng.randrange(1000, 120000) for _ in range(n)], "max_tokens": max_tokens,
                       "ignore_eos": True}).encode()
    req = urllib.request.Request("http://127.0.0.1:18600/v1/completions", body, {"Content-Type": "application/json"})
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            out = json.load(r); return r.status, round(time.perf_counter() - t, 3), out["usage"], out["choices"][0]["finish_reason"]
    except urllib.error.HTTPError as e:
        return e.code, round(time.perf_counter() - t, 3), e.read()[:200].decode(), None
print("130,000 ids, 16 out:", post(130000, 16))
print("130,000 ids again (cached prefix), 16 out:", post(130000, 16))
print("131,072 ids:", post(131072, 16))
PY
curl -s localhost:18600/metrics | grep -E "requests_total|kv_slots_total|prefix_cache_hit_tokens" | tee -a $R/summary.txt
kill -TERM $P; wait $P; echo "server exit $?" | tee -a $R/summary.txt
(cd $R && tar -czf logs.tgz server.log build.txt bench_* && rm -f build.txt bench_*.json)
cp tmp_exp/r107.sh $R/
