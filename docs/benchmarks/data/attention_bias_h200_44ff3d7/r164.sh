#!/usr/bin/env bash
# Device run 164 (H200): this stop's final code: all kernel tests, the o_proj bias (attention_bias)
# on cuda against transformers, and a short bench of two models.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r164; mkdir -p $R
git log --oneline -1 > $R/commit.txt
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 240 python3 tmp_exp/obias_check.py tests/fixtures/models/llama build-gpu/bin/lite-llama $R/obias.json 2>&1 | tail -3
echo "obias $((SECONDS-S)) s"
timeout 300 build-gpu/bin/test_cuda_kernels > $R/tests.txt 2>&1
echo "tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|SKIPPED \]' $R/tests.txt | head -3 | tr '\n' ' ') $((SECONDS-S)) s"
grep -E "^\[  (PASSED|FAILED|SKIPPED)|FAILED  \]" $R/tests.txt > $R/tests_summary.txt; rm -f $R/tests.txt
for m in llama-3.2-1b qwen3-4b; do
  timeout 100 build-gpu/bin/lite-llama bench -q -m tests/gpu/configs/$m.json --load-format dummy --batch 1,8 --prompt-len 128 \
    --gen-len 64 --runs 2 --warmup 1 --json $R/bench_$m.json > /dev/null 2>&1; echo "bench $m rc=$?"
done
python3 -c "import json,sys; [print(f, r[\"batch\"], r[\"step_ms\"][\"median\"]) for f in sys.argv[1:] for r in json.load(open(f))[\"results\"]]" $R/bench_*.json; cp tmp_exp/r164.sh tmp_exp/obias_check.py $R/
echo "total $((SECONDS-S)) s"
