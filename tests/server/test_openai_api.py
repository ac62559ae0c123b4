"""The OpenAI API through the official `openai` client: completions, chat, streaming, stop
strings, seeds, usage, n, logprobs."""
import pytest
import requests

from conftest import Server, tokenize_count

CHAT = [{"role": "user", "content": "Name three colours."}]


def test_models(client, model):
    models = client.models.list().data
    assert [m.id for m in models] == [model]
    assert model == "SmolLM2-135M-Instruct.Q4_1"
    assert client.models.retrieve(model).id == model


def test_completion(client, model):
    r = client.completions.create(model=model, prompt="The capital of France is", max_tokens=8, temperature=0)
    assert r.id.startswith("cmpl-") and r.object == "text_completion" and r.created > 0
    assert r.model == model
    assert len(r.choices) == 1 and r.choices[0].index == 0
    assert r.choices[0].text.strip()
    assert r.choices[0].finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens == tokenize_count("The capital of France is")
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat(client, model):
    r = client.chat.completions.create(model=model, messages=CHAT, max_tokens=12, temperature=0)
    assert r.id.startswith("chatcmpl-") and r.object == "chat.completion"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content.strip()
    assert r.usage.completion_tokens <= 12


def test_chat_content_parts_and_template_kwargs(client, model):
    parts = [{"role": "user", "content": [{"type": "text", "text": "Name three colours."}]}]
    a = client.chat.completions.create(model=model, messages=parts, max_tokens=8, temperature=0)
    b = client.chat.completions.create(model=model, messages=CHAT, max_tokens=8, temperature=0,
                                       extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert a.choices[0].message.content == b.choices[0].message.content
    assert a.usage.prompt_tokens == b.usage.prompt_tokens


def test_stream_completion_equals_blocking(client, model):
    kw = dict(model=model, prompt="Once upon a time", max_tokens=16, temperature=0)
    full = client.completions.create(**kw).choices[0].text
    chunks = list(client.completions.create(stream=True, **kw))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == full
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    assert all(c.id == chunks[0].id for c in chunks)


def test_stream_chat_with_usage(client, model):
    kw = dict(model=model, messages=CHAT, max_tokens=16, temperature=0)
    full = client.chat.completions.create(**kw)
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [full.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == full.usage.prompt_tokens
    assert all(c.usage is None for c in chunks[:-1])


def test_stream_raw_sse_ends_with_done(server, model):
    body = {"model": model, "prompt": "Hi", "max_tokens": 4, "stream": True}
    with requests.post(server.url + "/v1/completions", json=body, stream=True, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        raw = r.content.decode()
    events = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"


def test_stop_sequence(client, model):
    kw = dict(model=model, prompt="1, 2, 3, 4, 5,", max_tokens=24, temperature=0)
    free = client.completions.create(**kw).choices[0].text
    assert " 8" in free, free
    stopped = client.completions.create(stop=[" 8", "never"], **kw).choices[0]
    assert stopped.text == free[: free.index(" 8")]
    assert stopped.finish_reason == "stop"
    # Streaming holds back text that could start a stop string.
    chunks = list(client.completions.create(stop=" 8", stream=True, **kw))
    assert "".join(c.choices[0].text for c in chunks) == stopped.text


def test_seed_reproducible(client, model):
    kw = dict(model=model, prompt="My favourite animal is", max_tokens=12, temperature=1.0)
    a = client.completions.create(seed=1234, **kw).choices[0].text
    b = client.completions.create(seed=1234, **kw).choices[0].text
    assert a == b
    others = {client.completions.create(seed=s, **kw).choices[0].text for s in range(5)}
    assert len(others) >= 2


def test_usage_counts_tokens(client, model):
    prompt = "Count the tokens <|im_start|> here"
    r = client.completions.create(model=model, prompt=prompt, max_tokens=7, temperature=0,
                                  logprobs=0, extra_body={"ignore_eos": True})
    assert r.usage.prompt_tokens == tokenize_count(prompt)
    assert r.usage.completion_tokens == 7 == len(r.choices[0].logprobs.tokens)
    assert r.choices[0].finish_reason == "length"


def test_prompt_as_token_ids(client, model):
    r = client.completions.create(model=model, prompt=[19556, 905], max_tokens=4, temperature=0)
    t = client.completions.create(model=model, prompt="Hello world", max_tokens=4, temperature=0)
    assert r.usage.prompt_tokens == 2
    assert r.choices[0].text == t.choices[0].text


def test_n_choices_follow_seeds(client, model):
    kw = dict(model=model, prompt="A short poem:", max_tokens=8, temperature=1.0)
    both = client.completions.create(n=2, seed=7, **kw)
    assert [c.index for c in both.choices] == [0, 1]
    first = client.completions.create(seed=7, **kw).choices[0].text
    second = client.completions.create(seed=8, **kw).choices[0].text
    assert [c.text for c in both.choices] == [first, second]
    assert both.usage.completion_tokens == sum(
        client.completions.create(seed=s, **kw).usage.completion_tokens for s in (7, 8))
    # Streaming with n = 2: every chunk names its choice.
    chunks = list(client.completions.create(n=2, seed=7, stream=True, **kw))
    texts = ["", ""]
    for c in chunks:
        texts[c.choices[0].index] += c.choices[0].text
    assert texts == [first, second]


def test_completion_logprobs(client, model):
    r = client.completions.create(model=model, prompt="The sky is", max_tokens=5, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == r.usage.completion_tokens
    assert "".join(lp.tokens) == r.choices[0].text
    for chosen, top in zip(lp.token_logprobs, lp.top_logprobs):
        assert 1 <= len(top) <= 3
        assert chosen <= 0
        assert chosen == pytest.approx(max(top.values()), abs=1e-4)  # greedy picks the best


def test_completion_logprobs_sampled_bytes_and_offsets(client, model):
    """The sampled token is always among top_logprobs (OpenAI: up to logprobs + 1 entries); a
    token that is part of a UTF-8 character is "bytes:\\x.." (as "\ufffd" every such token had one key,
    and a wrong value); text_offset counts characters, so text[offset:] starts at the token."""
    for seed in (1, 2, 3):
        r = client.completions.create(model=model, prompt="The weather today", max_tokens=10, temperature=1.5,
                                      seed=seed, logprobs=1)
        lp = r.choices[0].logprobs
        for tok, chosen, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
            assert top.get(tok) == pytest.approx(chosen, abs=1e-6), (tok, chosen, top)
            assert 1 <= len(top) <= 2
    r = client.completions.create(model=model, prompt="Write three emojis of animals: \U0001f436", max_tokens=12,
                                  temperature=0, logprobs=5)
    lp, text = r.choices[0].logprobs, r.choices[0].text
    assert any(t.startswith("bytes:") for t in lp.tokens), lp.tokens
    raw = b""
    for tok, off, top in zip(lp.tokens, lp.text_offset, lp.top_logprobs):
        assert len(top) in (5, 6), top
        piece = bytes.fromhex(tok[6:].replace("\\x", "")) if tok.startswith("bytes:") else tok.encode()
        # The character this token's first byte belongs to starts at `off`: characters begun
        # before it, less the one it continues.
        begun = sum(1 for c in raw if c & 0xC0 != 0x80)
        assert off == begun - (1 if piece and piece[0] & 0xC0 == 0x80 else 0), (tok, off)
        raw += piece
    assert raw.decode("utf-8", "replace") == text
    r = client.completions.create(model=model, prompt="En fran\u00e7ais: Le caf\u00e9 et la cr\u00e8me br\u00fbl\u00e9e sont",
                                  max_tokens=8, temperature=0, logprobs=0)
    lp, text = r.choices[0].logprobs, r.choices[0].text
    for tok, off in zip(lp.tokens, lp.text_offset):
        assert text[off:].startswith(tok), (tok, off, text)
    assert all(len(top) == 1 for top in lp.top_logprobs), lp.top_logprobs


def test_min_tokens(server):
    """vLLM's min_tokens: the greedy answer ends (EOS) sooner; with min_tokens it goes on."""
    body = {"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 60, "temperature": 0}
    free = requests.post(server.url + "/v1/chat/completions", json=body, timeout=120).json()
    n = free["usage"]["completion_tokens"]
    assert free["choices"][0]["finish_reason"] == "stop" and n < 40
    r = requests.post(server.url + "/v1/chat/completions", json={**body, "min_tokens": 40}, timeout=120).json()
    assert r["usage"]["completion_tokens"] > 40, r
    assert r["choices"][0]["message"]["content"].startswith(free["choices"][0]["message"]["content"][:20])
    for extra in ({"min_tokens": 61}, {"min_tokens": -1}, {"min_tokens": 10**9, "max_tokens": None}):
        bad = requests.post(server.url + "/v1/chat/completions", json={**body, **extra}, timeout=60)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "min_tokens", bad.text


def test_vllm_text_options(server):
    """include_stop_str_in_output and skip_special_tokens, as vLLM takes them."""
    url = server.url + "/v1/completions"
    body = {"prompt": "The capital of France is", "max_tokens": 16, "temperature": 0}
    full = requests.post(url, json=body, timeout=120).json()["choices"][0]["text"]
    stop = full.split()[1]
    cut = requests.post(url, json={**body, "stop": [stop]}, timeout=120).json()["choices"][0]["text"]
    kept = requests.post(url, json={**body, "stop": [stop], "include_stop_str_in_output": True},
                         timeout=120).json()["choices"][0]["text"]
    assert cut == full[:full.index(stop)] and kept == cut + stop
    chat = {"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 40, "temperature": 0, "ignore_eos": True}
    curl = server.url + "/v1/chat/completions"
    raw = requests.post(curl, json={**chat, "skip_special_tokens": False}, timeout=120).json()
    plain = requests.post(curl, json=chat, timeout=120).json()
    text = raw["choices"][0]["message"]["content"]
    assert "<|im_end|>" in text and "<|im_end|>" not in plain["choices"][0]["message"]["content"]


def test_continue_final_message(server):
    """vLLM's continue_final_message: the prompt ends right after the assistant's text (ChatML:
    without the '<|im_end|>' and '\\n' that close the turn), and the answer continues it."""
    url = server.url + "/v1/chat/completions"
    msgs = [{"role": "user", "content": "Write a haiku about the sea."}, {"role": "assistant", "content": "Waves fold"}]
    body = {"messages": msgs, "max_tokens": 8, "temperature": 0}
    closed = requests.post(url, json={**body, "add_generation_prompt": False}, timeout=120).json()
    cont = requests.post(url, json={**body, "add_generation_prompt": False, "continue_final_message": True},
                         timeout=120).json()
    assert cont["usage"]["prompt_tokens"] == closed["usage"]["prompt_tokens"] - 2, (cont["usage"], closed["usage"])
    for extra, msg in (({"add_generation_prompt": True}, "exclude"), ({"messages": msgs[:1]}, "assistant message last")):
        bad = requests.post(url, json={**body, "continue_final_message": True, **extra}, timeout=60)
        err = bad.json()["error"]
        assert bad.status_code == 400 and msg in err["message"] and err["param"] == "continue_final_message", bad.text
        assert "continue_final_message" in err["message"], bad.text


def test_chat_logprobs(client, model):
    r = client.chat.completions.create(model=model, messages=CHAT, max_tokens=4, temperature=0,
                                       logprobs=True, top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for t in content:
        assert len(t.top_logprobs) == 2
        assert bytes(t.bytes).decode("utf-8", "replace") == t.token or t.bytes
        assert t.logprob == pytest.approx(t.top_logprobs[0].logprob, abs=1e-4)


def test_default_max_tokens():
    # Without max_tokens, as OpenAI and vLLM: completions stop after 16 tokens, or where the
    # context ends first (a 125-token prompt in a context of 128 leaves 3); chat runs to the end
    # of the context.
    s = Server("--max-num-seqs", "1", ctx=128)
    try:
        c = s.client()
        model = c.models.list().data[0].id
        kw = dict(model=model, temperature=0, extra_body={"ignore_eos": True})
        r = c.completions.create(prompt=[19556] * 8, **kw)
        assert r.usage.completion_tokens == 16 and r.choices[0].finish_reason == "length"
        r = c.completions.create(prompt=[19556] * 125, **kw)
        assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"
        r = c.chat.completions.create(messages=[{"role": "user", "content": "Hi"}], **kw)
        assert r.usage.prompt_tokens + r.usage.completion_tokens == 128 and r.choices[0].finish_reason == "length"
    finally:
        assert s.stop() == 0


def test_tensor_parallel_server_equals_one_rank(client, model):
    # `serve --tp 3` (the default model's 9 heads over three CPU ranks sharing memory): the same
    # greedy chat answer as the one-rank shared server, streamed and not.
    msgs = [{"role": "user", "content": "Name three colours."}]
    want = client.chat.completions.create(model=model, messages=msgs, max_tokens=24, temperature=0)
    s = Server("--tp", "3")
    try:
        tp = s.client()
        got = tp.chat.completions.create(model=model, messages=msgs, max_tokens=24, temperature=0)
        assert got.choices[0].message.content == want.choices[0].message.content
        streamed = "".join(c.choices[0].delta.content or "" for c in tp.chat.completions.create(
            model=model, messages=msgs, max_tokens=24, temperature=0, stream=True) if c.choices)
        assert streamed == want.choices[0].message.content
    finally:
        assert s.stop() == 0, "".join(s.log)
