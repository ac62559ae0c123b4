#!/usr/bin/env bash
# Device run 34 (1 x H100): the final decode kernel (softmax over rows 0-7 where G <= 8, padded
# combine): kernel tests, the committed timeline build (-DLITE_LLAMA_DECODE_TIMELINE=ON), timelines,
# and the full attention-bench (copy bandwidth, prefill, decode table).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
q() { nvidia-smi --query-gpu=index,name,temperature.gpu,power.draw,clocks.sm,clocks_throttle_reasons.active --format=csv,noheader; }
q
if nvidia-smi --query-gpu=temperature.gpu,name --format=csv,noheader | head -1 | awk -F', ' '$1>55 || $2 !~ /H100/{b=1} END{exit !b}'; then echo "hot or not H100: skip"; exit 0; fi
R=/tmp/r34; mkdir -p $R
(CMAKE_FLAGS=-DLITE_LLAMA_DECODE_TIMELINE=ON BUILD_DIR=/tmp/tlb bash tests/gpu/build_gpu.sh attention-bench > $R/build_tl.txt 2>&1; echo "tl build rc $?" >> $R/build_tl.txt) &
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; }
wait
tail -2 $R/build_tl.txt
echo "build $((SECONDS-S)) s"
timeout 300 build-gpu/bin/test_cuda_kernels > $R/tests.txt 2>&1; echo "all kernel tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|SKIPPED \]" $R/tests.txt | head -10
for c in "64 1 8192 0" "64 1 8192 1" "128 1 8192 1" "64 1 32768 1" "64 4 8192 1"; do
  set -- $c
  timeout 60 /tmp/tlb/bin/attention-bench --timeline $1 $2 $3 $4 > $R/tl_D$1_B$2_C$3_P$4.txt 2>&1 || echo "timeline failed $c"
done
python3 tools/kernel_bench/decode_timeline.py $R/tl_*.txt | grep -E "^timeline|^median"
echo "timelines $((SECONDS-S)) s"; q
timeout 400 build-gpu/bin/attention-bench > $R/attention_bench.jsonl 2> $R/attention_bench.err; echo "attention-bench rc $?"
grep -E '"copy"|decode' $R/attention_bench.jsonl | head -60
q
cp tmp_exp/r34.sh $R/; git log --oneline -1 > $R/commit.txt; git status --short >> $R/commit.txt
tar czf $OUT/r34.tgz -C /tmp r34
echo "total $((SECONDS-S)) s"
