#!/usr/bin/env python3
"""GPU checks through a running server: allowed_token_ids / bad_words, and generation logprobs now
taken on the device (same tokens with and without logprobs, values consistent with the top list and
with echo scoring). usage: lp_check.py URL BIN MODEL"""
import json, math, subprocess, sys, urllib.request

URL, BIN, MODEL = sys.argv[1:4]
PROMPT = "Q: Is the sky blue?\nA:"
ok = True


def post(ep, body):
    req = urllib.request.Request(f"{URL}/v1/{ep}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def comp(**body):
    return post("completions", {"prompt": PROMPT, "temperature": 0, **body})["choices"][0]


def check(name, cond, detail=""):
    global ok
    ok &= bool(cond)
    print(("PASS " if cond else "FAIL ") + name, detail if not cond else "")


def tokenize(text):
    out = subprocess.run([BIN, "tokenize", "-m", MODEL, "--load-format", "dummy", "--json", "-q", "--no-special", text],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["tokens"]


words = [" the", " cat", " dog", " blue", " sky", " yes"]
ids = {w: tokenize(w) for w in words}
allowed = {w: i[0] for w, i in ids.items() if len(i) == 1}
print("allowed", allowed)
a = comp(max_tokens=8, ignore_eos=True, allowed_token_ids=list(allowed.values()))
b = comp(max_tokens=8, ignore_eos=True, allowed_token_ids=list(allowed.values()), logprobs=5)
check("allowed: same text with and without logprobs", a["text"] == b["text"], (a["text"], b["text"]))
toks = b["logprobs"]["tokens"]
check("allowed: every token allowed", set(toks) <= set(allowed), toks)
mass = [sum(math.exp(v) for v in t.values()) for t in b["logprobs"]["top_logprobs"]]
check("allowed: logprobs over the allowed tokens (top-5 mass <= 1, >= 5/6 share)", all(0.5 < m <= 1.0001 for m in mass), mass)
for seed in (1, 2):
    body = dict(temperature=1.0, max_tokens=16, ignore_eos=True, seed=seed)
    x = post("completions", {"prompt": PROMPT, **body})["choices"][0]["text"]
    y = post("completions", {"prompt": PROMPT, **body, "logprobs": 2})["choices"][0]
    check(f"seed {seed}: same text with and without logprobs", x == y["text"], (x, y["text"]))
g = comp(max_tokens=12, ignore_eos=True, logprobs=5)
lp = g["logprobs"]
good = all(abs(v - max(t.values())) < 1e-5 and max(t, key=t.get) == tok
           for tok, v, t in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]))
check("greedy: each token is its top-1, same logprob", good, lp)
# Echo scoring of prompt + completion (teacher forced, prefill path) against the decode-time values.
e = post("completions", {"prompt": PROMPT + g["text"], "max_tokens": 0, "echo": True, "logprobs": 1})["choices"][0]
tail = e["logprobs"]["token_logprobs"][-len(lp["token_logprobs"]):]
diff = max(abs(x - y) for x, y in zip(tail, lp["token_logprobs"]))
print(f"decode vs echo-scored logprobs: max |diff| {diff:.4f}")
check("greedy: decode logprobs match echo scoring within 0.1", diff < 0.1, (tail, lp["token_logprobs"]))
free6 = comp(max_tokens=6)["text"]
w = next((x for x in free6.split() if x.isalpha()), None)
if w:
    o1 = comp(max_tokens=6, bad_words=[w])["text"]
    o2 = comp(max_tokens=6, bad_words=[w], logprobs=1)["text"]
    check("bad_words: banned", o1 != free6 and w not in o1.split(), (w, free6, o1))
    check("bad_words: same with logprobs", o1 == o2, (o1, o2))
# A batch: 8 concurrent requests, half with logprobs.
import concurrent.futures as cf
def one(i):
    body = {"prompt": PROMPT + str(i), "temperature": 0.7, "seed": i, "max_tokens": 24, "ignore_eos": True}
    if i % 2: body["logprobs"] = 3
    return post("completions", body)["choices"][0]["text"]
with cf.ThreadPoolExecutor(8) as ex:
    batch = list(ex.map(one, range(8)))
alone = [one(i) for i in range(8)]
print(f"batch of 8 (half with logprobs): {sum(x == y for x, y in zip(batch, alone))} of 8 equal to each alone (info)")
print("LP CHECK", "PASS" if ok else "FAIL")
