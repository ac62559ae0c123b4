#!/usr/bin/env bash
# Device run 185 (H200): which kernels make the scoring LM-head slices slow (nsys, else ncu).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$OUT/r185; mkdir -p $R
[ -x build-gpu/bin/lite-llama ] || bash tests/gpu/build_gpu.sh lite-llama > $R/build.txt 2>&1
python3 -c "
import json,random
r=random.Random(1)
json.dump([[r.randrange(1000,120000) for _ in range(3000)]], open('/tmp/t3k.json','w'))"
which nsys ncu
if which nsys > /dev/null; then
  nsys profile -o /tmp/p --force-overwrite true build-gpu/bin/lite-llama score -m tmp_exp/l1b/config.json --load-format dummy --tokens /tmp/t3k.json -q > /dev/null 2>$R/nsys.err
  nsys stats --report cuda_gpu_kern_sum --format csv /tmp/p.nsys-rep 2>/dev/null | head -25 | cut -c1-260
else
  ncu --launch-skip 0 --launch-count 400 --metrics gpu__time_duration.sum --csv build-gpu/bin/lite-llama score -m tmp_exp/l1b/config.json --load-format dummy --tokens /tmp/t3k.json -q 2>/dev/null > $R/ncu.csv
  python3 - $R/ncu.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value")
t = collections.defaultdict(lambda: [0, 0.0])
for r in rows[1:]:
    try: v = float(r[vi].replace(",", ""))
    except ValueError: continue
    t[r[ki][:120]][0] += 1; t[r[ki][:120]][1] += v
for k, (n, v) in sorted(t.items(), key=lambda x: -x[1][1])[:20]: print(f"{v/1e3:10.1f} us {n:5d}x {k}")
PY
fi
