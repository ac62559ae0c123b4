#!/usr/bin/env bash
# Decode speed of 64 requests each under a JSON Schema against the same requests unconstrained
# (issue 23's goal: >= 95%), on the GPU: Llama-3.2-1B shapes with random weights and the real
# Llama 3.2 tokenizer (its 128k vocabulary is what the masks cost), one `generate` batch of 64
# chat prompts, 128 new tokens at most, the two modes alternated run by run. Each run holds two
# waves of 64 (128 prompts, --max-num-seqs 64): the first meets the schema fresh (its mask cache
# is built during decode), the second finds the compiled grammar and its cache warm, as a server's
# later requests with the same schema do; each wave's rate is reported.
#   tests/gpu/structured_speed.sh BIN OUT [REPEATS]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$1"; OUT="$2"; REPEATS="${3:-3}"; mkdir -p "$OUT"
MODEL="$("$ROOT/tests/gpu/dummy_llama.sh")"
cat >"$OUT/schema.json" <<'JSON'
{"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer"},
 "skills": {"type": "array", "items": {"type": "string", "maxLength": 24}, "maxItems": 6},
 "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
             "required": ["city", "zip"]},
 "active": {"type": "boolean"}}, "required": ["name", "age", "skills", "address", "active"]}
JSON
for w in first second; do
  for i in $(seq 1 64); do echo "Describe person number $i of the $w list as JSON: name, age, skills, address, active."; done
done >"$OUT/prompts.txt"
for r in $(seq 1 "$REPEATS"); do
  for mode in free schema; do
    extra=(); [ "$mode" = schema ] && extra=(--json-schema "$OUT/schema.json")
    "$BIN" generate -q -m "$MODEL" --load-format dummy -f "$OUT/prompts.txt" --chat -n 128 --max-num-seqs 64 \
      --ignore-eos "${extra[@]}" --json >"$OUT/${mode}_$r.json" 2>"$OUT/${mode}_$r.log" || tail -3 "$OUT/${mode}_$r.log"
  done
done
python3 - "$OUT" "$REPEATS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
res = {}
for mode in ("free", "schema"):
    for wave, sl in (("cold", slice(0, 64)), ("warm", slice(64, 128))):
        rates, toks = [], []
        for r in range(1, reps + 1):
            d = json.load(open(f"{out}/{mode}_{r}.json"))["results"][sl]
            rates.append(sum(x["decode_tokens_per_s"] for x in d))
            toks.append(sum(x["completion_tokens"] for x in d))
        res[f"{mode}_{wave}"] = {"decode_tok_s_median": statistics.median(rates), "runs": rates, "tokens": toks}
for wave in ("cold", "warm"):
    res[f"ratio_{wave}"] = res[f"schema_{wave}"]["decode_tok_s_median"] / res[f"free_{wave}"]["decode_tok_s_median"]
json.dump(res, open(f"{out}/structured_speed.json", "w"), indent=1)
print(json.dumps(res))
PY
