#!/usr/bin/env bash
# Device run 121 (H200): cuBLASLt's top-1 heuristic against the fastest of its top-24 candidates
# at 2-16 tokens (tmp_exp/gemm_algo.cu, standalone).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r121; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
nvcc -O2 -std=c++17 -arch=sm_90a tmp_exp/gemm_algo.cu -lcublasLt -o /tmp/gemm-algo > $R/build.txt 2>&1 || { cat $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 400 /tmp/gemm-algo | tee $R/gemm_algo.txt
cp tmp_exp/r121.sh tmp_exp/gemm_algo.cu $R/
echo "total $((SECONDS-S)) s"
