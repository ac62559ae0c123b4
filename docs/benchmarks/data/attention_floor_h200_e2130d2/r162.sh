#!/usr/bin/env bash
# Device run 162 (H200): D 64 batch 1 with three K/V stages (64 splits, four blocks an SM) against
# four (49 splits, three an SM): the kernel cells alternated, and Llama-3.2-1B steps
# (LITE_LLAMA_DECODE_STAGES=3 vs 4) at 128 / 2k / 8k / 32k prompts, batch 1, alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r162; mkdir -p $R
bash tests/gpu/build_gpu.sh lite-llama attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
B=build-gpu/bin/attention-bench
for r in 1 2 3 4 5; do
  for st in 4 3; do
    for ctx in 8192 16384 32768; do
      echo "st $st ctx $ctx $(timeout 30 $B --decode 64 1 $ctx 0 $st 1 2>&1 | tail -1)"
    done
  done
done > $R/cells.txt
python3 - $R/cells.txt <<'PY'
import sys, json, re, statistics as st, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = re.match(r"st (\d) ctx (\d+) (.*)", l)
    try: j = json.loads(m.group(3))
    except Exception: print("bad", l); continue
    d[(int(m.group(2)), int(m.group(1)))].append(j["us"])
for ctx in (8192, 16384, 32768):
    print(ctx, "4 stages", sorted(d[(ctx, 4)]), "3 stages", sorted(d[(ctx, 3)]), "median %.2f -> %.2f" % (st.median(d[(ctx, 4)]), st.median(d[(ctx, 3)])))
PY
echo "cells $((SECONDS-S)) s"
mkdir -p $R/e2e
for r in 1 2 3; do
  for st in 4 3; do
    for len in 128 2048 8192 32768; do
      LITE_LLAMA_DECODE_STAGES=$st timeout 100 build-gpu/bin/lite-llama bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1 --prompt-len $len \
        --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c $((len + 128)) --json $R/e2e/l1b${len}_s${st}_$r.json > /dev/null 2>&1
    done
  done
done
python3 tests/gpu/ab_summary.py $R/e2e | sort
(cd $R && tar czf e2e.tgz e2e && rm -rf e2e)
cp tmp_exp/r162.sh $R/
echo "total $((SECONDS-S)) s"
