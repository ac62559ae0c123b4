#!/usr/bin/env bash
# Device run 42 (1 x H100): decode kernel loading the request row and query row beside the
# sequence length (one trip) against HEAD (three dependent loads): two builds of one tree.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r42; mkdir -p $R/ab
nvidia-smi --query-gpu=index,name,temperature.gpu --format=csv,noheader | tee $R/gpu.txt
F=src/backends/cuda/kernels/attention_decode.cu
bash tests/gpu/build_gpu.sh lite-llama test_cuda_kernels attention-bench > $R/build.txt 2>&1 || { tail -20 $R/build.txt; exit 1; }
mkdir -p /tmp/new /tmp/old; cp build-gpu/bin/{lite-llama,attention-bench,test_cuda_kernels} /tmp/new/
cp $F /tmp/new.cu; cp tmp_exp/attention_decode_head.cu $F
bash tests/gpu/build_gpu.sh lite-llama attention-bench > $R/build_old.txt 2>&1 || { tail -20 $R/build_old.txt; cp /tmp/new.cu $F; exit 1; }
cp build-gpu/bin/{lite-llama,attention-bench} /tmp/old/; cp /tmp/new.cu $F
echo "build $((SECONDS-S)) s"
cuobjdump -sass -fun decode_kernel /tmp/new/attention-bench 2>/dev/null | grep -m1 -A60 "Function.*decode_kernelI6__halfLi64ELi4E" | grep -E "LDG|BRA|EXIT|ACQBULK|griddep|DEPBAR" | head -12 > $R/sass_new.txt
cuobjdump -sass -fun decode_kernel /tmp/old/attention-bench 2>/dev/null | grep -m1 -A60 "Function.*decode_kernelI6__halfLi64ELi4E" | grep -E "LDG|BRA|EXIT|ACQBULK|griddep|DEPBAR" | head -12 > $R/sass_old.txt
for r in 1 2; do for c in "64 1 8192 4" "64 1 32768 4" "128 1 16384 3" "64 4 8192 4"; do set -- $c
  for v in old new; do echo "$v $(timeout 20 /tmp/$v/attention-bench --decode $1 $2 $3 0 $4 1)"; done; done; done | tee $R/decode.txt
echo "bench $((SECONDS-S)) s"
M=tests/gpu/configs
for r in 1 2; do for v in old new; do
  for len in 2048 8192 32768; do
    timeout 40 /tmp/$v/lite-llama bench -m $M/llama-3.2-1b.json --load-format dummy --batch 1 \
      --prompt-len $len --gen-len 128 --runs 2 --warmup 1 -c $((len + 200)) -q --json $R/ab/l1b-${len}_${v}_$r.json > /dev/null 2>&1
  done
  timeout 40 /tmp/$v/lite-llama bench -m $M/qwen3-4b.json --load-format dummy --batch 1 \
    --prompt-len 16384 --gen-len 128 --runs 2 --warmup 1 -c 16600 -q --json $R/ab/q4b-16384_${v}_$r.json > /dev/null 2>&1
  echo "round $r $v $((SECONDS-S)) s"
done; done
python3 tests/gpu/ab_summary.py $R/ab > $R/ab_long.txt; cat $R/ab_long.txt; rm -f $R/ab/*_[on]*_[12].json
timeout 100 /tmp/new/test_cuda_kernels --gtest_filter='*Decode*:*Graph*' > $R/tests_new.txt 2>&1
echo "tests rc $? $(grep -E '^\[  PASSED|FAILED  \]' $R/tests_new.txt | head -5 | tr '\n' ' ')"
cp tmp_exp/r42.sh $R/; echo "total $((SECONDS-S)) s"
