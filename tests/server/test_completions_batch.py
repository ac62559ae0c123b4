"""/v1/completions as OpenAI and vLLM take it beyond one prompt: a batch of prompts (strings or
token-id lists, n choices each, indexed prompt * n + j) and `echo`."""
import requests

from conftest import CTX, tokenize_count

PROMPTS = ["The capital of France is", "1, 2, 3, 4, 5,", "My favourite animal is"]


def test_batch_of_strings_is_one_choice_set_per_prompt(client, model):
    kw = dict(model=model, max_tokens=6, temperature=1.0, seed=11)
    r = client.completions.create(prompt=PROMPTS, n=2, **kw)
    assert [c.index for c in r.choices] == list(range(6))
    singles = [client.completions.create(prompt=p, n=2, **kw) for p in PROMPTS]
    assert [c.text for c in r.choices] == [c.text for s in singles for c in s.choices]
    assert [c.finish_reason for c in r.choices] == [c.finish_reason for s in singles for c in s.choices]
    assert r.usage.prompt_tokens == sum(tokenize_count(p) for p in PROMPTS)
    assert r.usage.completion_tokens == sum(s.usage.completion_tokens for s in singles)
    # Streamed: every chunk names its choice, and each choice ends once.
    texts, finals = [""] * 6, [0] * 6
    for c in client.completions.create(prompt=PROMPTS, n=2, stream=True, **kw):
        texts[c.choices[0].index] += c.choices[0].text
        finals[c.choices[0].index] += c.choices[0].finish_reason is not None
    assert texts == [c.text for c in r.choices] and finals == [1] * 6


def test_batch_of_token_id_lists(client, model):
    ids = [[19556, 905], [19556]]
    r = client.completions.create(model=model, prompt=ids, max_tokens=4, temperature=0)
    assert [c.index for c in r.choices] == [0, 1]
    for c, p in zip(r.choices, ids):
        assert c.text == client.completions.create(model=model, prompt=p, max_tokens=4, temperature=0).choices[0].text
    assert r.usage.prompt_tokens == 3


def test_batch_refused_as_a_whole(server):
    # One prompt of the batch beyond the context: a 400, nothing generated for the others.
    body = {"prompt": ["Hi", "hi " * (CTX + 10)], "max_tokens": 4}
    bad = requests.post(server.url + "/v1/completions", json=body, timeout=60)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "prompt", bad.text
    assert server.wait_idle()["lite_llama_requests_running"] == 0


def test_echo_prepends_the_prompt(client, model):
    prompt = "1, 2, 3, 4, 5,"
    kw = dict(model=model, max_tokens=6, temperature=0)
    plain = client.completions.create(prompt=prompt, **kw).choices[0]
    # " 3" is in the prompt: an echoed prompt does not stop the generation (vLLM).
    echoed = client.completions.create(prompt=prompt, echo=True, stop=[" 3"], **kw)
    assert echoed.choices[0].text == prompt + plain.text
    assert echoed.choices[0].finish_reason == plain.finish_reason
    assert echoed.usage.completion_tokens == 6
    streamed = list(client.completions.create(prompt=prompt, echo=True, stream=True, **kw))
    assert streamed[0].choices[0].text == prompt
    assert "".join(c.choices[0].text for c in streamed) == prompt + plain.text
    # Token ids echo as their text; a batch echoes each prompt in its choices.
    ids = client.completions.create(prompt=[[19556, 905], [19556]], echo=True, n=2, **kw)
    one = client.completions.create(prompt=[19556], **kw).choices[0].text
    assert [c.text for c in ids.choices][2:] == ["Hello" + one] * 2
    assert all(c.text.startswith("Hello world") for c in ids.choices[:2])


def test_context_error_names_max_completion_tokens(server):
    # The parameter the client sent, not its older alias.
    body = {"messages": [{"role": "user", "content": "Hello there"}], "max_completion_tokens": CTX - 5}
    r = requests.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    err = r.json()["error"]
    assert r.status_code == 400 and err["code"] == "context_length_exceeded", r.text
    assert err["param"] == "max_completion_tokens", r.text
