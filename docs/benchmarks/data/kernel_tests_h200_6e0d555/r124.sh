#!/usr/bin/env bash
# Device run 124 (H200): every kernel test at HEAD (bcaf194 takes_gemv, 6e0d555 Gemm::plan were not GPU-tested).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r124; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
git log --oneline -1 > $R/commit.txt 2>/dev/null || true
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 400 build-gpu/bin/test_cuda_kernels > $R/tests.txt 2>&1
echo "tests rc=$?: $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST|tests ran' $R/tests.txt | head -12 | tr '\n' ' ') $((SECONDS-S)) s"
cp tmp_exp/r124.sh $R/
echo "total $((SECONDS-S)) s"
