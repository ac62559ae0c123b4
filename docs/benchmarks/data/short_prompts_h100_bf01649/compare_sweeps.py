#!/usr/bin/env python3
"""The report's lite-llama batch sweep before the long-context kernels (d5f3805) against bf01649,
with the --dtype bf16 runs of bf01649 beside them; prints table.md.
    python3 compare_sweeps.py OLD_MERGED.json NEW_MERGED.json BF16_DIR"""
import json, sys

def sweep(p):
    out = {}
    for r in json.load(open(p))['records']:
        if r.get('engine') == 'lite-llama' and r.get('section') == 'batch' and 'step_ms' in r:
            out[(r['model'], r['batch'])] = r
    return out

old, new = sweep(sys.argv[1]), sweep(sys.argv[2])
names = {'llama-3.2-1b': 'Llama-3.2-1B', 'llama-3.2-3b': 'Llama-3.2-3B', 'qwen2.5-3b': 'Qwen2.5-3B', 'qwen3-4b': 'Qwen3-4B'}
bf = {}
for m in names:
    for r in json.load(open(f'{sys.argv[3]}/{m}-bf16.json'))['results']:
        bf[(m, r['batch'])] = r
print("| model | batch | step ms `d5f3805` (bf16) | `bf01649` (`--dtype auto`: fp16) | change | `bf01649`, `--dtype bf16` "
      "| TTFT ms `d5f3805` | `bf01649` | `bf01649`, bf16 |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for m in names:
    for b in [1, 2, 4, 8, 16, 64]:
        o, n, x = old[(m, b)], new[(m, b)], bf.get((m, b))
        so, sn = o['step_ms']['median'], n['step_ms']['median']
        xs = f"{x['step_ms']['median']:.3f}" if x else "-"
        xt = f"{x['ttft_ms']['median']:.2f}" if x else "-"
        print(f"| {names[m]} | {b} | {so:.3f} | {sn:.3f} | {100 * (sn / so - 1):+.1f}% | {xs} "
              f"| {o['ttft_ms']['median']:.2f} | {n['ttft_ms']['median']:.2f} | {xt} |")
