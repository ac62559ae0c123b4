#!/usr/bin/env bash
# Device run 119 (H200): wgmma prefill, LL_PVAR 0 as committed, 1 S (and P V) issued right after the
# barrier and the next tile's loads after S lands (kEarlyS). Alternated, 3 rounds; kernel tests under 1.

set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r119; mkdir -p $R
nvidia-smi --query-gpu=index,name,temperature.gpu,clocks.max.sm --format=csv,noheader | tee $R/gpu.txt
bash tests/gpu/build_gpu.sh attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
echo "build $((SECONDS-S)) s"
build-gpu/bin/attention-bench --quick > $R/quick.jsonl 2>&1; grep -E "copy|gemm|\"prefill\"" $R/quick.jsonl
for r in 1 2 3; do for v in 0 1; do for D in 64 128; do for T in 8192 16384 32768; do
  echo "r$r v$v $(LL_PVAR=$v build-gpu/bin/attention-bench --prefill $D $T)" >> $R/sweep.txt
done; done; done; echo "round $r $((SECONDS-S)) s"; done
python3 - $R/sweep.txt <<'PY' | tee $R/summary.txt
import sys,re,collections,statistics as st
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    m=re.match(r'r(\d) v(\d) prefill D (\d+) tokens (\d+) .*: ([\d.]+) ms',l)
    if m: d[(int(m[3]),int(m[4]),int(m[2]))].append(float(m[5]))
for D in (64,128):
  for T in (8192,16384,32768):
    base=st.median(d[(D,T,0)]); fl=4.0*D*32*T*(T+1)/2
    print(f'D {D} T {T}: '+'  '.join(f'v{v} {st.median(d[(D,T,v)]):.4f} ms {fl/st.median(d[(D,T,v)])/1e9:.0f} TF ({st.median(d[(D,T,v)])/base-1:+.1%})' for v in range(2)))
PY
for v in 1; do
  LL_PVAR=$v timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*CudaAttention*Prefill*:*CudaAttention*Chunk*:*CudaAttention*Mixed*' > $R/tests_v$v.txt 2>&1
  echo "tests v$v: $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $R/tests_v$v.txt | head -5 | tr '\n' ' ') $((SECONDS-S)) s"
done
cp tmp_exp/r119.sh $R/
cd $OUT && tar czf r119.tgz r119 && rm -rf r119
echo "total $((SECONDS-S)) s"
