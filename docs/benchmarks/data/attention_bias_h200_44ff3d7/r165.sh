#!/usr/bin/env bash
# Device run 165 (H200): the o_proj bias (attention_bias) on cuda against transformers, head dim 64.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r165; mkdir -p $R
git log --oneline -1 > $R/commit.txt
[ -x build-gpu/bin/lite-llama ] || bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 240 python3 tmp_exp/obias_check.py new build-gpu/bin/lite-llama $R/obias.json 2>&1 | tail -1
cp tmp_exp/r165.sh tmp_exp/obias_check.py $R/
echo "total $((SECONDS-S)) s"
