"""LLM.generate / chat through Python against the CLI and against solo runs."""
import json

import pytest
from conftest import SEED_PROMPTS, assert_idle, run_cli
from lite_llama import SamplingParams

TOPICS = ["the sea", "a robot", "winter", "coffee", "a lighthouse", "mountains", "a cat", "the moon",
          "rain", "a library", "trains", "bees", "a volcano", "autumn", "a violin", "deserts",
          "a garden", "clocks", "the wind", "a city", "rivers", "snow", "a dragon", "bread",
          "stars", "a forest", "paper", "the sun", "an island", "music", "a bridge", "fire"]


def greedy(n):
    return SamplingParams(temperature=0, max_tokens=n)


def test_greedy_equals_cli(llm):
    n = 32
    cli = run_cli("generate", "--temp", "0", "-n", str(n), "--json",
                  *[a for p in SEED_PROMPTS for a in ("-p", p)])["results"]
    outs = llm.generate(SEED_PROMPTS, greedy(n), use_tqdm=False)
    assert [o.prompt for o in outs] == SEED_PROMPTS
    for o, c in zip(outs, cli):
        assert len(o.prompt_token_ids) == c["prompt_tokens"]
        assert o.outputs[0].token_ids == c["token_ids"]
        assert o.outputs[0].text == c["text"]
        assert o.outputs[0].finish_reason == c["finish_reason"]
    assert_idle(llm)


def test_chat_equals_cli(llm):
    prompt = "Write a haiku about GPUs."
    cli = run_cli("generate", "--chat", "--temp", "0", "-n", "24", "--json", "-p", prompt)
    out = llm.chat([{"role": "user", "content": prompt}], greedy(24), use_tqdm=False)[0]
    assert out.outputs[0].token_ids == cli["token_ids"]
    assert out.outputs[0].text == cli["text"]
    # The rendered template is the prompt, and chat equals generate over its token ids.
    assert out.prompt == llm.get_tokenizer().apply_chat_template([{"role": "user", "content": prompt}])
    again = llm.generate({"prompt_token_ids": out.prompt_token_ids}, greedy(24), use_tqdm=False)[0]
    assert again.outputs[0].token_ids == out.outputs[0].token_ids


def mixed_params(i):
    """Every fourth prompt greedy; the others sampled with seeds, stops, penalties, logprobs."""
    kind = i % 4
    if kind == 0:
        return SamplingParams(temperature=0, max_tokens=4 + i % 7,
                              repetition_penalty=1.3 if i % 8 else 1.0)
    if kind == 1:
        return SamplingParams(temperature=0.8, top_k=40, top_p=0.95, seed=i, max_tokens=10)
    if kind == 2:
        return SamplingParams(temperature=0, max_tokens=10, stop=["."], logprobs=2)
    return SamplingParams(temperature=1.0, min_p=0.05, presence_penalty=0.5,
                          frequency_penalty=0.5, seed=1000 + i, max_tokens=8, n=2)


def test_batch_of_32_mixed_equals_solo(llm):
    prompts = [f"Write one sentence about {t}." for t in TOPICS]
    params = [mixed_params(i) for i in range(32)]
    batch = llm.generate(prompts, params, use_tqdm=False)
    assert len(batch) == 32
    for i, (p, sp, b) in enumerate(zip(prompts, params, batch)):
        assert b.prompt == p and len(b.outputs) == sp.n
        assert b.outputs[0].token_ids, i
        if sp.temperature > 0 and i not in (1, 3):  # every greedy one, two seeded ones
            continue
        solo = llm.generate(p, sp, use_tqdm=False)[0]
        for bo, so in zip(b.outputs, solo.outputs):
            assert bo.token_ids == so.token_ids, f"{p!r}: batched {bo.text!r}, alone {so.text!r}"
            assert bo.text == so.text and bo.finish_reason == so.finish_reason
        if sp.logprobs is not None:
            lps = b.outputs[0].logprobs
            assert len(lps) == len(b.outputs[0].token_ids)
            for tok, d in zip(b.outputs[0].token_ids, lps):
                assert next(iter(d)) == tok and 1 <= len(d) <= 3
                assert d[tok].logprob <= 0 and d[tok].rank == 1  # greedy picks the best
    assert_idle(llm)


def test_n_choices_use_seed_plus_i(llm):
    p = "Once upon a time"
    sp = SamplingParams(temperature=1.0, seed=7, max_tokens=8, n=3)
    out = llm.generate(p, sp, use_tqdm=False)[0]
    assert [c.index for c in out.outputs] == [0, 1, 2]
    for i, c in enumerate(out.outputs):
        alone = llm.generate(p, SamplingParams(temperature=1.0, seed=7 + i, max_tokens=8),
                             use_tqdm=False)[0]
        assert c.token_ids == alone.outputs[0].token_ids
    assert len({tuple(c.token_ids) for c in out.outputs}) > 1


def test_stop_strings(llm):
    p = SEED_PROMPTS[0]
    full = llm.generate(p, greedy(24), use_tqdm=False)[0].outputs[0]
    words = full.text.split()
    stop = words[len(words) // 2]  # a word from the middle
    out = llm.generate(p, SamplingParams(temperature=0, max_tokens=24, stop=[stop, "zzqx"]),
                       use_tqdm=False)[0].outputs[0]
    assert out.text == full.text[:full.text.index(stop)]
    assert out.finish_reason == "stop" and out.stop_reason == stop
    # A stop token id ends the completion and stays in token_ids.
    tok = full.token_ids[5]
    out = llm.generate(p, SamplingParams(temperature=0, max_tokens=24, stop_token_ids=[tok]),
                       use_tqdm=False)[0].outputs[0]
    assert out.token_ids == full.token_ids[:full.token_ids.index(tok) + 1]
    assert out.finish_reason == "stop" and out.stop_reason == tok


def test_include_stop_str_and_special_tokens(llm):
    """vLLM's include_stop_str_in_output and skip_special_tokens."""
    p = SEED_PROMPTS[0]
    full = llm.generate(p, greedy(24), use_tqdm=False)[0].outputs[0]
    stop = full.text.split()[len(full.text.split()) // 2]
    out = llm.generate(p, SamplingParams(temperature=0, max_tokens=24, stop=[stop], include_stop_str_in_output=True),
                       use_tqdm=False)[0].outputs[0]
    assert out.text == full.text[:full.text.index(stop) + len(stop)] and out.stop_reason == stop
    # Two stop strings met at one place: the longer one is the text's end.
    out = llm.generate(p, SamplingParams(temperature=0, max_tokens=24, stop=[stop[:1], stop],
                                         include_stop_str_in_output=True), use_tqdm=False)[0].outputs[0]
    assert out.text.endswith(stop[:1]) and len(out.text) <= full.text.index(stop) + len(stop)
    # A control token the model writes mid-text (<|im_end|> then <|im_start|> with ignore_eos) is
    # text only with skip_special_tokens=False.
    chat = [{"role": "user", "content": "Say hi"}]
    kw = dict(temperature=0, max_tokens=40, ignore_eos=True)
    kept = llm.chat(chat, SamplingParams(skip_special_tokens=False, **kw), use_tqdm=False)[0].outputs[0]
    skipped = llm.chat(chat, SamplingParams(**kw), use_tqdm=False)[0].outputs[0]
    assert kept.token_ids == skipped.token_ids
    assert "<|im_end|>" in kept.text and "<|im_end|>" not in skipped.text, (kept.text, skipped.text)
    assert kept.text.replace("<|im_end|>", "").replace("<|im_start|>", "") == skipped.text


def test_min_tokens(llm):
    """vLLM's min_tokens: no end-of-sequence token, stop token id or stop string before that many
    new tokens. The greedy answer to this chat ends (EOS) after fewer tokens; with min_tokens the
    EOS logit is masked until then, so the tokens are the greedy ones with EOS taken out."""
    chat = [{"role": "user", "content": "Say hi"}]
    free = llm.chat(chat, greedy(60), use_tqdm=False)[0].outputs[0]
    eos = free.token_ids[-1]
    assert free.finish_reason == "stop" and len(free.token_ids) < 40, free.token_ids
    out = llm.chat(chat, SamplingParams(temperature=0, max_tokens=60, min_tokens=40), use_tqdm=False)[0].outputs[0]
    assert len(out.token_ids) > 40
    assert eos not in out.token_ids[:40]
    assert out.token_ids[:len(free.token_ids) - 1] == free.token_ids[:-1]
    # A stop string and a stop token id before min_tokens are passed over, not ended on.
    first = free.token_ids[3]
    out = llm.chat(chat, SamplingParams(temperature=0, max_tokens=60, min_tokens=8, stop_token_ids=[first]),
                   use_tqdm=False)[0].outputs[0]
    assert len(out.token_ids) >= 9 and first not in out.token_ids[:8]
    word = free.text.split()[1]
    out = llm.chat(chat, SamplingParams(temperature=0, max_tokens=60, min_tokens=len(free.token_ids) - 2,
                                        stop=[word]), use_tqdm=False)[0].outputs[0]
    assert out.text.startswith(free.text[:free.text.index(word) + len(word)])
    for bad in (-1, 61):
        with pytest.raises(ValueError, match="min_tokens"):
            SamplingParams(max_tokens=60, min_tokens=bad)
    assert_idle(llm)


def test_min_tokens_and_stop_strings_across_the_boundary(llm):
    """As vLLM v1: stop strings count from token min_tokens + 1 on, and one that began within
    min_tokens but ends after them still ends the text (where it begins)."""
    p = "The capital of France is"
    free = llm.generate(p, greedy(16), use_tqdm=False)[0].outputs[0]
    toks = [llm.get_tokenizer().decode([t]) for t in free.token_ids]
    m = 4
    stop = "".join(toks[m - 2:m + 1])  # tokens m-1, m and m+1
    assert stop.strip() and free.text.index(stop) == len("".join(toks[:m - 2])), toks
    out = llm.generate(p, SamplingParams(temperature=0, max_tokens=16, stop=[stop], min_tokens=m),
                       use_tqdm=False)[0].outputs[0]
    assert out.text == "".join(toks[:m - 2]) and out.finish_reason == "stop", (out.text, toks)
    # A stop string complete within min_tokens is passed over.
    out = llm.generate(p, SamplingParams(temperature=0, max_tokens=16, stop=[toks[1]], min_tokens=2),
                       use_tqdm=False)[0].outputs[0]
    assert out.text.startswith(toks[0] + toks[1])


def test_min_tokens_ends_where_the_grammar_does(llm):
    """A grammar that is complete before min_tokens ends the output: holding its only way out
    back failed the request (temperature > 0) or sampled tokens outside the grammar (greedy)."""
    for temperature in (0.0, 0.8):
        sp = SamplingParams(temperature=temperature, seed=1, max_tokens=12, min_tokens=12, json_schema={"type": "boolean"})
        out = llm.generate("Is the sky blue? Answer true or false:", sp, use_tqdm=False)[0].outputs[0]
        assert out.finish_reason == "stop" and out.text.strip() in ("true", "false"), (out.text, out.finish_reason)
    # Where the grammar can go on, min_tokens holds: an array of at least... any length.
    sp = SamplingParams(temperature=0, max_tokens=40, min_tokens=20, json_schema={"type": "array", "items": {"type": "integer"}})
    out = llm.generate("A list of numbers:", sp, use_tqdm=False)[0].outputs[0]
    assert out.finish_reason in ("stop", "length")
    json.loads(out.text) if out.finish_reason == "stop" else None
    assert_idle(llm)


def test_include_stop_str_with_stop_token_ids(llm):
    p = "The capital of France is"
    free = llm.generate(p, greedy(16), use_tqdm=False)[0].outputs[0]
    tok = free.token_ids[1]
    cut = llm.generate(p, SamplingParams(temperature=0, max_tokens=16, stop_token_ids=[tok]), use_tqdm=False)[0].outputs[0]
    kept = llm.generate(p, SamplingParams(temperature=0, max_tokens=16, stop_token_ids=[tok],
                                          include_stop_str_in_output=True), use_tqdm=False)[0].outputs[0]
    assert kept.text == cut.text + llm.get_tokenizer().decode([tok]) and kept.stop_reason == tok


def test_continue_final_message(llm):
    """vLLM's LLM.chat(continue_final_message=True): the prompt ends right after the assistant's
    text (ChatML: without the '<|im_end|>' and newline that close the turn)."""
    msgs = [{"role": "user", "content": "Write a haiku about the sea."}, {"role": "assistant", "content": "Waves fold"}]
    closed = llm.chat(msgs, greedy(6), use_tqdm=False, add_generation_prompt=False)[0]
    cont = llm.chat(msgs, greedy(6), use_tqdm=False, add_generation_prompt=False, continue_final_message=True)[0]
    assert cont.prompt_token_ids == closed.prompt_token_ids[:-2]
    assert llm.get_tokenizer().decode(cont.prompt_token_ids).endswith("Waves fold")
    with pytest.raises(ValueError, match="exclude each other"):
        llm.chat(msgs, greedy(2), use_tqdm=False, continue_final_message=True)
    with pytest.raises(ValueError, match="assistant message last"):
        llm.chat(msgs[:1], greedy(2), use_tqdm=False, add_generation_prompt=False, continue_final_message=True)


def test_tokenizer_continue_final_message(llm):
    """HF's apply_chat_template(continue_final_message=True), which vLLM users call on
    llm.get_tokenizer(): the text LLM.chat continues. It was taken as a template variable and
    the turn closed ('<|im_end|>' after 'Waves fold')."""
    tok = llm.get_tokenizer()
    msgs = [{"role": "user", "content": "Write a haiku about the sea."}, {"role": "assistant", "content": "Waves fold"}]
    text = tok.apply_chat_template(msgs, add_generation_prompt=False, continue_final_message=True)
    assert text.endswith("<|im_start|>assistant\nWaves fold")
    cont = llm.chat(msgs, greedy(2), use_tqdm=False, add_generation_prompt=False, continue_final_message=True)[0]
    assert text == cont.prompt
    assert tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=False,
                                   continue_final_message=True) == cont.prompt_token_ids
    with pytest.raises(ValueError, match="exclude each other"):
        tok.apply_chat_template(msgs, continue_final_message=True)
    with pytest.raises(ValueError, match="assistant message last"):
        tok.apply_chat_template(msgs[:1], add_generation_prompt=False, continue_final_message=True)
    with pytest.raises(ValueError, match="continue_final_message"):
        tok.apply_chat_template(msgs, add_generation_prompt=False, continue_final_message="yes")


def test_prompt_forms(llm):
    tok = llm.get_tokenizer()
    text = SEED_PROMPTS[1]
    ids = tok.encode(text)
    want = llm.generate(text, greedy(8), use_tqdm=False)[0]
    assert want.prompt_token_ids == ids
    for form in (ids, [ids], {"prompt_token_ids": ids}, [{"prompt": text}]):
        got = llm.generate(form, greedy(8), use_tqdm=False)
        assert len(got) == 1 and got[0].outputs[0].token_ids == want.outputs[0].token_ids
    assert llm.generate([], greedy(8)) == []


def test_progress_bar_callable(llm):
    bars = []

    class Bar:
        def __init__(self, total, **kwargs):
            self.total, self.n, self.closed = total, 0, False
            bars.append(self)

        def update(self, n):
            self.n += n

        def close(self):
            self.closed = True

    llm.generate(SEED_PROMPTS, SamplingParams(temperature=0, max_tokens=4, n=2), use_tqdm=Bar)
    assert len(bars) == 1 and bars[0].total == 4 and bars[0].n == 4 and bars[0].closed


def test_seeded_llm_is_reproducible(llm):
    # Without per-request seeds the LLM's seed picks them: the same calls, the same outputs.
    from lite_llama import LLM
    sp = SamplingParams(temperature=1.0, max_tokens=8)
    runs = []
    for _ in range(2):
        other = LLM("default", device="cpu", threads=2, ctx=256, kv_tokens=1024, seed=123)
        runs.append([o.outputs[0].token_ids for o in other.generate(SEED_PROMPTS, sp, use_tqdm=False)])
    assert runs[0] == runs[1]


def test_tqdm_bar(llm, capsys):
    import pytest
    pytest.importorskip("tqdm")
    outs = llm.generate(SEED_PROMPTS, SamplingParams(temperature=0, max_tokens=4))
    assert len(outs) == 4
    err = capsys.readouterr().err
    assert "Processed prompts" in err and "4/4" in err


def test_moe_gguf_greedy_equals_transformers():
    # The Qwen3-MoE Q8_0 GGUF fixture: greedy continuations of HF transformers (reference.json)
    # through the Python API, and the experts in model_info.
    import json
    import os
    from lite_llama import LLM
    d = os.path.join(os.path.dirname(__file__), "..", "fixtures", "models", "qwen3-moe-q8_0")
    ref = json.load(open(os.path.join(d, "reference.json")))
    llm = LLM(os.path.join(d, ref["model_file"]), device="cpu", ctx=128)
    assert llm.model_info["num_experts"] == 8 and llm.model_info["experts_per_token"] == 2
    p = SamplingParams(temperature=0, max_tokens=ref["new_tokens"], ignore_eos=True)
    outs = llm.generate([{"prompt_token_ids": c["ids"]} for c in ref["cases"]], p, use_tqdm=False)
    assert [o.outputs[0].token_ids for o in outs] == [c["greedy_ids"] for c in ref["cases"]]


def test_tensor_parallel_equals_one_rank(llm):
    # tensor_parallel_size=3 on the CPU (9 heads, 3 KV heads: three ranks sharing memory) gives the
    # one-rank engine's greedy tokens.
    from lite_llama import LLM
    tp = LLM("default", device="cpu", threads=1, ctx=256, kv_tokens=1024, tensor_parallel_size=3)
    assert tp.model_info["tensor_parallel_size"] == 3
    want = llm.generate(SEED_PROMPTS, greedy(24), use_tqdm=False)
    got = tp.generate(SEED_PROMPTS, greedy(24), use_tqdm=False)
    assert [o.outputs[0].token_ids for o in got] == [o.outputs[0].token_ids for o in want]


def test_tiny_temperature_is_greedy(llm):
    """Below vLLM's 1e-5 a temperature is greedy: at 1e-40, 1 / t overflowed to inf and every draw
    was the vocabulary's last token."""
    prompt = "The capital of France is a city called"
    want = llm.generate(prompt, greedy(6), use_tqdm=False)[0].outputs[0].token_ids
    for t in (1e-6, 1e-40):
        got = llm.generate(prompt, SamplingParams(temperature=t, max_tokens=6, seed=3), use_tqdm=False)
        assert got[0].outputs[0].token_ids == want, t


def test_sampled_token_rank_outside_the_listed_best(llm):
    """The chosen token always has vLLM's rank (1 + tokens with a higher logprob), also when it
    is not among the listed best (it was None). Checked against a greedy re-run of each prefix
    that lists the 20 best."""
    prompt = "Write one sentence about the sea."
    ids = llm.get_tokenizer().encode(prompt)
    sp = SamplingParams(temperature=1.5, seed=11, max_tokens=10, logprobs=1, ignore_eos=True)
    out = llm.generate(prompt, sp, use_tqdm=False)[0].outputs[0]
    eps = 1e-3  # a re-run's prefill may round differently from the first run's decode
    outside = exact = 0
    for i, (tok, d) in enumerate(zip(out.token_ids, out.logprobs)):
        rank, lp = d[tok].rank, d[tok].logprob
        assert isinstance(rank, int) and rank >= 1, (i, d)
        listed = list(d)[1:]
        assert rank == 1 if tok in listed else rank > 1, (i, d)
        outside += tok not in listed
        ref = llm.generate({"prompt_token_ids": ids + out.token_ids[:i]},
                           SamplingParams(temperature=0, max_tokens=1, logprobs=20),
                           use_tqdm=False)[0].outputs[0].logprobs[0]
        others = [v.logprob for t, v in ref.items() if t != tok]
        lo = 1 + sum(x > lp + eps for x in others)
        assert rank >= lo, (i, rank, lo)
        if tok in ref:  # every token above it is listed: the rank is known exactly
            assert rank <= 1 + sum(x > lp - eps for x in others), (i, rank)
            exact += tok not in listed
    assert outside >= 3 and exact >= 2, (outside, exact)


def test_stop_reason_of_eos(llm):
    """vLLM checks the EOS token before stop token ids and drops it from the text it searches for
    stop strings: a completion that EOS ended has stop_reason None, even where that id is also a
    stop token id or its text a stop string. With ignore_eos the stop token id is the reason."""
    chat = [{"role": "user", "content": "Say hi"}]
    eos = llm.get_tokenizer().eos_token_id
    for kw in ({}, {"stop_token_ids": [eos]}, {"stop": ["<|im_end|>"], "skip_special_tokens": False}):
        out = llm.chat(chat, SamplingParams(temperature=0, max_tokens=60, **kw), use_tqdm=False)[0].outputs[0]
        assert out.token_ids[-1] == eos and out.finish_reason == "stop", kw
        assert out.stop_reason is None, kw
    out = llm.chat(chat, SamplingParams(temperature=0, max_tokens=60, ignore_eos=True, stop_token_ids=[eos]),
                   use_tqdm=False)[0].outputs[0]
    assert out.token_ids[-1] == eos and out.finish_reason == "stop" and out.stop_reason == eos


def test_logprobs_come_before_logit_bias(llm):
    """vLLM reports logprobs before its logits processors: a logit_bias changes which token is
    picked, not the logprobs reported for it (they were of the biased distribution)."""
    prompt = "The capital of France is"
    plain = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=1, logprobs=5),
                         use_tqdm=False)[0].outputs[0]
    top = plain.logprobs[0]
    second = sorted(top, key=lambda t: -top[t].logprob)[1]  # the runner-up, forced by a bias
    biased = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=1, logprobs=5,
                                                 logit_bias={second: 50.0}), use_tqdm=False)[0].outputs[0]
    assert biased.token_ids == [second]
    got = biased.logprobs[0]
    for t, lp in top.items():
        assert abs(got[t].logprob - lp.logprob) < 1e-4, (t, got[t], lp)
        assert got[t].rank == lp.rank, (t, got[t], lp)
