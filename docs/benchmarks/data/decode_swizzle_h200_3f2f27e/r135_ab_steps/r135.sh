#!/usr/bin/env bash
# Device run 135 (H200): swizzled decode K/V tiles, end to end against HEAD (build-base from r134),
# builds alternated: Llama-3.2-1B 4k prompts batch 1/16/32/64, 32k batch 1; Qwen3-4B 16k batch 1.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r135; mkdir -p $R
[ -x build-base/bin/lite-llama ] && [ -x build-gpu/bin/lite-llama ] || { echo "builds missing"; exit 1; }
for r in 1 2; do
  for which in base new; do
    bin=build-gpu/bin/lite-llama; [ $which = base ] && bin=build-base/bin/lite-llama
    timeout 120 $bin bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1,16,32,64 \
      --prompt-len 4096 --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c 4160 \
      --json $R/llama-3.2-1b_${which}_$r.json > $R/bench_${which}_$r.txt 2>&1 || tail -3 $R/bench_${which}_$r.txt
    timeout 120 $bin bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len 32768 --gen-len 128 --max-batched-tokens 32768 --runs 2 --warmup 1 -c 32900 \
      --json $R/llama-3.2-1b-32k_${which}_$r.json > $R/bench32k_${which}_$r.txt 2>&1 || tail -3 $R/bench32k_${which}_$r.txt
    timeout 120 $bin bench -q -m tests/gpu/configs/qwen3-4b.json --load-format dummy --batch 1 \
      --prompt-len 16384 --gen-len 128 --max-batched-tokens 32768 --runs 2 --warmup 1 -c 16520 \
      --json $R/qwen3-4b-16k_${which}_$r.json > $R/benchq_${which}_$r.txt 2>&1 || tail -3 $R/benchq_${which}_$r.txt
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py $R
cp tmp_exp/r135.sh $R/
echo "total $((SECONDS-S)) s"
