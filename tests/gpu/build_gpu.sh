#!/usr/bin/env bash
# On the GPU machine: unpack the carried headers, configure and build the given targets (default:
# the CLI, the kernel tests and the kernel benchmark) into ${BUILD_DIR:-build-gpu}.
#   tests/gpu/build_gpu.sh [target ...]
# (CMAKE_FLAGS in the environment adds configure flags, e.g. -DLITE_LLAMA_DECODE_TIMELINE=ON)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build-gpu}"
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(lite-llama test_cuda_kernels attention-bench)
bash "$ROOT/tests/gpu/device_setup.sh" >/dev/null 2>&1 || true
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON \
  -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90a}" ${CMAKE_FLAGS:-} >"$BUILD.cmake.log" 2>&1 ||
  { tail -30 "$BUILD.cmake.log"; exit 1; }
cmake --build "$BUILD" -j 16 --target "${targets[@]}" >"$BUILD.build.log" 2>&1 ||
  { grep -E "error|FAILED" "$BUILD.build.log" | head -30; exit 1; }
