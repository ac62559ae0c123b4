#!/usr/bin/env bash
# Device run 151 (H200): the GPU --kv-tokens bound (tests/gpu/kv_tokens_limit.py, first GPU run),
# decode timelines of the missed cells at HEAD, and the cells themselves.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r151; mkdir -p $R
git diff HEAD --stat > $R/diff_stat.txt
bash tests/gpu/build_gpu.sh lite-llama attention-bench > $R/build.txt 2>&1 &
P1=$!
BUILD_DIR=build-tl CMAKE_FLAGS=-DLITE_LLAMA_DECODE_TIMELINE=ON bash tests/gpu/build_gpu.sh attention-bench > $R/build_tl.txt 2>&1 &
P2=$!
wait $P1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
timeout 200 python3 tests/gpu/kv_tokens_limit.py build-gpu/bin/lite-llama $R/kv_tokens_limit.json > $R/kv_tokens_limit.txt 2>&1
echo "kv limit rc=$? $((SECONDS-S)) s"; cat $R/kv_tokens_limit.txt
wait $P2 || { tail -30 $R/build_tl.txt; exit 1; }
echo "build tl $((SECONDS-S)) s"
mkdir -p $R/tl
for c in "64 1 8192" "64 1 32768" "64 4 8192" "128 1 8192" "128 1 16384"; do
  n=$(echo $c | tr ' ' _)
  timeout 60 build-tl/bin/attention-bench --timeline $c 1 > $R/tl/$n.txt 2>&1
  echo "== $c"; python3 tools/kernel_bench/decode_timeline.py $R/tl/$n.txt 2>&1 | tail -4
done
(cd $R && tar czf tl.tgz tl && rm -rf tl)
for r in 1 2; do for c in "64 1 8192" "64 1 16384" "64 1 32768" "64 4 8192" "128 1 8192" "128 1 16384" "128 1 32768"; do
  echo "$(timeout 60 build-gpu/bin/attention-bench --decode $c 0 0 1 2>&1 | tail -1)" >> $R/cells.txt
done; done
cat $R/cells.txt
cp tmp_exp/r151.sh $R/
echo "total $((SECONDS-S)) s"
