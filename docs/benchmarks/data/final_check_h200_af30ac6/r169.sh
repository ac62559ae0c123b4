#!/usr/bin/env bash
# Device run 169 (H200): final check of this stop's HEAD: all CUDA kernel tests, and model parity
# against HF transformers (random weights, real shapes; exercises Engine::score on the GPU).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r169; mkdir -p $R
git log --oneline -1 > $R/head.txt 2>&1
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 280 build-gpu/bin/test_cuda_kernels > $R/kernels.txt 2>&1
echo "kernels rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|tests, listed below' $R/kernels.txt | tr '\n' ' ') $((SECONDS-S)) s"
grep -E "FAILED  \]" $R/kernels.txt | head
grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]|SKIPPED \]" $R/kernels.txt > $R/kernels_summary.txt; rm -f $R/kernels.txt
timeout $((540 - (SECONDS - S))) python3 tests/gpu/model_parity.py build-gpu/bin/lite-llama $R/parity.json > $R/parity.txt 2>&1
echo "parity rc=$? $((SECONDS-S)) s"; tail -15 $R/parity.txt
cp tmp_exp/r169.sh $R/
