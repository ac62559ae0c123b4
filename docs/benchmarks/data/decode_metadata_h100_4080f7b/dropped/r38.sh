#!/usr/bin/env bash
# Device run 38 (next stop, 1 x H100): do decode attention's split blocks start earlier inside a
# step when the QKV GEMV leaves room (looping GEMV blocks, LITE_LLAMA_GEMV1_LOOP=n)? In-step
# timelines (diagnostic build) and step times, Llama-3.2-1B 2k / 8k, batch 1, n = 0 / 2 / 3.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader
R=/tmp/r38; mkdir -p $R/ab
(CMAKE_FLAGS=-DLITE_LLAMA_DECODE_TIMELINE=ON BUILD_DIR=/tmp/tlb bash tests/gpu/build_gpu.sh lite-llama > $R/build_tl.txt 2>&1; echo "tl rc $?" >> $R/build_tl.txt) &
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
wait; tail -1 $R/build_tl.txt; echo "build $((SECONDS-S)) s"
M=tests/gpu/configs
for n in 0 2 3; do for len in 2048 8192; do
  LITE_LLAMA_GEMV1_LOOP=$n LITE_LLAMA_DECODE_TIMELINE_OUT=$R/tl_${len}_loop$n.txt timeout 60 /tmp/tlb/bin/lite-llama bench -m $M/llama-3.2-1b.json \
    --load-format dummy --batch 1 --prompt-len $len --gen-len 16 --runs 1 --warmup 0 -c $((len + 200)) -q > /dev/null 2>&1
  echo "loop $n ctx $len: $(python3 tools/kernel_bench/decode_timeline.py $R/tl_${len}_loop$n.txt | grep median)"
done; done
for r in 1 2; do for n in 0 2 3; do for len in 2048 8192; do
  LITE_LLAMA_GEMV1_LOOP=$n timeout 60 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
    --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_loop${n}_$r.json > /dev/null 2>&1
done; done; done
python3 tests/gpu/ab_summary.py $R/ab
tar czf $OUT/r38.tgz -C /tmp r38; echo "total $((SECONDS-S)) s"
