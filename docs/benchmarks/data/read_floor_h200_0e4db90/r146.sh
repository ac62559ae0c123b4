#!/usr/bin/env bash
# Device run 146 (H200): the read floor again, every call of the graph on its own buffer (r145's
# PDL numbers had calls sharing buffers in flight), and a mode whose blocks fill their SMs.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r146; mkdir -p $R
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/read_floor tmp_exp/read_floor.cu && timeout 200 /tmp/read_floor > $R/read_floor.txt 2>&1
echo "read floor rc=$? $((SECONDS-S)) s"; cat $R/read_floor.txt
cp tmp_exp/r146.sh tmp_exp/read_floor.cu $R/
