#!/usr/bin/env bash
# The numbers of docs/benchmarks/long-context.md, on the GPU machine: the attention kernel
# benchmark (TFLOP/s and GB/s beside the copy bandwidth and GEMM peak of the same run), then
# `bench` with dummy weights of real configs for prompts of 2k / 8k / 16k / 32k tokens at batch
# 1 / 4 / 16 (prefill tok/s, TTFT, decode tok/s, peak memory) and a decode --profile at 32k.
#   tests/gpu/long_context.sh BIN_DIR OUT [model ...]   (models: tests/gpu/configs/*.json names)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BIN=$1 OUT=$2
shift 2
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(llama-3.2-1b qwen3-4b)
mkdir -p "$OUT"
"$BIN/attention-bench" >"$OUT/attention_bench.jsonl" || exit 1
for m in "${models[@]}"; do
  for len in 2048 8192 16384 32768; do
    batches=1,4,16
    # Qwen3-4B's KV (144 KiB a token) holds 16 x 16k but not 16 x 32k on an 80 GB card.
    [ "$m" = qwen3-4b ] && [ $len -gt 16384 ] && batches=1,4
    "$BIN/lite-llama" bench -q -m "$ROOT/tests/gpu/configs/$m.json" --load-format dummy \
      --batch $batches --prompt-len $len --gen-len 64 --max-batched-tokens 32768 --runs 1 --warmup 1 -c $((len + 64)) \
      --json "$OUT/bench_${m}_${len}.json" >"$OUT/bench_${m}_${len}.txt" 2>&1 ||
      { echo "bench $m $len failed"; tail -3 "$OUT/bench_${m}_${len}.txt"; }
  done
  "$BIN/lite-llama" bench -q -m "$ROOT/tests/gpu/configs/$m.json" --load-format dummy --batch 1 --max-batched-tokens 32768 \
    --prompt-len 32768 --gen-len 32 --runs 1 --warmup 0 -c 32832 --profile \
    --json "$OUT/profile_${m}_32k.json" >"$OUT/profile_${m}_32k.txt" 2>&1 || echo "profile $m failed"
done
