#!/usr/bin/env python3
"""The report's lite-llama batch sweep (prompt 128, 256 new tokens) at three commits, step and TTFT
medians side by side, the change against the first; prints table.md.
    python3 table.py BEFORE.json MIDDLE.json NOW.json"""
import json, subprocess, sys


def sweep(path):
    recs = json.load(open(path))['records']
    return {(r['model'], r['batch']): r for r in recs
            if r.get('engine') == 'lite-llama' and r.get('section') == 'batch' and 'step_ms' in r}


def commit(path):
    return json.load(open(path))['pieces'][0]['commit']


runs = [sweep(p) for p in sys.argv[1:4]]
c = [commit(p) for p in sys.argv[1:4]]
names = {'llama-3.2-1b': 'Llama-3.2-1B', 'llama-3.2-3b': 'Llama-3.2-3B', 'qwen2.5-3b': 'Qwen2.5-3B',
         'qwen3-4b': 'Qwen3-4B'}
print(f"| model | batch | step ms `{c[0]}` | `{c[1]}` | `{c[2]}` | change | TTFT ms `{c[0]}` | `{c[1]}` "
      f"| `{c[2]}` | change |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for m in names:
    for b in [1, 2, 4, 8, 16, 64]:
        s = [r[(m, b)]['step_ms']['median'] for r in runs]
        t = [r[(m, b)]['ttft_ms']['median'] for r in runs]
        print(f"| {names[m]} | {b} | {s[0]:.3f} | {s[1]:.3f} | {s[2]:.3f} | {100 * (s[2] / s[0] - 1):+.1f}% "
              f"| {t[0]:.2f} | {t[1]:.2f} | {t[2]:.2f} | {100 * (t[2] / t[0] - 1):+.1f}% |")
