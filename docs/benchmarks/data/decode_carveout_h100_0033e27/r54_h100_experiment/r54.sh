#!/usr/bin/env bash
# Device run 54 (1 x H100): do merge blocks (and other small PDL kernels) keep the next decode
# split blocks off their SMs because they run at a different L1 / shared-memory carveout?
# LL_CARVEOUT=0: as now; 1: split + merge at the max shared carveout; 2: also the RoPE + KV
# write; 3: every kernel launched through launch_pdl. Alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r54; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama attention-bench > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
for r in 1 2; do for m in 0 1; do
  for c in "64 1 8192 4" "64 1 16384 4" "64 1 32768 4" "128 1 8192 3" "128 1 16384 3" "128 1 32768 3" "64 4 8192 4" "128 4 8192 3" "64 16 8192 3"; do
    set -- $c; echo -n "mode $m: "; LL_CARVEOUT=$m timeout 30 $B --decode $1 $2 $3 0 $4 1
  done
done; done | tee $R/kernel_cells.txt
echo "kernel $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2; do for m in 0 1 2 3; do
  for len in 2048 8192 32768; do
    LL_CARVEOUT=$m timeout 40 build-gpu/bin/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_m${m}_$r.json > /dev/null 2>&1
  done
  LL_CARVEOUT=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
      --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16584 -q --json $R/ab/q4b-16384_m${m}_$r.json > /dev/null 2>&1
  echo "round $r mode $m $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab_long.txt
cp tmp_exp/r54.sh $R/; echo "total $((SECONDS-S)) s"
