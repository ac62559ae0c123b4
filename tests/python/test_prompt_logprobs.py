"""SamplingParams(prompt_logprobs=k), as vLLM: RequestOutput.prompt_logprobs holds None for the
first prompt token, then per token a dict with the prompt token and the k best at its position.
Expected values come from other paths: LLM.score for the prompt tokens' logprobs and argmax, and
a greedy generation's logprobs=k at the same prefix for the best k."""
import pytest

from conftest import assert_idle
from lite_llama import SamplingParams

PROMPT = "The quick brown fox jumps over the lazy dog because it"
EPS = 1e-3  # prefill of a prefix vs of the whole prompt: a few ulps of rounding


def _prompt_run(llm, k):
    sp = SamplingParams(temperature=0, max_tokens=3, prompt_logprobs=k)
    return llm.generate(PROMPT, sp, use_tqdm=False)[0]


def test_prompt_logprobs_agree_with_score_and_generation(llm):
    k = 5
    out = _prompt_run(llm, k)
    ids, pl = out.prompt_token_ids, out.prompt_logprobs
    assert isinstance(pl, list) and len(pl) == len(ids) and pl[0] is None
    ref = llm.score(ids)
    decode = llm.get_tokenizer().decode
    for i in range(1, len(ids)):
        d, tok = pl[i], ids[i]
        assert tok in d and len(d) in (k, k + 1), (i, d)
        assert d[tok].logprob == pytest.approx(ref.logprobs[i - 1], abs=EPS), i
        assert d[tok].decoded_token == decode([tok])
        # The best k: ranks 1..k in the order of their logprobs; the prompt token's rank is 1
        # exactly where the model's own top-1 is the prompt token.
        top = sorted(((v.rank, t) for t, v in d.items() if v.rank <= k))
        assert [r for r, _ in top] == list(range(1, k + 1)), (i, d)
        lps = [d[t].logprob for _, t in top]
        assert lps == sorted(lps, reverse=True), (i, d)
        assert top[0][1] == ref.argmax[i - 1], i
        assert (d[tok].rank == 1) == (tok == ref.argmax[i - 1]), (i, d[tok])
        if tok not in [t for _, t in top]:
            assert d[tok].rank > k and d[tok].logprob <= lps[-1] + EPS, (i, d[tok])
    # A greedy generation's logprobs=k at a few prefixes: the same best k and values.
    for i in (1, 2, len(ids) // 2, len(ids) - 1):
        gen = llm.generate({"prompt_token_ids": ids[:i]},
                           SamplingParams(temperature=0, max_tokens=1, logprobs=k),
                           use_tqdm=False)[0].outputs[0].logprobs[0]
        want = {t: v.logprob for t, v in gen.items() if v.rank <= k}
        got = {t: v.logprob for t, v in pl[i].items() if v.rank <= k}
        assert set(got) == set(want), (i, got, want)
        for t in want:
            assert got[t] == pytest.approx(want[t], abs=EPS), (i, t)
    assert_idle(llm)


def test_prompt_logprobs_zero_lists_the_prompt_token_only(llm):
    out = _prompt_run(llm, 0)
    ids, pl = out.prompt_token_ids, out.prompt_logprobs
    ref = llm.score(ids)
    assert pl[0] is None and len(pl) == len(ids)
    for i in range(1, len(ids)):
        assert list(pl[i]) == [ids[i]], (i, pl[i])
        lp = pl[i][ids[i]]
        assert lp.logprob == pytest.approx(ref.logprobs[i - 1], abs=EPS)
        assert lp.rank >= 1 and (lp.rank == 1) == (ids[i] == ref.argmax[i - 1]), (i, lp)


def test_prompt_logprobs_leave_the_generation_alone(llm):
    """Same completion as without them; n choices and a batch each get the prompt's; absent
    unless asked; a one-token prompt has [None]."""
    plain = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=8), use_tqdm=False)[0]
    assert plain.prompt_logprobs is None
    single = llm.generate(PROMPT, SamplingParams(temperature=0, max_tokens=8, prompt_logprobs=2),
                          use_tqdm=False)[0]
    assert single.outputs[0].token_ids == plain.outputs[0].token_ids
    other = "Once upon a time"
    batch = llm.generate([PROMPT, other], SamplingParams(temperature=0.8, seed=3, n=2, max_tokens=8,
                                                          prompt_logprobs=2), use_tqdm=False)
    alone = llm.generate(other, SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=2),
                         use_tqdm=False)[0]
    for got, want in ((batch[0], single), (batch[1], alone)):
        assert len(got.prompt_logprobs) == len(want.prompt_logprobs)
        for a, b in zip(got.prompt_logprobs[1:], want.prompt_logprobs[1:]):
            assert list(a) == list(b)
            assert all(a[t].logprob == pytest.approx(b[t].logprob, abs=EPS) for t in a)
    one = llm.generate({"prompt_token_ids": [single.prompt_token_ids[1]]},
                       SamplingParams(max_tokens=1, prompt_logprobs=3), use_tqdm=False)[0]
    assert one.prompt_logprobs == [None]
    assert_idle(llm)


@pytest.mark.parametrize("bad", [-1, 21, 2.5, "3"])
def test_prompt_logprobs_out_of_range(bad):
    with pytest.raises(ValueError, match="prompt_logprobs"):
        SamplingParams(prompt_logprobs=bad)
