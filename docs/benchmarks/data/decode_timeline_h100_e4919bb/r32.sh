#!/usr/bin/env bash
# Device run 32 (1 x H100): decode attention with pdl_trigger at the kernel's start
# (LL_EXP_EARLY_TRIGGER=1, experiment in the working tree) against after its loop: attention-bench
# decode cases, timeline, and lite-llama bench decode steps (Llama-3.2-1B 8k / 32k, Qwen3-4B 16k,
# batch 1), alternated; plus the read-pattern microbenchmark (tmp_exp/readpat.cu).
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS
q() { nvidia-smi --query-gpu=index,name,temperature.gpu,power.draw,clocks.sm,clocks_throttle_reasons.active --format=csv,noheader; }
q
if nvidia-smi --query-gpu=temperature.gpu,name --format=csv,noheader | head -1 | awk -F', ' '$1>55 || $2 !~ /H100/{b=1} END{exit !b}'; then echo "hot or not H100: skip"; exit 0; fi
R=/tmp/r32; mkdir -p $R/ab
nvcc -O3 -arch=sm_90a -o /tmp/readpat tmp_exp/readpat.cu > $R/readpat_build.txt 2>&1
(CUDAFLAGS=-DLITE_LLAMA_DECODE_TIMELINE CXXFLAGS=-DLITE_LLAMA_DECODE_TIMELINE BUILD_DIR=/tmp/tlb bash tests/gpu/build_gpu.sh attention-bench > $R/build_tl.txt 2>&1; echo "tl build rc $?" >> $R/build_tl.txt) &
bash tests/gpu/build_gpu.sh lite-llama attention-bench > $R/build.txt 2>&1 || { tail -30 $R/build.txt; }
wait
tail -2 $R/build_tl.txt
echo "build $((SECONDS-S)) s"
/tmp/readpat > $R/readpat.txt 2>&1; cat $R/readpat.txt
for rep in 1 2; do for e in 0 1; do
  for c in "64 1 8192" "64 1 16384" "64 1 32768" "64 4 8192" "128 1 8192" "128 1 16384"; do
    set -- $c
    st=$( [ $1 -eq 64 ] && echo 4 || echo 3 )
    for p in 0 1; do
      LL_EXP_EARLY_TRIGGER=$e timeout 60 build-gpu/bin/attention-bench --decode $1 $2 $3 0 $st $p | sed "s/^/early $e rep $rep: /" >> $R/decode.txt 2>&1
    done
  done
done; done
cat $R/decode.txt
for e in 0 1; do LL_EXP_EARLY_TRIGGER=$e timeout 60 /tmp/tlb/bin/attention-bench --timeline 64 1 8192 1 > $R/tl_D64_B1_C8192_P1_e$e.txt 2>&1; done
echo "kernels $((SECONDS-S)) s"; q
M=tests/gpu/configs
for rep in 1 2; do
  for e in 0 1; do
    for c in "llama-3.2-1b 8192" "llama-3.2-1b 32768" "qwen3-4b 16384"; do
      set -- $c
      LL_EXP_EARLY_TRIGGER=$e timeout 120 build-gpu/bin/lite-llama bench -m $M/$1.json --load-format dummy --batch 1 \
        --prompt-len $2 --gen-len 128 --runs 2 --warmup 1 -c $(( $2 + 200 )) --max-batched-tokens 32768 -q \
        --json $R/ab/$1-$2_e${e}_$rep.json > /dev/null 2>> $R/err.txt || echo "FAILED $c $e"
    done
  done
  echo "round $rep $((SECONDS-S)) s"; q
done
python3 tests/gpu/ab_summary.py $R/ab > $R/ab_summary.txt 2>&1; cat $R/ab_summary.txt
cp tmp_exp/r32.sh tmp_exp/readpat.cu $R/; git diff > $R/exp.diff
tar czf $OUT/r32.tgz -C /tmp r32
echo "total $((SECONDS-S)) s"
