#!/usr/bin/env bash
# Device run 35 (1 x H100): decode attention timeline inside model steps (diagnostic build with
# -DLITE_LLAMA_DECODE_TIMELINE=ON, LITE_LLAMA_DECODE_TIMELINE_OUT), Llama-3.2-1B 2k / 8k / 32k and
# Qwen3-4B 16k, batch 1, graphs (default) and eager.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
q() { nvidia-smi --query-gpu=index,name,temperature.gpu,power.draw,clocks.sm,clocks_throttle_reasons.active --format=csv,noheader; }
q
if nvidia-smi --query-gpu=temperature.gpu,name --format=csv,noheader | head -1 | awk -F', ' '$1>55 || $2 !~ /H100/{b=1} END{exit !b}'; then echo "hot or not H100: skip"; exit 0; fi
R=/tmp/r35; mkdir -p $R
CMAKE_FLAGS=-DLITE_LLAMA_DECODE_TIMELINE=ON BUILD_DIR=/tmp/tlb bash tests/gpu/build_gpu.sh lite-llama > $R/build_tl.txt 2>&1 || { tail -20 $R/build_tl.txt; exit 1; }
echo "build $((SECONDS-S)) s"
M=tests/gpu/configs
for c in "llama-3.2-1b 2048" "llama-3.2-1b 8192" "llama-3.2-1b 32768" "qwen3-4b 16384"; do
  set -- $c
  for g in graph eager; do
    fl=""; [ $g = eager ] && fl="--no-cuda-graph"
    LITE_LLAMA_DECODE_TIMELINE_OUT=$R/tl_$1_$2_$g.txt timeout 120 /tmp/tlb/bin/lite-llama bench -m $M/$1.json --load-format dummy --batch 1 \
      --prompt-len $2 --gen-len 16 --runs 1 --warmup 0 -c $(( $2 + 200 )) --max-batched-tokens 32768 -q $fl \
      --json $R/bench_$1_$2_$g.json > $R/bench_$1_$2_$g.txt 2>&1 || { echo "FAILED $c $g"; tail -3 $R/bench_$1_$2_$g.txt; }
    head -1 $R/tl_$1_$2_$g.txt
    python3 tools/kernel_bench/decode_timeline.py $R/tl_$1_$2_$g.txt | grep -E "^median"
  done
done
q
cp tmp_exp/r35.sh $R/; git diff > $R/tree.diff
tar czf $OUT/r35.tgz -C /tmp r35
echo "total $((SECONDS-S)) s"
