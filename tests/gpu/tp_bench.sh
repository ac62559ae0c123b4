#!/usr/bin/env bash
# Tensor parallelism on a multi-GPU machine (issue 27): decode tok/s at batch 1 / 8 / 64 for
# tp 1, 2, 4 of dummy-weight configs on the same machine, the --profile breakdown (all-reduce
# time per step) and a device-copy bandwidth for scale. Writes $OUT/tp_bench.json and a log.
#   tests/gpu/tp_bench.sh BIN [CONFIG:TP,TP ...]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN="$1"; shift
OUT="${OUT:-$ROOT/gpu-results}"
mkdir -p "$OUT/tp"
cases=("$@")
[ ${#cases[@]} -eq 0 ] && cases=(llama-3.2-3b:1,2,4 qwen3-4b:1,2,4 llama-3.1-8b:1,2,4 llama-3.1-70b:4)
export NCCL_NVLS_ENABLE=0
for c in "${cases[@]}"; do
  cfg="${c%%:*}"
  for tp in ${c#*:}; do
    tp="${tp//,/ }"
    for n in $tp; do
      f="$OUT/tp/${cfg}_tp${n}.json"
      timeout 300 "$BIN" bench --load-format dummy -m "$ROOT/tests/gpu/configs/$cfg.json" --tp "$n" --dtype bf16 \
        --batch 1,8,64 --max-num-seqs 64 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 --profile \
        --json "$f" >"$OUT/tp/${cfg}_tp${n}.log" 2>&1 || echo "FAILED: $cfg tp $n (rc $?)" | tee -a "$OUT/tp/${cfg}_tp${n}.log"
      tail -4 "$OUT/tp/${cfg}_tp${n}.log"
    done
  done
done
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
doc = {"runs": {}}
for f in sorted(glob.glob(os.path.join(out, "tp", "*.json"))):
    doc["runs"][os.path.basename(f)[:-5]] = json.load(open(f))
for f in sorted(glob.glob(os.path.join(out, "tp", "*.log"))):
    doc.setdefault("logs", {})[os.path.basename(f)[:-4]] = open(f).read()[-3000:]
json.dump(doc, open(os.path.join(out, "tp_bench.json"), "w"), indent=1)
PY
