#!/usr/bin/env bash
# Runs every GPU check on the GPU machine: build (CUDA), kernel tests against the CPU reference,
# model parity against HF (random weights, real shapes), the default model's greedy output.
# Results (JSON/logs) go to $OUT (or ./gpu-results). The speed suite is bench/gpu_speed.py.
#   tests/gpu/run_all.sh [build|kernels|parity|greedy|limits ...]   (default: all)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-$ROOT/gpu-results}"
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
MODEL="${MODEL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
mkdir -p "$OUT"
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build kernels parity greedy limits)
rc=0
for s in "${steps[@]}"; do
  case "$s" in
    build)
      cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90a}" >"$OUT/cmake.log" 2>&1 &&
        cmake --build "$BUILD" -j 16 >"$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 1; } ;;
    kernels)
      ctest --test-dir "$BUILD" -L kernels --output-on-failure -j 4 >"$OUT/kernels.log" 2>&1 || rc=1
      tail -5 "$OUT/kernels.log" ;;
    unit)
      ctest --test-dir "$BUILD" -LE kernels --output-on-failure -j 8 >"$OUT/unit.log" 2>&1 || rc=1
      tail -5 "$OUT/unit.log" ;;
    parity)
      python3 "$ROOT/tests/gpu/model_parity.py" "$BUILD/bin/lite-llama" "$OUT/parity.json" || rc=1 ;;
    greedy)
      python3 "$ROOT/tests/gpu/default_model_greedy.py" "$BUILD/bin/lite-llama" "$MODEL" "$OUT/greedy.json" || rc=1 ;;
    limits)
      python3 "$ROOT/tests/gpu/kv_tokens_limit.py" "$BUILD/bin/lite-llama" "$OUT/kv_tokens_limit.json" || rc=1 ;;
    *) echo "unknown step $s" >&2; exit 2 ;;
  esac
done
exit $rc
