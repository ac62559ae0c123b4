#!/usr/bin/env bash
# Device run 125 (H200): peer attention kernels (PyTorch SDPA flash / cuDNN / efficient, flash_attn
# if installed) beside lite-llama's attention-bench, one after the other on one card.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r125; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm,memory.total,driver_version --format=csv,noheader | tee $R/gpu.txt
git log --oneline -1 > $R/commit.txt
( [ -x build-gpu/bin/attention-bench ] || bash tests/gpu/build_gpu.sh attention-bench > $R/build.txt 2>&1 ) &
BP=$!
timeout 300 python3 tmp_exp/peer_attn.py > $R/peer.jsonl 2> $R/peer.err
echo "peer rc=$? $((SECONDS-S)) s"; tail -3 $R/peer.err
wait $BP || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 240 build-gpu/bin/attention-bench > $R/lite.jsonl 2> $R/lite.err
echo "lite rc=$? $((SECONDS-S)) s"
python3 - $R <<'PY'
import json, sys
R = sys.argv[1]
for f in ("peer.jsonl", "lite.jsonl"):
    for line in open(f"{R}/{f}"):
        try: d = json.loads(line)
        except Exception: continue
        k = d.get("kind") or d.get("kernel")
        if k in ("info", "copy", "gemm_bf16_8192", "prefill") or (k in ("decode", "decode_pdl") and d.get("batch") in (1, 4)):
            print(f[:4], json.dumps(d)[:200])
PY
cp tmp_exp/r125.sh tmp_exp/peer_attn.py $R/
echo "total $((SECONDS-S)) s"
