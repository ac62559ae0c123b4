#!/usr/bin/env bash
# Device run 189 (H200): logits rows padded to 4 columns on the GPU (Decoder::logit_cols) for a
# vocabulary that is not a multiple of 4: kernel tests, decode steps and echo scoring with 128,257
# (padded) against 128,256, score / logprob checks on the padded rows.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r189; mkdir -p $R
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaLinear*:*Sampl*:*Graph*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" | head
B=build-gpu/bin/lite-llama
for b in 16 64 256; do
  for cfg in tests/gpu/configs/llama-3.2-1b.json tmp_exp/l1b_odd.json; do
    timeout 100 $B bench -q -m $cfg --load-format dummy --batch $b --prompt-len 128 --gen-len 64 --runs 2 --warmup 1 --json /tmp/b.json > /dev/null 2>&1
    python3 -c "
import json
x=json.load(open('/tmp/b.json'))['results'][0]
print('batch $b', '$cfg'.split('/')[-1], 'step %.3f ms' % x['step_ms']['median'])"
  done
done
python3 -c "
import json,random
r=random.Random(1)
json.dump([[r.randrange(1000,120000) for _ in range(3000)]], open('/tmp/t.json','w'))"
$B score -m tmp_exp/l1b/config.json --load-format dummy --tokens /tmp/t.json -q --full > /tmp/new.json 2>/dev/null
$B score -m tmp_exp/l1b/config.json --load-format dummy --tokens /tmp/t.json -q --full --dump-logits /tmp/d.bin > /tmp/old.json 2>/dev/null
python3 - /tmp/new.json /tmp/old.json /tmp/d.bin <<'PY'
import json, sys, os
a, b = (json.load(open(f)) for f in sys.argv[1:3])
sa, sb = a["sequences"][0], b["sequences"][0]
d = max(abs(x - y) for x, y in zip(sa["logprobs"], sb["logprobs"]))
agree = sum(x == y for x, y in zip(sa["argmax"], sb["argmax"])) / len(sa["argmax"])
print(f"score, device rows vs host rows (padded logits): max |diff| {d:.2e}, argmax agreement {agree:.4f}, "
      f"dump {os.path.getsize(sys.argv[3])} bytes = {os.path.getsize(sys.argv[3]) / 4 / 2999:.1f} floats a row")
PY
PORT=8391
$B serve -m tmp_exp/l1b/config.json --load-format dummy --port $PORT -c 16384 > $R/serve.log 2>&1 &
SP=$!
for i in $(seq 1 120); do curl -sf localhost:$PORT/health > /dev/null && break; sleep 1; done
python3 tmp_exp/lp_check.py http://127.0.0.1:$PORT $B tmp_exp/l1b/config.json 2>&1 | grep -E "FAIL|diff"
python3 tmp_exp/score_speed.py http://127.0.0.1:$PORT 4096 4 2>&1
python3 tmp_exp/score_speed.py http://127.0.0.1:$PORT 12000 2 2>&1
kill $SP; wait $SP 2>/dev/null
cp tmp_exp/r189.sh $R/
echo "total $((SECONDS-S)) s"
