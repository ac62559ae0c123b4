#!/usr/bin/env bash
# Quality of each --quantize scheme on the default model (GPU): perplexity of bench/texts/english.txt
# scored as one prefill (weights only: prefill GEMMs use dequantised tiles) and of its last 512
# tokens scored by decode steps (the decode GEMV, whose int8/int4 path quantises activations to
# int8; LITE_LLAMA_GQ_FP32=1 gives the 16-bit-activation path for comparison).
#   tests/gpu/quant_quality.sh BIN MODEL OUT_JSON
set -uo pipefail
BIN=$1 MODEL=$2 OUTF=$3
TEXT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/bench/texts/english.txt"
TMP=$(mktemp -d)
run() { local name=$1; shift; "$@" -q >"$TMP/s_$name.json" 2>"$TMP/s_$name.err" || tail -2 "$TMP/s_$name.err"; }
for q in none auto int8 int4 fp8; do
  run "full_$q" "$BIN" score -m "$MODEL" --text "$TEXT" --device cuda --quantize $q
  run "tail_$q" "$BIN" score -m "$MODEL" --text "$TEXT" --device cuda --quantize $q --decode-tail 512
done
for q in auto int8 int4; do
  LITE_LLAMA_GQ_FP32=1 run "tailfp32_$q" "$BIN" score -m "$MODEL" --text "$TEXT" --device cuda --quantize $q --decode-tail 512
done
python3 - "$TMP" "$OUTF" <<'PY'
import glob, json, os, sys
tmp, out = sys.argv[1:3]
r = {os.path.basename(f)[2:-5]: {k: v for k, v in json.load(open(f)).items() if not isinstance(v, (list, dict))}
     for f in sorted(glob.glob(os.path.join(tmp, "s_*.json"))) if os.path.getsize(f)}
json.dump(r, open(out, "w"), indent=1)
for k, v in r.items():
    print(k, v)
PY
