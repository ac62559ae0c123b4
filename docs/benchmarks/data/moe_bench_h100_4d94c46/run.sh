#!/usr/bin/env bash
set -u
t0=$(date +%s)
bash tests/gpu/build_gpu.sh lite-llama attention-bench > /tmp/build.txt 2>&1 || { tail -20 /tmp/build.txt; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
mkdir -p /tmp/mb
OUT=/tmp/mb bash tests/gpu/moe_bench.sh build-gpu
echo "done $(( $(date +%s) - t0 )) s"
tar czf $OUT/mb.tgz -C /tmp mb
