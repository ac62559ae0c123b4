"""vLLM's allowed_token_ids and bad_words, and the small vLLM conveniences (max_model_len,
get_default_sampling_params, SamplingParams.clone, tokenizer.tokenize).

References: the logprobs the engine reports for the same prompt without the constraint (vLLM
reports them before its logits processors), and HF `tokenizers` over the real tokenizer.json
for how vLLM tokenizes each bad word (as is, and with a leading space)."""
import pytest
from conftest import ROOT
from lite_llama import LLM, SamplingParams
from test_hf_api import Family

PROMPT = "The capital of France is"


def greedy(**kw):
    return SamplingParams(temperature=0, **kw)


def test_allowed_token_ids_pick_the_best_allowed(llm):
    plain = llm.generate(PROMPT, greedy(max_tokens=1, logprobs=20), use_tqdm=False)[0].outputs[0]
    ranked = sorted(plain.logprobs[0], key=lambda t: -plain.logprobs[0][t].logprob)
    allowed = [ranked[7], ranked[3], ranked[5]]  # not the unconstrained pick
    out = llm.generate(PROMPT, greedy(max_tokens=1, allowed_token_ids=allowed), use_tqdm=False)[0].outputs[0]
    assert out.token_ids == [ranked[3]] != plain.token_ids
    for p in (greedy(max_tokens=6, allowed_token_ids=allowed),
              SamplingParams(temperature=1.0, seed=3, max_tokens=6, ignore_eos=True, allowed_token_ids=allowed)):
        ids = llm.generate(PROMPT, p, use_tqdm=False)[0].outputs[0].token_ids
        assert ids and set(ids) <= set(allowed), ids


@pytest.mark.parametrize("kw,name", [
    ({"allowed_token_ids": []}, "allowed_token_ids"),
    ({"allowed_token_ids": [1, -1]}, "allowed_token_ids"),
    ({"allowed_token_ids": "12"}, "allowed_token_ids"),
    ({"bad_words": "word"}, "bad_words"),
    ({"bad_words": ["ok", "  "]}, "bad_words"),
    ({"bad_words": [3]}, "bad_words"),
])
def test_bad_values_are_value_errors(kw, name):
    with pytest.raises(ValueError, match=name):
        SamplingParams(**kw)


def test_allowed_token_id_past_the_vocabulary(llm):
    vocab = llm.get_tokenizer().vocab_size
    with pytest.raises(ValueError, match="allowed_token_ids"):
        llm.generate(PROMPT, greedy(max_tokens=1, allowed_token_ids=[0, vocab]), use_tqdm=False)


def vllm_bad_word_ids(hf, word):
    """vLLM's SamplingParams.update_from_tokenizer, with HF tokenizers."""
    seqs = []
    for space in (False, True):
        ids = hf.encode((" " if space else "") + word.lstrip(), add_special_tokens=False).ids
        if not space or (ids[0] != seqs[-1][0] and len(ids) == len(seqs[-1])):
            seqs.append(ids)
    return seqs


def violations(ids, seqs):
    return [k for k in range(len(ids)) for s in seqs
            if k + 1 >= len(s) and ids[k - len(s) + 1:k + 1] == s]


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    return Family("qwen3", tmp_path_factory.mktemp("qwen3"))


def test_bad_words_never_generated(qwen3):
    prompt = "Once upon a time"
    plain = qwen3.llm.generate(prompt, greedy(max_tokens=8, logprobs=20), use_tqdm=False)[0].outputs[0]
    words = [w for w in (qwen3.hf.decode([t]).strip() for t in plain.token_ids) if w]
    assert words, plain.token_ids
    seqs = vllm_bad_word_ids(qwen3.hf, words[0])
    assert violations(plain.token_ids, seqs), (words[0], seqs, plain.token_ids)  # it would have
    out = qwen3.llm.generate(prompt, greedy(max_tokens=8, logprobs=20, bad_words=[words[0]]),
                             use_tqdm=False)[0].outputs[0]
    assert len(out.token_ids) == 8 and not violations(out.token_ids, seqs), (seqs, out.token_ids)
    # Up to the first banned pick the outputs agree; there, the best token not banned.
    k = violations(plain.token_ids, seqs)[0]
    assert out.token_ids[:k] == plain.token_ids[:k]
    banned = {s[-1] for s in seqs if plain.token_ids[k - len(s) + 1:k] == s[:-1]}
    lps = plain.logprobs[k]
    assert out.token_ids[k] == max((t for t in lps if t not in banned), key=lambda t: lps[t].logprob)


def test_tokenize_is_hf(qwen3):
    for text in ("Hello world", "  two  spaces", "naïve café 東京"):
        assert qwen3.tok.tokenize(text) == qwen3.hf.encode(text, add_special_tokens=False).tokens


def test_clone_and_default_params(llm):
    p = SamplingParams(temperature=0.5, stop=["a"], allowed_token_ids=[1, 2], bad_words=["x"])
    q = p.clone()
    assert q == p and q is not p
    q.stop.append("b")
    q.allowed_token_ids.append(3)
    assert p.stop == ["a"] and p.allowed_token_ids == [1, 2]
    d = llm.get_default_sampling_params()
    assert isinstance(d, SamplingParams) and d == SamplingParams()


def test_max_model_len_is_ctx():
    config = str(ROOT / "tests" / "fixtures" / "models" / "llama" / "config.json")
    llm = LLM(config, load_format="dummy", device="cpu", threads=2, max_model_len=64)
    assert llm.model_info["ctx"] == 64
    with pytest.raises(ValueError, match="max_model_len"):
        LLM(config, load_format="dummy", device="cpu", ctx=64, max_model_len=64)
