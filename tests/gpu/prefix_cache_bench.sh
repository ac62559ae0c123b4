#!/usr/bin/env bash
# Prefix caching through the server on the GPU (issue "Automatic prefix caching"): Llama-3.2-1B
# shapes with random weights and the real Llama 3.2 tokenizer and chat template (the files
# fetched by scripts/fetch-tokenizers, beside the config), `lite-llama serve` with and without
# --no-prefix-cache, each loaded by bench/multiturn_bench.py twice: 64 conversations x 8 turns
# side by side (shared ~1.2k-word system prompt, answers of 64-256 tokens), and a probe of 8
# conversations one at a time whose second turn carries ~4k tokens of history (TTFT of a cached
# history against an uncached one). Writes the JSON reports to OUT_DIR.
#   tests/gpu/prefix_cache_bench.sh BUILD_BIN OUT_DIR
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$1"; OUT="$2"; mkdir -p "$OUT"
MODEL="$("$ROOT/tests/gpu/dummy_llama.sh")"
PORT=18433
for mode in cache nocache; do
  flag=""; [ "$mode" = nocache ] && flag="--no-prefix-cache"
  "$BIN" serve -m "$MODEL" --load-format dummy --port $PORT --max-num-seqs 64 --ctx 8192 -q $flag \
    2>"$OUT/server_$mode.log" &
  SERVER=$!
  for i in $(seq 1 240); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.5; done
  python3 "$ROOT/bench/multiturn_bench.py" --url "http://127.0.0.1:$PORT" --conversations 64 --turns 8 \
    --system-words 1200 --answer-len 64 256 --label "$mode" --out "$OUT/multiturn_$mode.json" >/dev/null
  python3 "$ROOT/bench/multiturn_bench.py" --url "http://127.0.0.1:$PORT" --conversations 8 --turns 2 \
    --sequential --system-words 3800 --answer-len 16 16 --seed 1 --label "$mode probe" \
    --out "$OUT/probe_$mode.json" >/dev/null
  curl -sf "http://127.0.0.1:$PORT/metrics" > "$OUT/metrics_$mode.txt"
  kill -TERM $SERVER; wait $SERVER
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
m = {k: json.load(open(f"{out}/multiturn_{k}.json")) for k in ("cache", "nocache")}
p = {k: json.load(open(f"{out}/probe_{k}.json")) for k in ("cache", "nocache")}
row = lambda r: {k: r[k] for k in ("completed", "failed", "duration_s", "output_tokens_per_s", "prompt_tokens",
                                    "cached_tokens", "ttft_ms", "ttft_ms_later_turns")}
summary = {"multiturn": {k: row(v) for k, v in m.items()},
           "probe_second_turn_ttft_ms": {k: v["per_turn"]["1"]["ttft_ms"] for k, v in p.items()},
           "probe_second_turn_prompt_tokens": {k: v["per_turn"]["1"]["prompt_tokens_mean"] for k, v in p.items()}}
c, n = summary["probe_second_turn_ttft_ms"]["cache"]["p50"], summary["probe_second_turn_ttft_ms"]["nocache"]["p50"]
summary["probe_ttft_ratio_p50"] = round(c / n, 4) if c and n else None
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
