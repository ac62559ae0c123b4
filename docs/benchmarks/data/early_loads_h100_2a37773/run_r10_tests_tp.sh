#!/usr/bin/env bash
# Device run 10 (2 x H100): pre-wait loads (norm / all-reduce+norm / RoPE / merge). Build new + base,
# kernel tests, greedy equality base vs new at tp 1 and 2.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
nvidia-smi --query-gpu=name --format=csv,noheader
( cmake -S tmp_exp/base -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
    -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > $OUT/base_cmake.txt 2>&1 && \
  cmake --build build-base -j 16 --target lite-llama > $OUT/base_build.txt 2>&1; echo "base build rc $? $((SECONDS-S)) s" ) &
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; grep -E "error" build-gpu.build.log | head; exit 1; }
echo "new build $((SECONDS-S)) s"
wait
export NCCL_NVLS_ENABLE=0
timeout 240 build-gpu/bin/test_cuda_kernels > /tmp/tests.txt 2>&1; TRC=$?; echo "tests rc $TRC"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" /tmp/tests.txt | tail -12; gzip -c /tmp/tests.txt > $OUT/tests.txt.gz
echo "tests $((SECONDS-S)) s"
L=$(tests/gpu/dummy_llama.sh)
for tp in 1 2; do for w in base new; do
  bin=build-gpu/bin/lite-llama; [ $w = base ] && bin=build-base/bin/lite-llama
  timeout 60 $bin generate -m $L --load-format dummy --dtype bf16 --tp $tp -n 40 --temperature 0 --json \
    -p "The capital of France is" -p "1 2 3" > $OUT/gen_${w}_tp$tp.json 2>$OUT/gen_${w}_tp$tp.err || echo "gen FAILED $w $tp"
done; done
python3 -c "
import json
f=lambda p:[r['token_ids'] for r in json.load(open(p))['results']]
for tp in (1,2):
  a,b=f('$OUT/gen_base_tp%d.json'%tp),f('$OUT/gen_new_tp%d.json'%tp); print('tp',tp,'greedy equal base/new:',a==b,[len(x) for x in a])"
echo "done $((SECONDS-S)) s"
cp tmp_exp/r10.sh $OUT/
[ $TRC = 0 ] && bash tmp_exp/r11.sh
