#!/usr/bin/env bash
# Device run 43 (1 x H100): decode attention with more than one wave of split blocks at batch 1-4
# (CudaTuning::decode_waves, commit after ebf6602). Does a second wave even out the blocks' ends
# (32k D 64 batch 1: median 26.8 / last 29.3 us in the e4919bb timeline)? Tests, attention-bench
# splits sweep, model steps with LITE_LLAMA_DECODE_WAVES=1/2, then LITE_LLAMA_DECODE_SPLIT_KEYS=16/128/256
# at 2k / 8k. Writes to $OUT as it goes (about 7 minutes with the build).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r43; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 150 build-gpu/bin/test_cuda_kernels --gtest_filter='*Attention*:*Decode*' > $R/tests.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests.txt | head -5 | tr '\n' ' ') $((SECONDS-S)) s"
for c in "64 1 8192 4 49 98 128" "64 1 16384 4 49 98 128" "64 1 32768 4 49 98 128" "128 1 16384 3 33 66 99" "128 1 32768 3 33 66 99" "64 4 8192 4 12 24 36"; do
  set -- $c; D=$1 B=$2 L=$3 ST=$4; shift 4
  for sp in "$@"; do timeout 20 build-gpu/bin/attention-bench --decode $D $B $L $sp $ST 1; done
done | tee $R/decode.txt
echo "bench $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2; do for w in 1 2; do
  for len in 8192 32768; do
    LITE_LLAMA_DECODE_WAVES=$w timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_w${w}_$r.json > /dev/null 2>&1
  done
  LITE_LLAMA_DECODE_WAVES=$w timeout 40 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
    --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16600 -q --json $R/ab/q4b-16384_w${w}_$r.json > /dev/null 2>&1
  echo "round $r w$w $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab > $R/ab_long.txt; cat $R/ab_long.txt; rm -f $R/ab/*_w*_[12].json
# Fewer, longer splits at short contexts: a smaller merge (1.6 us of a 2k layer's 7.4 us in-step).
mkdir -p $R/sk
for r in 1 2; do for k in 16 128 256; do for len in 2048 8192; do
  LITE_LLAMA_DECODE_SPLIT_KEYS=$k timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
    --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/sk/l1b-${len}_k${k}_$r.json > /dev/null 2>&1
done; done; echo "split keys round $r $((SECONDS-S)) s"; done
python3 tests/gpu/ab_summary.py $R/sk > $R/ab_split_keys.txt; cat $R/ab_split_keys.txt; rm -f $R/sk/*_k*_[12].json
cp tmp_exp/r43.sh $R/; echo "total $((SECONDS-S)) s"
