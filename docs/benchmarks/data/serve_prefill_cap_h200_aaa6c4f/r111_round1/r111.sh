#!/usr/bin/env bash
# Device run 111: tree = see README. Prompt chunks beside decodes capped at 2,048 tokens (serve's
# new default) against no cap (+nocap), serve_long.sh, round $1; and --profile of Llama-3.2-1B
# decode steps at batch 1 / 2 / 4 / 8 (prompt 128).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r111; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt
[ -x build-gpu/bin/lite-llama ] || bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
for r in $ROUNDS; do
  timeout 250 bash tests/gpu/serve_long.sh build-gpu/bin/lite-llama $R/serve_r$r $CASES > $R/serve_r$r.txt 2>&1
  echo "serve round $r $((SECONDS-S)) s" | tee -a $R/summary.txt
done
if [ -n "${PROFILE:-}" ]; then
  for B in 1 2 4 8; do
    build-gpu/bin/lite-llama bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch $B --prompt-len 128 \
      --gen-len 64 --runs 2 --warmup 1 --profile --json $R/profile_b$B.json > $R/profile_b$B.txt 2>&1
  done
  echo "profile $((SECONDS-S)) s" | tee -a $R/summary.txt
fi
python3 - $R <<'PY' | tee -a $R/serve_summary.txt
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+'/serve_r*/summary.json')):
    for k,v in json.load(open(f)).items():
        if isinstance(v,dict): print(f.split('/')[-2], k, v['completed'], v['failed'], 'ttft p50/p99', v['ttft_ms']['p50'], v['ttft_ms']['p99'], 'itl p50/p90/p99', v['itl_ms']['p50'], v['itl_ms']['p90'], v['itl_ms']['p99'], 'tpot p50', v['tpot_ms']['p50'], 'dur', v['duration_s'], 'tok/s', round(v['total_tokens_per_s']))
        elif isinstance(v,list): print(f.split('/')[-2], k, ' '.join(v))
PY
(cd $R && tar -czf logs_$(echo $ROUNDS | tr ' ' _).tgz serve_r* profile_* 2>/dev/null && rm -rf serve_r* profile_b*.json)
cp tmp_exp/r111.sh $R/
