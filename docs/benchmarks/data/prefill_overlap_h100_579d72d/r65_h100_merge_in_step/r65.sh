#!/usr/bin/env bash
# Device run 65 (1 x H100): EXPERIMENT LL_NULL inside model steps: bit 1 launches no decode merge
# (what folding the merge into the output projection could save at most), bit 0 skips the split
# kernel's compute. Steps alternated 0 / 2 / 1, 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r65; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2; do for m in 0 2 1; do
  for len in 8192 32768; do
    LL_NULL=$m timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_n${m}_$r.json > /dev/null 2>&1
  done
  LL_NULL=$m timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 4 \
      --prompt-len 8192 --gen-len 64 --runs 2 --warmup 1 -c 8400 -q --json $R/ab/l1b4-8192_n${m}_$r.json > /dev/null 2>&1
  LL_NULL=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
      --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16584 -q --json $R/ab/q4b-16384_n${m}_$r.json > /dev/null 2>&1
  echo "round $r null $m $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab.txt
rm -f $R/ab/*_n[012]_[12].json
cp tmp_exp/r65.sh $R/; echo "total $((SECONDS-S)) s"
