#!/usr/bin/env bash
# Final numbers of this stop on main: long_context.sh, then the short-prompt sweep with this
# stop's two decode changes switched off (stages 3, no gate|up SwiGLU epilogue) against the defaults.
set -u
O=$OUT/fin; mkdir -p $O
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
bash tests/gpu/build_gpu.sh > $O/build.txt 2>&1 || { cat $O/build.txt; exit 1; }
el build
nvidia-smi --query-gpu=name --format=csv,noheader > $O/gpu.txt
timeout 330 bash tests/gpu/long_context.sh build-gpu/bin $O/lc; el "long_context rc=$?"
grep -h '"decode' $O/lc/attention_bench.jsonl | grep '"batch": 1,' | head -20
for f in $O/lc/bench_*.txt; do echo "== $(basename $f)"; grep -E "^(1|4|16) " $f; done
BATCHES=1,8,64 timeout 150 bash tests/gpu/ab_env.sh $O/ab_short 2 "LITE_LLAMA_GATE_UP_SWIGLU=0 LITE_LLAMA_DECODE_STAGES=3" "" "" llama-3.2-1b qwen3-4b > $O/ab_short.txt 2>&1; el "ab short rc=$?"; tail -14 $O/ab_short.txt
cd $OUT && tar czf fin.tgz fin && rm -rf fin
