#!/usr/bin/env bash
# Device run 72 (1 x H100): issue 21's "short prompts must not get slower" at HEAD: the batch sweep
# of docs/benchmarks/report.md (prompt 128, 256 new tokens, batch 1-64, lite-llama only), to set
# beside the d5f3805 rows (before the long-context kernels) and bf01649; plus the quantised-GEMV
# tests after GqArgs::num_sms.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r72; mkdir -p $R/cmp
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
git log --oneline -1 > $R/commit.txt 2>/dev/null; git status --short >> $R/commit.txt 2>/dev/null
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 60 build-gpu/bin/test_cuda_kernels --gtest_filter='*Gq*:*Moe*:*Quant*' > $R/tests_gq.txt 2>&1
echo "gq tests rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests_gq.txt | head -5 | tr '\n' ' ') $((SECONDS-S)) s"
left=$((560-SECONDS+S))
timeout $left python3 bench/compare_hf.py --bin build-gpu/bin/lite-llama --no-report --time-limit-s $((left-20)) \
  --out $R/cmp --skip-done $R/cmp --engines lite-llama --sections batch \
  --models ${MODELS:-llama-3.2-1b,qwen3-4b,llama-3.2-3b,qwen2.5-3b} 2>&1 | tail -30
cp tmp_exp/r72.sh $R/; echo "total $((SECONDS-S)) s"
