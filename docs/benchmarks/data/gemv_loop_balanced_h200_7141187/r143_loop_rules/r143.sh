#!/usr/bin/env bash
# Device run 143 (H200): the one-token GEMV's looping grid on four models at batch 1 (prompt 128):
# loop 0, the default (4 an SM), no loop below two rounds (LL_EXP_LOOP_RULE=1), balanced rounds (2).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r143; mkdir -p $R
git diff HEAD > $R/diff.txt
bash tests/gpu/device_setup.sh >/dev/null 2>&1 || true
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
for r in 1 2; do
  for m in llama-3.2-3b qwen3-4b llama-3.2-1b qwen2.5-3b; do
    for v in loop0 def rule1 rule2; do
      e=""; [ $v = loop0 ] && e="LITE_LLAMA_GEMV1_LOOP=0"; [ $v = rule1 ] && e="LL_EXP_LOOP_RULE=1"; [ $v = rule2 ] && e="LL_EXP_LOOP_RULE=2"
      env $e timeout 60 build-gpu/bin/lite-llama bench -m tests/gpu/configs/$m.json --load-format dummy --batch 1,2 --runs 3 -q \
        --json $R/${m}_${v}_$r.json > /dev/null 2>&1
    done
  done
  echo "round $r $((SECONDS-S)) s"
done
python3 tests/gpu/ab_summary.py $R | sort
(cd $R && tar czf runs.tgz *.json && rm -f *_*_*.json)
cp tmp_exp/r143.sh $R/
echo "total $((SECONDS-S)) s"
