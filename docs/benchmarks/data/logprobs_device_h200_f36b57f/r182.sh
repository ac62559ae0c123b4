#!/usr/bin/env bash
# Device run 182 (H200): scoring chunks of max_tokens with the LM head a max_num_seqs slice at a
# time (Decoder::token_logits) against chunks of max_num_seqs tokens (HEAD 31655fe): `lite-llama
# score` logprobs equal, and lm-eval-style echo scoring through the server, 2 rounds alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r182; mkdir -p $R
rm -rf /tmp/old && mkdir /tmp/old && cp -r CMakeLists.txt cmake src include tools tests bench python scripts pyproject.toml /tmp/old/ 2>/dev/null
tar xzf tmp_exp/old182.tgz -C /tmp/old
cp -r .deps /tmp/old/
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
BUILD_DIR=/tmp/old/build-gpu bash /tmp/old/tests/gpu/build_gpu.sh lite-llama > $R/build_old.txt 2>&1 || { tail -30 $R/build_old.txt; exit 1; }
echo "builds $((SECONDS-S)) s"
build-gpu/bin/test_cuda_kernels --gtest_filter='*Graph*' 2>&1 | grep -E "^\[  (PASSED|FAILED)" | head
MODEL=tmp_exp/l1b/config.json
python3 -c "
import json,random
r=random.Random(1)
json.dump([[r.randrange(1000,120000) for _ in range(n)] for n in (20000, 3000)], open('/tmp/t.json','w'))"
for side in new old; do
  B=build-gpu/bin/lite-llama; [ $side = old ] && B=/tmp/old/build-gpu/bin/lite-llama
  t0=$(date +%s%N); $B score -m $MODEL --load-format dummy --tokens /tmp/t.json -q --full > /tmp/$side.json 2>/tmp/$side.err; t1=$(date +%s%N)
  echo "score 20000 + 3000 tokens, $side: $(( (t1 - t0) / 1000000 )) ms (process)"; head -2 /tmp/$side.err
done
python3 - /tmp/new.json /tmp/old.json <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for sa, sb in zip(a["sequences"], b["sequences"]):
    d = max(abs(x - y) for x, y in zip(sa["logprobs"], sb["logprobs"]))
    agree = sum(x == y for x, y in zip(sa["argmax"], sb["argmax"])) / len(sa["argmax"])
    print(f" {len(sa['logprobs'])} positions: logprobs max |diff| {d:.2e}, argmax agreement {agree:.4f}")
PY
PORT=8391
for r in 1 2; do
  for side in new old; do
    B=build-gpu/bin/lite-llama; [ $side = old ] && B=/tmp/old/build-gpu/bin/lite-llama
    $B serve -m $MODEL --load-format dummy --port $PORT -c 16384 > $R/serve_${side}_$r.log 2>&1 &
    SP=$!
    for i in $(seq 1 120); do curl -sf localhost:$PORT/health > /dev/null && break; sleep 1; done
    echo "== $side round $r"
    python3 tmp_exp/score_speed.py http://127.0.0.1:$PORT 1024 8 2>&1
    python3 tmp_exp/score_speed.py http://127.0.0.1:$PORT 4096 4 2>&1
    python3 tmp_exp/score_speed.py http://127.0.0.1:$PORT 12000 2 2>&1
    kill $SP; wait $SP 2>/dev/null
  done
done
cp tmp_exp/r182.sh $R/
echo "total $((SECONDS-S)) s"
