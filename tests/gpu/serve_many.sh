#!/usr/bin/env bash
# Many concurrent streams through `lite-llama serve` on the GPU (issue 22): CLIENTS streaming
# completions at once (default 2,000) from 8 load-generator processes, Llama-3.2-1B shapes with
# random weights, 256 sequences a step; every request must get its whole stream (failed = 0).
# Reports throughput, TTFT / ITL percentiles and the server's /metrics.
#   tests/gpu/serve_many.sh BUILD_BIN OUT_DIR [CLIENTS]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$1"; OUT="$2"; CLIENTS="${3:-2000}"; mkdir -p "$OUT"
CFG="$ROOT/tests/gpu/configs/llama-3.2-1b.json"
PORT=18432
ulimit -n 65536 2>/dev/null || true
"$BIN" serve -m "$CFG" --load-format dummy --port $PORT --max-num-seqs 256 --ctx 512 -q \
  --max-connections-per-client 8192 --max-waiting 8192 2>"$OUT/server.log" &
SERVER=$!
for i in $(seq 1 240); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.5; done
PER=$((CLIENTS / 8))
PIDS=()
for p in $(seq 0 7); do
  python3 "$ROOT/bench/serve_bench.py" --url "http://127.0.0.1:$PORT" --concurrency $PER \
    --num-requests $PER --prompt-len 64 192 --output-len 32 96 --seed $p --warmup 0 --timeout 600 \
    --out "$OUT/client_$p.json" >"$OUT/client_$p.log" 2>&1 &
  PIDS+=($!)
done
wait "${PIDS[@]}"
curl -sf "http://127.0.0.1:$PORT/health" >"$OUT/health_after.txt" && echo "health after: ok"
curl -sf "http://127.0.0.1:$PORT/metrics" >"$OUT/metrics.txt"
kill -TERM $SERVER; wait $SERVER; echo "server exit $?"
python3 - "$OUT" <<'PY'
import json, sys, glob
out = sys.argv[1]
runs = [json.load(open(f)) for f in sorted(glob.glob(out + "/client_*.json"))]
pct = lambda key, p: max(r[key][p] for r in runs if r.get(key))
res = {"requests": sum(r["num_requests"] for r in runs) if "num_requests" in runs[0] else None,
       "failed": sum(r["failed"] for r in runs),
       "output_tok_s": sum(r["output_tokens"] for r in runs) / max(r["duration_s"] for r in runs),
       "ttft_ms_worst_client": {p: pct("ttft_ms", p) for p in runs[0]["ttft_ms"]},
       "itl_ms_worst_client": {p: pct("itl_ms", p) for p in runs[0]["itl_ms"]}}
json.dump(res, open(out + "/summary.json", "w"), indent=1)
print(json.dumps(res))
PY
