#!/usr/bin/env bash
# Device run 183 (H200): where echo scoring's time goes (timing prints from r184_timing.diff, not
# committed): the scoring forward, the LM-head slices with score_rows, score_now, the response.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r184; mkdir -p $R
git apply tmp_exp/r184_timing.diff 2>/dev/null || patch -p1 < tmp_exp/r184_timing.diff
bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
MODEL=tmp_exp/l1b/config.json
PORT=8391
build-gpu/bin/lite-llama serve -m $MODEL --load-format dummy --port $PORT -c 16384 > $R/serve.log 2>&1 &
SP=$!
for i in $(seq 1 120); do curl -sf localhost:$PORT/health > /dev/null && break; sleep 1; done
python3 tmp_exp/score_speed.py http://127.0.0.1:$PORT 12000 2 2>&1
kill $SP; wait $SP 2>/dev/null
grep -E "SLICE|SCORE|RESPONSE|max-batched|step budget|tokens a step" $R/serve.log | tail -30
head -5 $R/serve.log
echo "total $((SECONDS-S)) s"
