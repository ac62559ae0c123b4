#!/usr/bin/env bash
# Device run 187 (H200): decode steps with an odd vocabulary (128,257: the logits rows are not
# 16-byte aligned, cuBLASLt takes an sm75 align1 kernel for the LM head) against Llama-3.2-1B's
# 128,256, batch 1 / 16 / 64 / 256, prompt 128, 64 new tokens.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r187; mkdir -p $R
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
for b in 1 16 64 256; do
  for cfg in tests/gpu/configs/llama-3.2-1b.json tmp_exp/l1b_odd.json; do
    timeout 100 build-gpu/bin/lite-llama bench -q -m $cfg --load-format dummy --batch $b --prompt-len 128 --gen-len 64 --runs 2 --warmup 1 --json /tmp/b.json > /dev/null 2>&1
    python3 -c "
import json,sys
x=json.load(open('/tmp/b.json'))['results'][0]
print('batch $b', '$cfg'.split('/')[-1], 'step %.3f ms' % x['step_ms']['median'], 'ttft %.2f ms' % x.get('ttft_ms',{}).get('median', float('nan')))"
  done
done
