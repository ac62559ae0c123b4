#!/usr/bin/env bash
# Device run 160 (H200): the attention floor (tmp_exp/attn_floor.cu): split-K blocks that hold their
# bytes until a query written by the kernel before them arrives.
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r161; mkdir -p $R
nvcc -O3 -std=c++17 -arch=sm_90a -o /tmp/attn_floor tmp_exp/attn_floor.cu > $R/build.txt 2>&1 || { cat $R/build.txt; exit 1; }
timeout 400 /tmp/attn_floor > $R/attn_floor.jsonl 2>&1
echo rc=$?
head -1 $R/attn_floor.jsonl
python3 - $R/attn_floor.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{\"MiB")]
for mib in (16, 32, 64):
    r = [x for x in rows if x["MiB"] == mib]
    for pdl in (1, 0):
        best = sorted((x for x in r if x["pdl"] == pdl), key=lambda x: x["us"])[:4]
        for b in best: print(mib, "pdl" if pdl else "plain", b)
    for bps in (3, 4, 2):
      for co in (0, 1):
        b = sorted((x for x in r if x["pdl"] == 1 and x["blocks_per_sm"] == bps and (x["slots"] > bps) == co), key=lambda x: x["us"])[:1]
        if b: print(mib, "best at bps", bps, "co-resident" if co else "SMs filled", b[0])
PY
cp tmp_exp/attn_floor.cu tmp_exp/r161.sh $R/
