#!/usr/bin/env bash
# Device run 58 (1 x H100): D 128 decode with four K/V stages and one block an SM (16 splits at
# batch 1) where the grid fits one wave (LL_D128S4=1), against three stages and two blocks, on
# 9cc3eef (the carveout on). Decode tests with it, attention-bench cells and Qwen3-4B steps alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r58; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
LL_D128S4=1 timeout 90 build-gpu/bin/test_cuda_kernels --gtest_filter='*Decode*' > $R/tests_s4.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests_s4.txt | head -3 | tr '\n' ' ')"
B=build-gpu/bin/attention-bench
for r in 1 2; do for m in 0 1; do
  for c in "128 1 8192" "128 1 16384" "128 1 32768" "128 4 8192"; do
    set -- $c; echo -n "s4 $m: "; LL_D128S4=$m timeout 30 $B --decode $1 $2 $3 0 3 1
  done
done; done | tee $R/kernel_cells.txt
echo "kernel $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2; do for m in 0 1; do
  LL_D128S4=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
      --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16584 -q --json $R/ab/q4b-16384_s${m}_$r.json > /dev/null 2>&1
  LL_D128S4=$m timeout 60 build-gpu/bin/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
      --prompt-len 128 --gen-len 256 --runs 3 -q --json $R/ab/q4b-128_s${m}_$r.json > /dev/null 2>&1
  echo "round $r s4 $m $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab | tee $R/ab.txt
rm -f $R/ab/*_s[01]_[12].json
cp tmp_exp/r58.sh $R/; echo "total $((SECONDS-S)) s"
