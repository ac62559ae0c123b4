#!/usr/bin/env bash
# Device run 8 (2 x H100): Llama-3.1-8B batch 1, tp 1 vs tp 2 with the one-token GEMV loop 0 / 3 / 4.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
bash tests/gpu/build_gpu.sh lite-llama > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
nvidia-smi --query-gpu=name --format=csv > $OUT/gpu.txt
export NCCL_NVLS_ENABLE=0
mkdir -p $OUT/tp
for r in 1 2; do
  for c in tp1-loop0:1:0 tp2-loop0:2:0 tp2-loop3:2:3 tp2-loop4:2:4; do
    IFS=: read l tp n <<< "$c"
    LITE_LLAMA_GEMV1_LOOP=$n timeout 120 build-gpu/bin/lite-llama bench --load-format dummy -m tests/gpu/configs/llama-3.1-8b.json \
      --tp $tp --dtype bf16 --batch 1 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 -q \
      --json $OUT/tp/llama-3.1-8b_${l}_$r.json >/dev/null 2>>$OUT/tp/err.txt || echo "FAILED $l $r"
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py $OUT/tp
cp tmp_exp/r8.sh $OUT/
cd $OUT && tar czf tp.tgz tp && rm -rf tp
