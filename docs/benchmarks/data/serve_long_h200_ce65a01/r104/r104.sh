#!/usr/bin/env bash
# Device run 104: tree = $(git log -1) (see README). The step budget (--max-batched-tokens)
# trade-off: a lone long prompt's TTFT and a 64 x 128 burst's TTFT at budgets 2048-32768
# (lite-llama bench, 2 rounds), and short streams' ITL beside 16k prefills (serve_long.sh mixedN, 2 rounds).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r104; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm,memory.total --format=csv,noheader | tee $R/gpu.txt
[ -x build-gpu/bin/lite-llama ] || bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s" | tee $R/summary.txt
M=tests/gpu/configs
b() {  # tag model len batch budget
  build-gpu/bin/lite-llama bench -q -m $M/$2.json --load-format dummy --batch $4 --prompt-len $3 --gen-len 8 \
    --runs 2 --warmup 1 -c $(($3 + 16)) --max-batched-tokens $5 --json $R/bench_$1_$2_$3_b$4_$5.json > $R/bench_$1_$2_$3_b$4_$5.txt 2>&1
}
for r in 1 2; do
  for bud in 2048 4096 8192 32768; do b r$r llama-3.2-1b 32768 1 $bud; done
  for bud in 2048 4096 8192 16384; do b r$r qwen3-4b 16384 1 $bud; done
  for bud in 2048 8192; do b r$r llama-3.2-1b 128 64 $bud; b r$r qwen3-4b 128 64 $bud; done
done
echo "bench $((SECONDS-S)) s" | tee -a $R/summary.txt
python3 - $R <<'PY' | tee $R/bench_summary.txt
import json,glob,os,sys,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/bench_*.json')):
    tag,rest=os.path.basename(f)[6:-5].split('_',1)
    j=json.load(open(f)); res=j['results'][0] if 'results' in j else j
    d[rest].append(res)
for k,v in d.items():
    print(k, 'ttft ms / prefill tok/s per round:', [(round(x['ttft_ms']['median'],2), round(x['prefill_tokens_per_s']['median'])) for x in v])
PY
for r in 1 2; do
  timeout 200 bash tests/gpu/serve_long.sh build-gpu/bin/lite-llama $R/serve_r$r mixed mixed4096 mixed2048 > $R/serve_r$r.txt 2>&1
done
echo "serve $((SECONDS-S)) s" | tee -a $R/summary.txt
python3 - $R <<'PY' | tee $R/serve_summary.txt
import json,glob,sys
for f in sorted(glob.glob(sys.argv[1]+'/serve_r*/summary.json')):
    for k,v in json.load(open(f)).items():
        if isinstance(v,dict): print(f.split('/')[-2], k, v['completed'], v['failed'], 'ttft p50/p99', v['ttft_ms']['p50'], v['ttft_ms']['p99'], 'itl p50/p90/p99', v['itl_ms']['p50'], v['itl_ms']['p90'], v['itl_ms']['p99'], 'tpot p50', v['tpot_ms']['p50'], 'dur', v['duration_s'])
PY
(cd $R && tar -czf logs.tgz serve_r* bench_* && rm -rf serve_r* bench_*.json bench_r*.txt)
cp tmp_exp/r104.sh $R/
