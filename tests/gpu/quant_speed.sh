#!/usr/bin/env bash
# Decode/prefill speed of each --quantize scheme on Qwen3-4B shapes (random weights), GPU. One JSON
# per scheme in OUT_DIR (lite-llama bench --json), and a one-line summary per batch size.
#   tests/gpu/quant_speed.sh BIN OUT_DIR [schemes (default: none int8 int4 fp8)] [batches (1,8,16,64)]
set -uo pipefail
BIN=$1 OUTD=$2
SCHEMES=${3:-none int8 int4 fp8}
BATCHES=${4:-1,8,16,64}
CFG="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/configs/qwen3-4b.json"
mkdir -p "$OUTD"
for q in $SCHEMES; do
  "$BIN" bench --load-format dummy -m "$CFG" --device cuda --batch "$BATCHES" --prompt-len 26 --gen-len 100 \
    --runs 3 --quantize "$q" -q --json "$OUTD/quant_speed_$q.json" >/dev/null 2>"$OUTD/quant_speed_$q.err" ||
    { echo "$q failed:"; tail -3 "$OUTD/quant_speed_$q.err"; }
done
python3 - "$OUTD" $SCHEMES <<'PY'
import json, os, sys
d = sys.argv[1]
for q in sys.argv[2:]:
    f = os.path.join(d, f"quant_speed_{q}.json")
    if not os.path.exists(f):
        continue
    for r in json.load(open(f))["results"]:
        print(f"{q:5} batch {r['batch']:3}: decode {r['decode_tokens_per_s']['median']:9.1f} tok/s, "
              f"prefill {r['prefill_tokens_per_s']['median']:9.1f} tok/s, TTFT {r['ttft_ms']['median']:7.2f} ms, "
              f"peak {r['peak_device_bytes'] / 2**30:.2f} GiB")
PY
