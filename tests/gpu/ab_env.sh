#!/usr/bin/env bash
# A/B of two settings of one build on `lite-llama bench` (random weights of the real shapes,
# prompt 128, 256 new tokens, batch 1/8/64 or $BATCHES): side "a" runs with the environment assignments
# ENV_A, side "b" with ENV_B (e.g. "LITE_LLAMA_FP32_RESIDUAL=0" vs ""), both with FLAGS, the sides
# alternating run by run so that drift of the machine hits both alike. Writes each run's JSON
# and ab.json (tests/gpu/ab_summary.py) to OUT_DIR.
#   tests/gpu/ab_env.sh OUT_DIR REPEATS "ENV_A" "ENV_B" "FLAGS" [MODEL ...]
# (FLAGS_A / FLAGS_B in the environment add flags to one side only, e.g. FLAGS_B=--no-prefix-cache)
# (a MODEL is a name of tests/gpu/configs/*.json, run with random weights, or a .gguf path)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$1"; REPEATS="$2"; ENV_A="$3"; ENV_B="$4"; FLAGS="$5"; shift 5
MODELS=("$@"); [ ${#MODELS[@]} -eq 0 ] && MODELS=(llama-3.2-1b qwen3-4b)
BIN="${BIN:-$ROOT/build-gpu/bin/lite-llama}"
mkdir -p "$OUT"
for m in "${MODELS[@]}"; do
  src=(-m "$ROOT/tests/gpu/configs/$m.json" --load-format dummy); name="$m"
  case "$m" in *.gguf) src=(-m "$m"); name="$(basename "$m" .gguf | tr '_' '-')";; esac
  for r in $(seq 1 "$REPEATS"); do
    for side in a b; do
      assign="$ENV_A" side_flags="${FLAGS_A:-}"; [ "$side" = b ] && assign="$ENV_B" side_flags="${FLAGS_B:-}"
      # shellcheck disable=SC2086
      env $assign "$BIN" bench "${src[@]}" --batch "${BATCHES:-1,8,64}" --runs 3 -q $FLAGS $side_flags \
        --json "$OUT/${name}_${side}_$r.json" >/dev/null
    done
  done
done
python3 "$ROOT/tests/gpu/ab_summary.py" "$OUT"
