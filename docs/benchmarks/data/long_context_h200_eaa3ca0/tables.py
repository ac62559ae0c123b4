#!/usr/bin/env python3
"""long-context.md's tables from one tests/gpu/long_context.sh output folder (default: this one):
the prefill and decode kernel tables, decode beside a same-size copy, and the end-to-end table.
    python3 tables.py [DIR]"""
import json, os, sys

d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rows = [json.loads(l) for l in open(os.path.join(d, 'attention_bench.jsonl')) if l.strip()]
copy = next(r['GB/s'] for r in rows if r.get('kernel') == 'copy')
gemm = next(r['TFLOP/s'] for r in rows if r.get('kernel') == 'gemm_bf16_8192')
print(f"copy {copy:,.0f} GB/s, GEMM peak {gemm:.1f} TFLOP/s\n")


def pick(kernel, **kw):
    return next((r for r in rows if r.get('kernel') == kernel and all(r.get(k) == v for k, v in kw.items())), None)


print("| tokens | D 64 TFLOP/s | of GEMM peak | D 128 TFLOP/s | of GEMM peak |\n| ---: | ---: | ---: | ---: | ---: |")
for n in (2048, 8192, 16384, 32768):
    a, b = pick('prefill', D=64, tokens=n), pick('prefill', D=128, tokens=n)
    print(f"| {n:,} | {a['TFLOP/s']:.0f} | {a['of_gemm_peak']:.2f} | {b['TFLOP/s']:.0f} | {b['of_gemm_peak']:.2f} |")
print("\n`mma.sync` prefill TFLOP/s, D 64 / D 128:", ", ".join(
    f"{n // 1024}k {pick('prefill_mma_sync', D=64, tokens=n)['TFLOP/s']:.0f} / "
    f"{pick('prefill_mma_sync', D=128, tokens=n)['TFLOP/s']:.0f}" for n in (2048, 8192, 16384, 32768)))

print("\n| context | batch | D 64 GB/s plain | of copy | PDL | D 128 GB/s plain | of copy | PDL |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for ctx in (8192, 16384, 32768):
    for b in (1, 4, 16, 64):
        c = []
        for D in (64, 128):
            p, q = pick('decode', D=D, batch=b, context=ctx), pick('decode_pdl', D=D, batch=b, context=ctx)
            c += [f"{p['GB/s']:,.0f}", f"{p['of_copy']:.2f}", f"{q['of_copy']:.2f}"]
        print(f"| {ctx:,} | {b} | " + " | ".join(c) + " |")

print("\n| D, batch | 8k: call us / same-size copy us | 16k | 32k | decode of the copy bandwidth, 8k / 16k / 32k |")
print("| --- | --- | --- | --- | --- |")
for D in (64, 128):
    for b in (1, 4):
        qs = [pick('decode_pdl', D=D, batch=b, context=c) for c in (8192, 16384, 32768)]
        cells = [f"{q['us']:.1f} / {q['copy_us']:.1f}" if 'copy_us' in q else f"{q['us']:.1f} / -" for q in qs]
        print(f"| {D}, {b} | " + " | ".join(cells) + " | " + " / ".join(f"{q['of_copy']:.2f}" for q in qs) + " |")

names = {'llama-3.2-1b': 'Llama-3.2-1B', 'qwen3-4b': 'Qwen3-4B'}
print("\n| model | prompt | batch | prefill tok/s | TTFT ms | decode tok/s | decode step ms | peak GiB |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for m in names:
    for n in (2048, 8192, 16384, 32768):
        p = os.path.join(d, f'bench_{m}_{n}.json')
        if not os.path.exists(p):
            continue
        res = json.load(open(p))['results']
        def col(key, fmt):
            return " / ".join(fmt.format(r[key]['median'] if key != 'batch' else r[key]) for r in res)
        print(f"| {names[m]} | {n:,} | {col('batch', '{}')} | {col('prefill_tokens_per_s', '{:,.0f}')} "
              f"| {col('ttft_ms', '{:,.1f}')} | {col('decode_tokens_per_s', '{:,.0f}')} | {col('step_ms', '{:.3f}')} "
              f"| {max(r['peak_device_bytes'] for r in res) / 2**30:.1f} |")

for m in names:
    p = os.path.join(d, f'profile_{m}_32k.json')
    if os.path.exists(p):
        pr = json.load(open(p))['results'][0]['profile']
        fams = ", ".join(f"{f['family']} {f['ms_per_step']:.3f}" for f in pr['families'])
        print(f"\nprofile {names[m]} 32k, eager step {pr['wall_ms_per_step']:.3f} ms: {fams}, "
              f"gaps {pr['gaps_ms_per_step']:.3f}")
