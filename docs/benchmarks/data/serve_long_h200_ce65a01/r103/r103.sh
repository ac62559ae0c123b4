#!/usr/bin/env bash
# Device run 103: tree = aa9576a + mixed2k case. Long prompts through the server (tests/gpu/serve_long.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r103; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
timeout 400 bash tests/gpu/serve_long.sh build-gpu/bin/lite-llama $R/serve > $R/serve_long.txt 2>&1
echo "serve_long rc $? $((SECONDS-S)) s" | tee -a $R/summary.txt
tail -5 $R/serve_long.txt
(cd $R && tar -czf logs.tgz serve build.txt && rm -rf build.txt && cp serve/summary.json . 2>/dev/null)
cp tmp_exp/r103.sh $R/
