#!/usr/bin/env bash
# Mixture of experts on one GPU (issue 26): Qwen3-30B-A3B's real config with dummy 16-bit weights
# (61 GB), decode tok/s at batch 1 / 8 / 64 with the --profile breakdown, prefill of one
# 2,048-token prompt, the copy bandwidth / GEMM peak of the same machine for scale, and HF
# transformers eager (bf16, sdpa) on the same config at batch 1 and 64 (HF=0 skips it). Writes
# $OUT/moe/*.json and logs.
#   tests/gpu/moe_bench.sh BUILD_DIR [CONFIG]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$1"
CFG="${2:-$ROOT/tests/gpu/configs/qwen3-30b-a3b.json}"
OUT="${OUT:-$ROOT/gpu-results}"
mkdir -p "$OUT/moe"
"$BUILD/bin/attention-bench" --quick 2>&1 | head -3 | tee "$OUT/moe/peaks.txt"
run() {  # name, bench flags...
  local name="$1"; shift
  timeout 400 "$BUILD/bin/lite-llama" bench --load-format dummy -m "$CFG" --json "$OUT/moe/$name.json" "$@" \
    >"$OUT/moe/$name.log" 2>&1 || echo "FAILED: $name (rc $?)" | tee -a "$OUT/moe/$name.log"
  grep -vE '^\s*$' "$OUT/moe/$name.log" | tail -12
}
run decode1 --batch 1 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 --profile
run decode --batch 8,64 --max-num-seqs 64 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 --profile
run prefill --batch 1 --ctx 4096 --prompt-len 2048 --gen-len 8 --runs 3
if [ "${HF:-1}" = 1 ]; then
  timeout 400 python3 - "$ROOT" "$(basename "$CFG")" "$OUT/moe/hf_eager.json" <<'PY' 2>&1 | grep -v Warning | tail -4
import json, sys
sys.path.insert(0, sys.argv[1] + "/bench")
import gpu_speed
res = [gpu_speed.hf_bench(sys.argv[2], [b], 128, n, compiled=False, runs=1)[0] for b, n in ((1, 32), (64, 16))]
json.dump(res, open(sys.argv[3], "w"), indent=1)
PY
fi
