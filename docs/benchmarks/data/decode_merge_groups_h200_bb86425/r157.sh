#!/usr/bin/env bash
# Device run 157 (H200): the decode merge with four thread groups a row where a sequence has more
# than 16 splits (working tree) against HEAD (build-base): full attention-bench alternated 4 rounds,
# kernel tests (attention, decode, prefill, graphs), steps alternated 2 rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
S=$SECONDS; R=$OUT/r157; mkdir -p $R
git diff HEAD > $R/diff.txt
bash tests/gpu/device_setup.sh >/dev/null 2>&1 || true
( cmake -S tmp_exp/base_src -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DLITE_LLAMA_CUDA=ON -DLITE_LLAMA_TESTS=OFF \
    -DLITE_LLAMA_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a > $R/base_cmake.txt 2>&1 &&
  cmake --build build-base -j 6 --target lite-llama attention-bench > $R/base_build.txt 2>&1 ) &
BP=$!
bash tests/gpu/build_gpu.sh lite-llama attention-bench test_cuda_kernels > $R/build.txt 2>&1 || { tail -30 $R/build.txt; exit 1; }
wait $BP || { tail -20 $R/base_build.txt; exit 1; }
echo "builds $((SECONDS-S)) s"
mkdir -p $R/runs
for r in 1 2 3 4; do
  for which in base new; do
    bin=build-gpu/bin/attention-bench; [ $which = base ] && bin=build-base/bin/attention-bench
    timeout 100 $bin > $R/runs/${which}_$r.jsonl 2>&1
  done
done
echo "runs $((SECONDS-S)) s"
python3 - $R/runs <<'PY'
import json, sys, glob, os, statistics as st, collections
d = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl")):
    which = os.path.basename(f).split("_")[0]
    for l in open(f):
        try: j = json.loads(l)
        except Exception: continue
        if j.get("kernel") == "copy": d[(which, "copy")].append(j["GB/s"])
        if j.get("kernel") in ("decode_pdl", "decode"): d[(which, j["kernel"], j["D"], j["batch"], j["context"])].append((j["us"], j["of_copy"]))
print("copy GB/s base %s new %s" % (d[("base", "copy")], d[("new", "copy")]))
for k in sorted(k for k in d if k[0] == "base" and k[1] != "copy"):
    n = ("new",) + k[1:]
    b = sorted(d[k]); w = sorted(d[n])
    print("%-10s D %3d B %2d ctx %5d  us base %s new %s | of_copy median %.3f -> %.3f" % (k[1], k[2], k[3], k[4],
          [x[0] for x in b], [x[0] for x in w], st.median(x[1] for x in b), st.median(x[1] for x in w)))
PY
(cd $R && tar czf runs.tgz runs && rm -rf runs)
timeout 200 build-gpu/bin/test_cuda_kernels --gtest_filter='*Decode*:*Attention*:*Graph*:*Prefill*' > $R/tests.txt 2>&1
echo "tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|FAILED TEST' $R/tests.txt | head -5 | tr '\n' ' ') $((SECONDS-S)) s"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/tests.txt > $R/tests_summary.txt; rm -f $R/tests.txt
mkdir -p $R/e2e
for r in 1 2; do
  for which in base new; do
    bin=build-gpu/bin/lite-llama; [ $which = base ] && bin=build-base/bin/lite-llama
    for len in 8192 32768; do
      timeout 100 $bin bench -q -m tests/gpu/configs/llama-3.2-1b.json --load-format dummy --batch 1 --prompt-len $len \
        --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c $((len + 128)) --json $R/e2e/l1b${len}_${which}_$r.json > /dev/null 2>&1
    done
    timeout 100 $bin bench -q -m tests/gpu/configs/qwen3-4b.json --load-format dummy --batch 1 --prompt-len 16384 \
        --gen-len 64 --max-batched-tokens 32768 --runs 2 --warmup 1 -c 16512 --json $R/e2e/q4b16k_${which}_$r.json > /dev/null 2>&1
  done
done
python3 tests/gpu/ab_summary.py $R/e2e | sort
(cd $R && tar czf e2e.tgz e2e && rm -rf e2e)
cp tmp_exp/r157.sh $R/
echo "total $((SECONDS-S)) s"
