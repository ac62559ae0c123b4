#!/usr/bin/env bash
# Long prompts through `lite-llama serve` on the GPU, as RAG and code clients send them (dummy
# weights of real configs, default context and step budget). Every request must get its whole
# stream (failed = 0). Cases, each a bench/serve_bench.py run (TTFT / ITL / throughput as JSON):
#   long8k    Llama-3.2-1B, 16 closed-loop clients, 48 prompts of 7,900-8,192 token ids, 128 out
#   long32k   Llama-3.2-1B, 4 clients, 8 prompts of 24,000-32,000 ids, 64 out (past the old 8,192 default)
#   mixed     Llama-3.2-1B, 32 clients of short prompts (128-256 ids, 256 out) while 2 clients send
#             16,384-id prompts (16 out): what a long prefill costs the other streams' ITL
#   mixedN    the same with --max-batched-tokens N (e.g. mixed2048: smaller steps throughout)
#   lone32k   Llama-3.2-1B, one client, 3 prompts of 32,768 ids, 16 out: TTFT with nobody decoding
#   burst     Llama-3.2-1B, 64 clients, 64 prompts of 512 ids at once, 64 out: TTFT of a burst
#   preempt   Qwen3-4B with a KV pool of 120,000 tokens, 32 clients, 64 prompts of 6,000-8,000
#             ids, 256 out: more than the pool holds, so running requests are preempted
# and the offline `bench` of 16 x 8,192-token prompts for reference. A case name ending in +cap
# (long8k+cap) runs its server with --max-prefill-with-decodes 2048: prompt chunks beside decoding
# streams of at most 2,048 tokens (by default they take the whole step budget).
#   tests/gpu/serve_long.sh BIN OUT_DIR [case ...]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$1"; OUT="$2"; shift 2
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=(offline long8k long32k mixed mixed2048 preempt)
mkdir -p "$OUT"
CFG="$ROOT/tests/gpu/configs"
CLIENT="$ROOT/bench/serve_bench.py"
PORT=18500

serve() {  # name config [flags...]: start a server, wait for it, record /v1/models
  local name=$1 cfg=$2; shift 2
  PORT=$((PORT + 1))
  "$BIN" serve -m "$CFG/$cfg.json" --load-format dummy --port $PORT --max-num-seqs 64 -q "$@" \
    2>"$OUT/server_$name.log" &
  SERVER=$!
  for i in $(seq 1 240); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.5; done
  curl -sf "http://127.0.0.1:$PORT/v1/models" >"$OUT/models_$name.json"
}
stop() {  # name: metrics, health, SIGTERM
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && echo "$1: health after ok" || echo "$1: health after FAILED"
  curl -sf "http://127.0.0.1:$PORT/metrics" >"$OUT/metrics_$1.txt"
  kill -TERM $SERVER; wait $SERVER; echo "$1: server exit $?"
}
client() {  # out-name [serve_bench args...]
  local name=$1; shift
  python3 "$CLIENT" --url "http://127.0.0.1:$PORT" --vocab 120000 --warmup 0 --timeout 900 \
    --out "$OUT/client_$name.json" "$@" >"$OUT/client_$name.log" 2>&1
}

one() {  # config [serve_bench args...]: case $c's server (with "${flags[@]}") and one client
  local cfg=$1; shift
  serve $c $cfg "${flags[@]}"
  client $c "$@"
  stop $c
}

for c in "${cases[@]}"; do
  b=${c%+cap}; flags=(); [ "$b" != "$c" ] && flags=(--max-prefill-with-decodes 2048)
  case $b in
    offline)
      "$BIN" bench -q -m "$CFG/llama-3.2-1b.json" --load-format dummy --batch 16 --prompt-len 8192 --gen-len 128 \
        --runs 1 --warmup 1 -c 8400 --json "$OUT/offline_llama_16x8k.json" >"$OUT/offline_llama_16x8k.txt" 2>&1 ||
        echo "offline bench failed" ;;
    long8k) one llama-3.2-1b --concurrency 16 --num-requests 48 --prompt-len 7900 8192 --output-len 128 128 ;;
    long32k) one llama-3.2-1b --concurrency 4 --num-requests 8 --prompt-len 24000 32000 --output-len 64 64 ;;
    lone32k) one llama-3.2-1b --concurrency 1 --num-requests 3 --prompt-len 32768 32768 --output-len 16 16 ;;
    burst) one llama-3.2-1b --concurrency 64 --num-requests 64 --prompt-len 512 512 --output-len 64 64 ;;
    mixed*)
      [ -n "${b#mixed}" ] && flags+=(--max-batched-tokens "${b#mixed}")
      serve $c llama-3.2-1b "${flags[@]}"
      client ${c}_short --concurrency 32 --num-requests 96 --prompt-len 128 256 --output-len 256 256 &
      S=$!
      sleep 1
      client ${c}_long --concurrency 2 --num-requests 8 --prompt-len 16384 16384 --output-len 16 16 --seed 7
      wait $S
      stop $c ;;
    preempt)
      flags+=(--kv-tokens 120000)
      one qwen3-4b --concurrency 32 --num-requests 64 --prompt-len 6000 8000 --output-len 256 256 ;;
    *) echo "unknown case $c" >&2 ;;
  esac
done

python3 - "$OUT" <<'PY'
import glob, json, os, re, sys
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(out + "/client_*.json")):
    r = json.load(open(f))
    rows[os.path.basename(f)[7:-5]] = {k: r[k] for k in ("completed", "failed", "errors", "duration_s",
        "output_tokens_per_s", "total_tokens_per_s", "ttft_ms", "itl_ms", "tpot_ms")}
for f in sorted(glob.glob(out + "/metrics_*.txt")):
    rows["metrics_" + os.path.basename(f)[8:-4]] = [l for l in open(f).read().splitlines()
        if re.match(r"lite_llama_(preemptions_total|requests_total|kv_slots_total)", l)]
for f in sorted(glob.glob(out + "/models_*.json")):
    rows["ctx_" + os.path.basename(f)[7:-5]] = json.load(open(f))["data"][0].get("max_model_len")
json.dump(rows, open(out + "/summary.json", "w"), indent=1)
print(json.dumps(rows, indent=1))
PY
