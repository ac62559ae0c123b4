#!/usr/bin/env bash
# Device run 180 (H200): Backend::score_rows on the GPU (kernel test; `lite-llama score` with the
# rows scored on the device against the host path, --dump-logits forcing the latter; lm-eval-style
# echo scoring through the server against plain prefills), and allowed_token_ids / bad_words
# through the server on the GPU; then every kernel test.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r180; mkdir -p $R
# The tree as committed plus this change only (helpers edit other files meanwhile).
tar xzf tmp_exp/ov180.tgz -C . && xargs rm -f < tmp_exp/ov180_delete.txt
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
build-gpu/bin/test_cuda_kernels --gtest_filter='CudaSampling.*' 2>&1 | tail -4
MODEL=tmp_exp/l1b
python3 -c "
import json,random
r=random.Random(1)
for n in (2048, 8192): json.dump([[r.randrange(1000,120000) for _ in range(n)]], open(f'/tmp/t{n}.json','w'))"
B=build-gpu/bin/lite-llama
for n in 2048 8192; do
  for i in 1 2; do
    a=$SECONDS.$(date +%N); t0=$(date +%s.%N)
    $B score -m $MODEL/config.json --load-format dummy --tokens /tmp/t$n.json -q --full > /tmp/new$n.json 2>/tmp/new.err; t1=$(date +%s.%N)
    $B score -m $MODEL/config.json --load-format dummy --tokens /tmp/t$n.json -q --full --dump-logits /dev/null > /tmp/old$n.json 2>/tmp/old.err; t2=$(date +%s.%N)
    echo "score $n tokens: device rows $(echo "$t1 - $t0" | bc) s, host rows $(echo "$t2 - $t1" | bc) s (whole process)"
  done
  python3 - /tmp/new$n.json /tmp/old$n.json <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
sa, sb = a["sequences"][0], b["sequences"][0]
la, lb = sa.get("logprobs"), sb.get("logprobs")
print(" keys", sorted(sa.keys()))
if la and lb:
    d = max(abs(x - y) for x, y in zip(la, lb))
    agree = sum(x == y for x, y in zip(sa["argmax"], sb["argmax"])) / len(sa["argmax"])
    print(f" logprobs max |diff| {d:.2e}, argmax agreement {agree:.4f}, nll {a['nll']:.6f} vs {b['nll']:.6f}")
PY
done
head -3 /tmp/new.err /tmp/old.err
PORT=8391
$B serve -m $MODEL/config.json --load-format dummy --port $PORT -c 16384 > $R/serve.log 2>&1 &
SP=$!
for i in $(seq 1 120); do curl -sf localhost:$PORT/health > /dev/null && break; sleep 1; done
echo "server up $((SECONDS-S)) s"
python3 tmp_exp/ban_check.py http://127.0.0.1:$PORT $B $MODEL/config.json 2>&1 | tail -8
python3 tmp_exp/score_speed.py http://127.0.0.1:$PORT 1024 8 2>&1
python3 tmp_exp/score_speed.py http://127.0.0.1:$PORT 4096 4 2>&1
kill $SP; wait $SP 2>/dev/null
echo "checks $((SECONDS-S)) s"
timeout $((560 - (SECONDS-S))) build-gpu/bin/test_cuda_kernels > $R/kernels.txt 2>&1; echo "kernel tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |tests ran|FAILED  \]" $R/kernels.txt | tail -8
cp tmp_exp/r180.sh tmp_exp/ban_check.py tmp_exp/score_speed.py $R/
echo "total $((SECONDS-S)) s"
