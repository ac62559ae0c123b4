#!/usr/bin/env bash
# The probe of prefix_cache_bench.sh alone (8 conversations one at a time, the second turn with
# ~4k tokens of history), with `serve --log-timing -v`: each request's stages to its first token
# and each prefill step's parts land in OUT_DIR/server_{cache,nocache}.log.
#   tests/gpu/prefix_probe_timing.sh BUILD_BIN OUT_DIR [serve flags...]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$1"; OUT="$2"; shift 2; mkdir -p "$OUT"
MODEL="$("$ROOT/tests/gpu/dummy_llama.sh")"
PORT=18434
for mode in cache nocache; do
  flag=""; [ "$mode" = nocache ] && flag="--no-prefix-cache"
  "$BIN" serve -m "$MODEL" --load-format dummy --port $PORT --max-num-seqs 64 --ctx 8192 --log-timing -v $flag "$@" \
    2>"$OUT/server_$mode.log" &
  SERVER=$!
  for i in $(seq 1 240); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.5; done
  python3 "$ROOT/bench/multiturn_bench.py" --url "http://127.0.0.1:$PORT" --conversations 8 --turns 2 \
    --sequential --system-words 3800 --answer-len 16 16 --seed 1 --label "$mode probe" \
    --out "$OUT/probe_$mode.json" >/dev/null
  kill -TERM $SERVER; wait $SERVER
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], {t: v['ttft_ms'] for t, v in r['per_turn'].items()})" \
    "$OUT/probe_$mode.json" $mode
done
