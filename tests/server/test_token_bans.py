"""vLLM's allowed_token_ids and bad_words as extra request fields on /v1/completions and
/v1/chat/completions. References: the logprobs the server reports without the constraint, and
`lite-llama tokenize` for the words' token ids (vLLM's two tokenizations of each word)."""
import json
import subprocess

import pytest
import requests
from conftest import BIN

PROMPT = "Q: Is the sky blue?\nA:"


def post(server, endpoint, body):
    return requests.post(f"{server.url}/v1/{endpoint}", json=body, timeout=300)


def completion(server, **body):
    r = post(server, "completions", {"prompt": PROMPT, "temperature": 0, **body})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def tokenize(text):
    out = subprocess.run([str(BIN), "tokenize", "-m", "default", "--json", "-q", text],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["tokens"]


def test_allowed_token_ids_pick_the_best_allowed(server):
    free = completion(server, max_tokens=1, logprobs=10)
    top = free["logprobs"]["top_logprobs"][0]  # text -> logprob
    ranked = sorted(top, key=lambda t: -top[t])
    ids = {t: tokenize(t) for t in ranked[2:6]}
    allowed = {t: i[0] for t, i in ids.items() if len(i) == 1}
    assert len(allowed) >= 2, ids
    best = max(allowed, key=lambda t: top[t])
    got = completion(server, max_tokens=1, allowed_token_ids=list(allowed.values()))
    assert got["text"] == best != free["text"]
    r = post(server, "chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5,
                                          "allowed_token_ids": list(allowed.values()), "ignore_eos": True,
                                          "logprobs": True})
    assert r.status_code == 200, r.text
    tokens = [t["token"] for t in r.json()["choices"][0]["logprobs"]["content"]]
    assert len(tokens) == 5 and set(tokens) <= set(allowed), (tokens, allowed)


def test_bad_words_ban_the_word(server):
    free = completion(server, max_tokens=6)["text"]
    word = free.split()[0]
    out = completion(server, max_tokens=6, bad_words=[word])["text"]
    assert out != free
    assert word not in out.split(), (word, out)


@pytest.mark.parametrize("endpoint", ["completions", "chat/completions"])
@pytest.mark.parametrize("extra,param", [
    ({"allowed_token_ids": []}, "allowed_token_ids"),
    ({"allowed_token_ids": [1, 10**9]}, "allowed_token_ids"),
    ({"allowed_token_ids": "5"}, "allowed_token_ids"),
    ({"bad_words": "word"}, "bad_words"),
    ({"bad_words": [" "]}, "bad_words"),
    ({"bad_words": [5]}, "bad_words"),
])
def test_bad_values_are_400(server, endpoint, extra, param):
    body = {"prompt": "x"} if endpoint == "completions" else {"messages": [{"role": "user", "content": "x"}]}
    r = post(server, endpoint, {**body, "max_tokens": 1, **extra})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.text
