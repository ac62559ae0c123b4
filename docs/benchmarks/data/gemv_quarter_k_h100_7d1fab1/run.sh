#!/usr/bin/env bash
# Device run 9 (H100): one-token GEMV quarter-K slices (LITE_LLAMA_GEMV1_QUARTER_K_MAX=3072) A/B.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
nvidia-smi --query-gpu=name --format=csv,noheader
build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaLinear*' > $OUT/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/tests.txt | tail -8
echo "tests $((SECONDS-S)) s"
mkdir -p $OUT/q
for r in 1 2; do
  for side in q0 q3072; do
    n=${side#q}
    for m in llama-3.2-1b qwen3-4b qwen3-30b-a3b; do
      LITE_LLAMA_GEMV1_QUARTER_K_MAX=$n timeout 60 build-gpu/bin/lite-llama bench -q -m tests/gpu/configs/$m.json --load-format dummy \
        --batch 1 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 2 --json $OUT/q/${m}_${side}_$r.json >/dev/null 2>>$OUT/q/err.txt || echo "FAILED $m $side"
    done
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py $OUT/q
cp tmp_exp/r9.sh $OUT/
cd $OUT && tar czf q.tgz q && rm -rf q
