#!/usr/bin/env bash
# Device run 13 (warm after r10/r12, GPU 0 of the x2 H100 machine): short-prompt A/B base vs new
# (tests/gpu/ab_builds.sh), then the long-context page's command at the new build.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
export CUDA_VISIBLE_DEVICES=0
cmake --build build-gpu -j 16 --target attention-bench > /tmp/ab_build.txt 2>&1 || tail -5 /tmp/ab_build.txt
echo "attention-bench built $((SECONDS-S)) s"
BASE_BUILD=build-base bash tests/gpu/ab_builds.sh tmp_exp/base /tmp/short 2 llama-3.2-1b qwen3-4b
cp tmp_exp/r13.sh /tmp/short/; tar czf $OUT/short.tgz -C /tmp short
echo "short A/B $((SECONDS-S)) s"
bash tests/gpu/long_context.sh build-gpu/bin /tmp/lctx
echo "long context $((SECONDS-S)) s"
tar czf $OUT/lctx.tgz -C /tmp lctx
