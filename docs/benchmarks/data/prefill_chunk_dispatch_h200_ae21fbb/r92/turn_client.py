#!/usr/bin/env python3
"""The next turn of a chat against a running lite-llama server: a PREFIX-token prompt (random ids)
fills the prefix cache, then prompts of that prefix plus N fresh tokens, max_tokens 1; prints one
JSON line per request (wall ms, cached tokens). usage: turn_client.py PORT TAG PREFIX N[,N..] REPS"""
import json, random, sys, time, urllib.request
port, tag, prefix, ns, reps = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), [int(x) for x in sys.argv[4].split(',')], int(sys.argv[5])
rng = random.Random(7)
base = [rng.randrange(100, 30000) for _ in range(prefix)]
def req(ids):
    body = json.dumps({"prompt": ids, "max_tokens": 1, "temperature": 0}).encode()
    r = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(r, timeout=60) as f:
        out = json.load(f)
    return (time.perf_counter() - t) * 1e3, out["usage"].get("prompt_tokens_details", {}).get("cached_tokens", -1)
ms, c = req(base)
print(json.dumps({"tag": tag, "new": prefix, "cached": c, "ms": round(ms, 3), "fill": True}))
for rep in range(reps):
    for n in ns:
        ms, c = req(base + [rng.randrange(100, 30000) for _ in range(n)])
        print(json.dumps({"tag": tag, "new": n, "cached": c, "ms": round(ms, 3)}), flush=True)
