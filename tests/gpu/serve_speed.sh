#!/usr/bin/env bash
# Serving throughput on the GPU (issue "Serving", part 5): the offline `lite-llama bench` batch-64
# figure and `bench/serve_bench.py` against `lite-llama serve` with 64 concurrent streaming
# clients, same model (Llama-3.2-1B config, random weights), same shapes, same machine and run.
#   tests/gpu/serve_speed.sh BUILD_BIN OUT_DIR
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$1"; OUT="$2"; mkdir -p "$OUT"
CFG="$ROOT/tests/gpu/configs/llama-3.2-1b.json"
PORT=18431
"$BIN" bench -m "$CFG" --load-format dummy --batch 64 --prompt-len 128 --gen-len 256 --runs 3 \
  --warmup 1 --json "$OUT/offline.json" | tail -2
"$BIN" serve -m "$CFG" --load-format dummy --port $PORT --max-num-seqs 64 --ctx 512 -q &
SERVER=$!
for i in $(seq 1 120); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.5; done
# Several client processes: one Python process alone cannot parse 64 streams at ~40k tokens/s.
CLIENTS=()
for p in 0 1 2 3; do
  python3 "$ROOT/bench/serve_bench.py" --url "http://127.0.0.1:$PORT" --concurrency 16 \
    --num-requests 64 --prompt-len 128 128 --output-len 256 256 --seed $p --warmup 0 \
    --out "$OUT/serve_$p.json" >"$OUT/client_$p.log" 2>&1 &
  CLIENTS+=($!)
done
wait "${CLIENTS[@]}"
curl -sf "http://127.0.0.1:$PORT/metrics" > "$OUT/metrics.txt"
kill -TERM $SERVER; wait $SERVER
python3 - "$OUT" <<'PY'
import json, sys, glob
out = sys.argv[1]
off = json.load(open(out + "/offline.json"))["results"][0]["decode_tokens_per_s"]["median"]
runs = [json.load(open(f)) for f in sorted(glob.glob(out + "/serve_*.json"))]
# The four clients run side by side: all their tokens over the longest client's wall time.
tot = sum(r["output_tokens"] for r in runs) / max(r["duration_s"] for r in runs)
print(json.dumps({"offline_batch64_decode_tok_s": off, "serve_output_tok_s": tot,
                  "ratio": tot / off, "failed": sum(r["failed"] for r in runs), "per_client": [{k: r.get(k) for k in ("output_tokens_per_s", "ttft_ms", "itl_ms", "request_throughput")} for r in runs]}, indent=1))
PY
