#!/usr/bin/env bash
# Device run 186 (H200): echo scoring with an aligned vocabulary (Llama-3.2-1B's 128,256; the
# dummy tokenizer), where the LM head takes cuBLASLt's Hopper kernels, against r182's 128,257.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r186; mkdir -p $R
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
PORT=8391
for cfg in tests/gpu/configs/llama-3.2-1b.json tmp_exp/l1b/config.json; do
  build-gpu/bin/lite-llama serve -m $cfg --load-format dummy --port $PORT -c 16384 > $R/serve.log 2>&1 &
  SP=$!
  for i in $(seq 1 120); do curl -sf localhost:$PORT/health > /dev/null && break; sleep 1; done
  echo "== $cfg"
  python3 tmp_exp/score_speed.py http://127.0.0.1:$PORT 4096 4 2>&1
  python3 tmp_exp/score_speed.py http://127.0.0.1:$PORT 12000 2 2>&1
  kill $SP; wait $SP 2>/dev/null
done
