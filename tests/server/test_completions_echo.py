"""/v1/completions with echo and logprobs, as OpenAI and vLLM: the prompt's tokens come first
(the first with null token_logprobs and top_logprobs), then the generated ones; text_offset counts
from the start of the echoed text. Each prompt entry is checked against a plain request for the
same prefix: its top alternatives, and the prompt token's logprob where that request's 20 best
list it. max_tokens 0 with echo returns the prompt's entries alone."""
import json
import subprocess

import pytest
import requests

from conftest import BIN

PROMPT = "The capital of France is Paris, and"
K = 3
EPS = 1e-3


def prompt_ids(text):
    out = subprocess.run([str(BIN), "tokenize", "-m", "default", "--json", "-q", "--parse-special", text],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["tokens"]


def test_echo_with_logprobs_lists_the_prompt_first(client, model):
    ids = prompt_ids(PROMPT)
    kw = dict(model=model, max_tokens=4, temperature=0, logprobs=K)
    plain = client.completions.create(prompt=PROMPT, **kw).choices[0]
    echoed = client.completions.create(prompt=PROMPT, echo=True, **kw)
    c, n = echoed.choices[0], len(ids)
    assert echoed.usage.prompt_tokens == n and c.text == PROMPT + plain.text
    lp, gen = c.logprobs, plain.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset)
    assert len(lp.tokens) == n + len(gen.tokens)
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    # Offsets from the start of the echoed text; each token's text is there.
    assert lp.text_offset[0] == 0
    for tok, off in zip(lp.tokens, lp.text_offset):
        assert c.text[off:].startswith(tok), (tok, off)
    assert lp.text_offset[n:] == [o + len(PROMPT) for o in gen.text_offset]
    # The generated part is the plain request's.
    assert lp.tokens[n:] == gen.tokens
    assert lp.token_logprobs[n:] == pytest.approx(gen.token_logprobs, abs=EPS)
    check_prompt_entries(client, model, ids, lp)


def check_prompt_entries(client, model, ids, lp):
    """The prompt's entries 1..n-1 of lp against a plain request for each prefix (logprobs=20):
    the same K best, and the prompt token's logprob where those 20 list it."""
    listed, n = 0, len(ids)
    for i in range(1, n):
        top = lp.top_logprobs[i]
        assert lp.tokens[i] in top and len(top) in (K, K + 1), (i, top)
        assert top[lp.tokens[i]] == pytest.approx(lp.token_logprobs[i], abs=EPS)
        ref = client.completions.create(model=model, prompt=ids[:i], max_tokens=1, temperature=0, logprobs=20)
        want = ref.choices[0].logprobs.top_logprobs[0]
        best = sorted(want, key=want.get, reverse=True)[:K]
        assert set(best) <= set(top), (i, best, top)
        for t in best:
            assert top[t] == pytest.approx(want[t], abs=EPS), (i, t)
        if lp.tokens[i] in want:
            listed += 1
            assert want[lp.tokens[i]] == pytest.approx(lp.token_logprobs[i], abs=EPS), i
    assert listed >= n // 2, listed


def test_echo_with_logprobs_streamed_and_batched(client, model):
    kw = dict(model=model, max_tokens=4, temperature=0, logprobs=1, echo=True)
    whole = client.completions.create(prompt=PROMPT, **kw).choices[0]
    # Streamed: the first chunk is the prompt with its logprobs; the chunks add up to the whole.
    chunks = list(client.completions.create(prompt=PROMPT, stream=True, **kw))
    first = chunks[0].choices[0]
    assert first.text == PROMPT and first.logprobs.token_logprobs[0] is None
    tokens, lps, offs = [], [], []
    for ch in chunks:
        if ch.choices and ch.choices[0].logprobs:
            tokens += ch.choices[0].logprobs.tokens
            lps += ch.choices[0].logprobs.token_logprobs
            offs += ch.choices[0].logprobs.text_offset
    assert tokens == whole.logprobs.tokens and offs == whole.logprobs.text_offset
    assert lps[0] is None and lps[1:] == pytest.approx(whole.logprobs.token_logprobs[1:], abs=EPS)
    # A batch with n choices: every choice of a prompt echoes its own prompt's entries.
    other = "1, 2, 3,"
    batch = client.completions.create(prompt=[PROMPT, other], n=2, **kw)
    alone = client.completions.create(prompt=other, **kw).choices[0]
    for j, want in ((0, whole), (1, whole), (2, alone), (3, alone)):
        got = batch.choices[j].logprobs
        assert got.tokens == want.logprobs.tokens and got.text_offset == want.logprobs.text_offset, j
        assert got.token_logprobs[0] is None
        assert got.token_logprobs[1:] == pytest.approx(want.logprobs.token_logprobs[1:], abs=EPS), j


def test_echo_with_logprobs_one_token_prompt(server):
    body = {"prompt": [504], "echo": True, "logprobs": 2, "max_tokens": 2, "temperature": 0}
    r = requests.post(server.url + "/v1/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    lp = r.json()["choices"][0]["logprobs"]
    assert lp["tokens"][0] == "The" and lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert len(lp["tokens"]) == 3 and lp["text_offset"][:2] == [0, 3]


# max_tokens 0 with echo, as OpenAI and vLLM (and lm-evaluation-harness's loglikelihood requests):
# the prompt alone, finish_reason "length", no completion tokens.
def test_echo_without_generation_scores_the_prompt(client, model):
    ids = prompt_ids(PROMPT)
    n = len(ids)
    r = client.completions.create(model=model, prompt=PROMPT, echo=True, max_tokens=0, logprobs=K, temperature=0)
    c, lp = r.choices[0], r.choices[0].logprobs
    assert c.text == PROMPT and c.finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (n, 0, n)
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    # The same entries as an echo that generates.
    more = client.completions.create(model=model, prompt=PROMPT, echo=True, max_tokens=1, logprobs=K,
                                     temperature=0).choices[0].logprobs
    assert lp.tokens == more.tokens[:n] and lp.text_offset == more.text_offset[:n]
    assert lp.token_logprobs[1:] == pytest.approx(more.token_logprobs[1:n], abs=EPS)
    check_prompt_entries(client, model, ids, lp)
    # Without logprobs: the text alone.
    plain = client.completions.create(model=model, prompt=PROMPT, echo=True, max_tokens=0)
    assert plain.choices[0].text == PROMPT and plain.choices[0].logprobs is None
    assert plain.choices[0].finish_reason == "length" and plain.usage.completion_tokens == 0


def test_echo_without_generation_batched_and_streamed(server, client, model):
    # lm-eval's shape: a batch of token-id prompts, logprobs 1, greedy.
    a, b = prompt_ids(PROMPT), prompt_ids("1, 2, 3,")
    body = {"model": model, "prompt": [a, b], "echo": True, "max_tokens": 0, "logprobs": 1, "temperature": 0,
            "n": 2}
    r = requests.post(server.url + "/v1/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    out = r.json()
    u = out["usage"]
    assert (u["prompt_tokens"], u["completion_tokens"], u["total_tokens"]) == (len(a) + len(b), 0, len(a) + len(b))
    for j, ids in enumerate((a, a, b, b)):
        c = out["choices"][j]
        assert c["index"] == j and c["finish_reason"] == "length"
        assert len(c["logprobs"]["tokens"]) == len(ids) and c["logprobs"]["token_logprobs"][0] is None
    assert out["choices"][0]["text"] == PROMPT
    # Streamed: one chunk per choice, the prompt with its logprobs and the finish reason.
    chunks = list(client.completions.create(model=model, prompt=PROMPT, echo=True, max_tokens=0, logprobs=1,
                                            stream=True, stream_options={"include_usage": True}))
    texts = [ch.choices[0] for ch in chunks if ch.choices]
    assert len(texts) == 1 and texts[0].text == PROMPT and texts[0].finish_reason == "length"
    assert texts[0].logprobs.tokens == out["choices"][0]["logprobs"]["tokens"]
    assert chunks[-1].usage.completion_tokens == 0 and chunks[-1].usage.prompt_tokens == len(a)
    # Streamed without logprobs: the text adds up to the prompt.
    parts = list(client.completions.create(model=model, prompt=PROMPT, echo=True, max_tokens=0, stream=True))
    assert "".join(ch.choices[0].text for ch in parts) == PROMPT
    assert parts[-1].choices[0].finish_reason == "length"


def test_max_tokens_zero_needs_echo(server):
    # As vLLM: max_tokens 0 generates nothing, so without echo there is nothing to return.
    for extra in ({}, {"echo": False}, {"logprobs": 2}):
        body = {"prompt": PROMPT, "max_tokens": 0, **extra}
        r = requests.post(server.url + "/v1/completions", json=body, timeout=60)
        assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens", (extra, r.text)
