#!/usr/bin/env bash
# Device run 73 (1 x H100): long-context.md's one command at HEAD (attention-bench, bench at
# 2k-32k x batch 1/4/16, --profile at 32k), to regenerate the page's tables.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r73; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
git log --oneline -1 > $R/commit.txt 2>/dev/null
bash tests/gpu/build_gpu.sh lite-llama attention-bench > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout $((555-SECONDS+S)) bash tests/gpu/long_context.sh build-gpu/bin $R/lctx
echo "long context rc $? $((SECONDS-S)) s"; ls $R/lctx
cp tmp_exp/r73.sh $R/; echo "total $((SECONDS-S)) s"
