#!/usr/bin/env bash
set -u
O=$OUT/tp; mkdir -p $O
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
bash tests/gpu/build_gpu.sh lite-llama > $O/build.txt 2>&1 || { cat $O/build.txt; exit 1; }
el build
nvidia-smi --query-gpu=name --format=csv,noheader > $O/gpu.txt; nvidia-smi topo -m > $O/topo.txt 2>&1
export NCCL_NVLS_ENABLE=0
for rep in 1 2; do for v in 0 1; do for tp in 1 2; do
  LITE_LLAMA_GATE_UP_SWIGLU=$v timeout 120 build-gpu/bin/lite-llama bench --load-format dummy -m tests/gpu/configs/llama-3.1-8b.json --tp $tp --dtype bf16 --batch 1 --ctx 1024 --prompt-len 128 --gen-len 128 --runs 3 --json $O/8b_tp${tp}_v${v}_$rep.json > $O/8b_tp${tp}_v${v}_$rep.txt 2>&1
  el "8b tp$tp gate_up_swiglu=$v rep $rep: $(grep -E '^1 ' $O/8b_tp${tp}_v${v}_$rep.txt)"
done; done; done
cd $OUT && tar czf tp.tgz tp && rm -rf tp
