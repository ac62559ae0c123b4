#!/usr/bin/env bash
# Device run 136 (H200): swizzled decode K/V tiles: attention-bench (copy, GEMM, decode table) of the
# new build, and prompt-128 steps against HEAD (ab_builds.sh, batch 1/8/64, 2 rounds).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r136; mkdir -p $R
[ -x build-base/bin/lite-llama ] && [ -x build-gpu/bin/attention-bench ] || { echo "builds missing"; exit 1; }
timeout 200 build-gpu/bin/attention-bench > $R/attention_bench.jsonl 2>&1
grep -E '"copy"|decode_pdl' $R/attention_bench.jsonl | cut -c1-190
echo "bench $((SECONDS-S)) s"
BASE_BUILD=$PWD/build-base timeout 330 bash tests/gpu/ab_builds.sh tmp_exp/base_src $R/short 2 > $R/short.txt 2>&1; tail -14 $R/short.txt
(cd $R && tar czf short.tgz short && rm -rf short)
cp tmp_exp/r136.sh $R/
echo "total $((SECONDS-S)) s"
