#!/usr/bin/env python3
"""lm-eval-style prompt scoring on a running server: echo + logprobs + max_tokens 0 on random token-id
prompts, against plain prefills (max_tokens 1) of other prompts of the same length.
usage: score_speed.py URL LEN N"""
import json, random, sys, time, urllib.request

URL, LEN, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(LEN)


def post(body):
    req = urllib.request.Request(f"{URL}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def prompts():
    return [[rng.randrange(1000, 120000) for _ in range(LEN)] for _ in range(N)]


post({"prompt": prompts()[0], "max_tokens": 1})  # warm-up
for name, extra in (("prefill", {"max_tokens": 1}), ("score top1", {"max_tokens": 0, "echo": True, "logprobs": 1}),
                    ("score top5", {"max_tokens": 0, "echo": True, "logprobs": 5})):
    ps = prompts()
    t = time.time()
    for p in ps:
        out = post({"prompt": p, **extra})
    dt = (time.time() - t) / N
    lp = out["choices"][0].get("logprobs")
    print(f"len {LEN} {name}: {dt * 1000:.1f} ms a request ({LEN / dt:.0f} tok/s)"
          + (f", {len(lp['token_logprobs'])} logprobs" if lp else ""))
