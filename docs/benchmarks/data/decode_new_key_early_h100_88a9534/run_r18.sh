#!/usr/bin/env bash
# Device run 18 (one H100): decode attention's new-key split starts its ring before pdl_wait (the
# new key's row loaded after it). Base = 1a252fc (tmp_exp/base). Builds, attention / graph /
# long-step kernel tests, attention-bench --decode base vs new alternated, long-context and
# short-prompt model A/B.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/r18
( cmake -S tmp_exp/base -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
    -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > /tmp/r18/base_cmake.txt 2>&1 && \
  cmake --build build-base -j 16 --target lite-llama attention-bench > /tmp/r18/base_build.txt 2>&1; echo "base build rc $? $((SECONDS-S)) s" ) &
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > /tmp/r18/build.txt 2>&1 || { tail -30 /tmp/r18/build.txt; grep -E "error" build-gpu.build.log | head; exit 1; }
echo "new build $((SECONDS-S)) s"
wait
timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='CudaAttention*:CudaGraphs*:CudaLongStep*:*Decode*' > /tmp/r18/tests.txt 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" /tmp/r18/tests.txt | tail -8
echo "tests $((SECONDS-S)) s"
for r in 1 2; do for w in base new; do
  b=build-gpu/bin/attention-bench; [ $w = base ] && b=build-base/bin/attention-bench
  for c in "64 1 8192 0 4 1" "64 1 16384 0 4 1" "64 1 32768 0 4 1" "128 1 8192 0 3 1" "128 1 32768 0 3 1" "64 4 8192 0 4 1" "64 16 8192 0 3 1"; do
    echo "$w $r $($b --decode $c)" >> /tmp/r18/attn.txt
  done
done; done
python3 - <<'PY'
import re, statistics, collections
d = collections.defaultdict(list)
for l in open('/tmp/r18/attn.txt'):
    w, r, rest = l.split(' ', 2)
    m = re.search(r'decode D (\d+) batch (\d+) context (\d+) .*: ([\d.]+) us', rest)
    d[(m.group(1), m.group(2), m.group(3), w)].append(float(m.group(4)))
for k in sorted(set(k[:3] for k in d), key=lambda k: (int(k[0]), int(k[1]), int(k[2]))):
    b, n = statistics.median(d[k + ('base',)]), statistics.median(d[k + ('new',)])
    print(f"decode D {k[0]} batch {k[1]} ctx {k[2]}: base {b:.1f} us  new {n:.1f} us  ({(n / b - 1) * 100:+.1f}%)")
PY
echo "attention $((SECONDS-S)) s"
tar czf $OUT/r18.tgz -C /tmp r18
mkdir -p /tmp/r18/lc
for r in 1 2; do for w in base new; do
  bin=build-gpu/bin/lite-llama; [ $w = base ] && bin=build-base/bin/lite-llama
  timeout 90 $bin bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1 --prompt-len 32768 \
    --gen-len 128 --runs 2 --warmup 1 -c 32900 --max-batched-tokens 32768 --json /tmp/r18/lc/llama-3.2-1b-32k_${w}_$r.json >/dev/null 2>>/tmp/r18/err.txt || echo "FAILED l $w"
  timeout 90 $bin bench -q -m tests/gpu/configs/qwen3-4b.json --load-format dummy --batch 1 --prompt-len 16384 \
    --gen-len 128 --runs 2 --warmup 1 -c 16500 --max-batched-tokens 16384 --json /tmp/r18/lc/qwen3-4b-16k_${w}_$r.json >/dev/null 2>>/tmp/r18/err.txt || echo "FAILED q $w"
done; echo "lc round $r $((SECONDS-S)) s"; done
python3 tests/gpu/ab_summary.py /tmp/r18/lc
tar czf $OUT/r18.tgz -C /tmp r18
cp tmp_exp/r18.sh /tmp/r18/
tar czf $OUT/r18.tgz -C /tmp r18
