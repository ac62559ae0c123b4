import json, subprocess, sys, numpy as np
B = sys.argv[1]
rng = np.random.default_rng(1)
seqs = [rng.integers(0, 151936, n).tolist() for n in [23, 77, 128, 200]]
json.dump(seqs, open('/tmp/s4.json', 'w'))
json.dump([[1,2,3,4,5,6,7,8]], open('/tmp/t8.json', 'w'))
base = [B, 'score', '-m', 'tests/gpu/configs/qwen2.5-3b.json', '--load-format', 'dummy', '--device', 'cuda', '--ctx', '512', '--max-num-seqs', '64', '-q', '--full']
for extra in (['--tokens', '/tmp/t8.json'], ['--tokens', '/tmp/s4.json'], ['--tokens', '/tmp/s4.json', '--decode-tail', '16'], ['--tokens', '/tmp/t8.json', '--quantize', 'int8']):
    r = subprocess.run(base + extra, capture_output=True, text=True)
    if r.returncode: print(extra, 'ERR', r.stderr[-300:]); continue
    j = json.loads(r.stdout)
    for i, s in enumerate(j['sequences']):
        lp = np.array([np.nan if v is None else v for v in s['logprobs']], dtype=float)
        bad = np.where(~np.isfinite(lp))[0]
        print(extra[1:], 'seq', i, 'n', len(lp), 'nonfinite', len(bad), 'first', bad[:5].tolist(), 'lp[:4]', np.round(lp[:4], 3).tolist(), 'argmax[:4]', s['argmax'][:4])
