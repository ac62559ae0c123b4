#!/usr/bin/env bash
# Device run 120 (H200): long-context.md's command at the current tree, one model a call
# (r120.sh MODEL); the attention-bench part runs with each.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; M=$1; R=$OUT/r120_$M; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt
[ -x build-gpu/bin/lite-llama ] && [ -x build-gpu/bin/attention-bench ] || bash tests/gpu/build_gpu.sh lite-llama attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 540 bash tests/gpu/long_context.sh build-gpu/bin $R $M
echo "run $((SECONDS-S)) s"
grep -h -E "TTFT|prefill|decode" $R/bench_*.txt | head -40
cp tmp_exp/r120.sh $R/
cd $OUT && tar czf r120_$M.tgz r120_$M && rm -rf r120_$M
echo "total $((SECONDS-S)) s"
