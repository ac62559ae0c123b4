#!/usr/bin/env python3
"""Summary of an A/B folder of `lite-llama bench --json` runs named MODEL_WHICH_REPEAT.json
(tests/gpu/ab_builds.sh, ab_env.sh): median decode tok/s, step ms and TTFT per model, batch and side,
written to OUT_DIR/ab.json and printed.

usage: ab_summary.py OUT_DIR
"""
import glob, json, os, statistics, sys

out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(out, "*_*_*.json"))):
    if os.path.basename(f) == "ab.json":
        continue
    model, which, _ = os.path.basename(f)[:-5].rsplit("_", 2)
    for r in json.load(open(f))["results"]:
        key = (model, r["batch"], which)
        rows.setdefault(key, []).append((r["decode_tokens_per_s"]["median"], r["step_ms"]["median"],
                                         r["ttft_ms"]["median"]))
table = []
for (model, batch, which), v in sorted(rows.items()):
    table.append({"model": model, "batch": batch, "build": which,
                  "decode_tok_s": statistics.median(x[0] for x in v),
                  "step_ms": statistics.median(x[1] for x in v), "ttft_ms": statistics.median(x[2] for x in v),
                  "runs": len(v)})
json.dump(table, open(os.path.join(out, "ab.json"), "w"), indent=1)
for t in table:
    print(f"{t['model']:14} b{t['batch']:<3} {t['build']:4} {t['decode_tok_s']:10.1f} tok/s  step {t['step_ms']:.3f} ms"
          f"  TTFT {t['ttft_ms']:.2f} ms")
