#!/usr/bin/env bash
# A/B of two builds on `lite-llama bench` (random weights of the real shapes, prompt 128, 256 new
# tokens): this tree's build-gpu against another source tree (a `git archive BASE src include
# tools cmake CMakeLists.txt` unpacked into an ignored folder and carried), the binaries
# alternating run by run so that drift of the machine hits both alike. Writes each run's JSON and
# ab.json (median decode tok/s and step ms per model, batch and build) to OUT_DIR.
#   tests/gpu/ab_builds.sh BASE_SRC OUT_DIR [REPEATS] [MODEL ...]   (models: tests/gpu/configs/*.json)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BASE_SRC="$(cd "$1" && pwd)"; OUT="$2"; REPEATS="${3:-2}"; shift 3 || shift $#
MODELS=("$@"); [ ${#MODELS[@]} -eq 0 ] && MODELS=(llama-3.2-1b qwen3-4b)
NEW_BIN="${NEW_BIN:-$ROOT/build-gpu/bin/lite-llama}"
BASE_BUILD="${BASE_BUILD:-$ROOT/build-base}"
mkdir -p "$OUT"
if [ ! -x "$BASE_BUILD/bin/lite-llama" ]; then
  cmake -S "$BASE_SRC" -B "$BASE_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON \
    -DLITE_LLAMA_TESTS=OFF -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90a}" >"$OUT/base_cmake.log" 2>&1
  cmake --build "$BASE_BUILD" -j 16 --target lite-llama >"$OUT/base_build.log" 2>&1
fi
for m in "${MODELS[@]}"; do
  for r in $(seq 1 "$REPEATS"); do
    for which in base new; do
      bin="$NEW_BIN"; [ "$which" = base ] && bin="$BASE_BUILD/bin/lite-llama"
      "$bin" bench -m "$ROOT/tests/gpu/configs/$m.json" --load-format dummy --batch 1,8,64 \
        --runs 3 -q --json "$OUT/${m}_${which}_$r.json" >/dev/null
    done
  done
done
python3 "$ROOT/tests/gpu/ab_summary.py" "$OUT"
