"""The tokenizer's special-token attributes (all_special_tokens, all_special_ids, special_tokens_map,
unk_token ... mask_token and their ids, extra_special_tokens) and decode's
clean_up_tokenization_spaces, against transformers (AutoTokenizer) over the same files.

The HF families run on random weights beside the real tokenizers (models/tokenizers, as
test_hf_api), plus a variant of Llama 3.2's tokenizer_config.json that sets every named token, a
model-specific one, additional_special_tokens and the cleanup flags. The default GGUF model is
compared with transformers' GGUF loader where it runs (it needs torch), otherwise with its output
recorded below.
"""
import json
import warnings

import hf_chat_template
import pytest
from conftest import ROOT
from lite_llama import LLM

transformers = pytest.importorskip("transformers")  # tests/server/requirements.txt installs it

NAMED = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]
ATTRS = ["all_special_tokens", "all_special_ids", "special_tokens_map", "extra_special_tokens",
         "extra_special_tokens_ids", "clean_up_tokenization_spaces",
         "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"]
ATTRS += NAMED + [n + "_id" for n in NAMED]
TEXTS = ["Hello , world . It 's nice , isn't it ? I 'm sure we 've seen they 're here !",
         "a ' b ' c", "no cleanup here.", "<|eot_id|> . <|im_end|> ,", ""]
# Every named token, an AddedToken-shaped one, a model-specific one, duplicates, both cleanup flags.
VARIANT = {"unk_token": "<|reserved_special_token_0|>",
           "sep_token": {"__type": "AddedToken", "content": "<|reserved_special_token_1|>", "lstrip": False,
                         "normalized": False, "rstrip": False, "single_word": False, "special": True},
           "cls_token": "<|reserved_special_token_2|>", "mask_token": "<|reserved_special_token_3|>",
           "image_token": "<|reserved_special_token_4|>",
           "additional_special_tokens": ["<|eot_id|>", "<|begin_of_text|>", "<|python_tag|>"],
           "clean_up_tokenization_spaces": True,
           "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output": True}
FAMILIES = {"llama3.2": ("llama3.2", "llama", {}), "qwen3": ("qwen3", "qwen3", {}),
            "llama3.2-variant": ("llama3.2", "llama", VARIANT)}
# transformers 5.24.0 on the default GGUF: PreTrainedTokenizerFast.from_pretrained("models",
# gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf") (LlamaTokenizer and GPT2Tokenizer give the same).
GGUF_RECORDED = {"all_special_tokens": ["<|im_start|>", "<|im_end|>", "<|endoftext|>"], "all_special_ids": [1, 2, 0],
                 "special_tokens_map": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                                        "unk_token": "<|endoftext|>", "pad_token": "<|im_end|>"},
                 "extra_special_tokens": [], "clean_up_tokenization_spaces": False}


class Pair:
    """Our tokenizer and transformers' over one tokenizer folder."""

    def __init__(self, name, tmp):
        src_name, arch, overrides = FAMILIES[name]
        src = ROOT / "models" / "tokenizers" / src_name
        if not (src / "tokenizer.json").exists():
            pytest.fail(f"{src}/tokenizer.json missing: run scripts/fetch-tokenizers")
        hf_chat_template.dummy_model_dir(src, tmp, ROOT / "tests" / "fixtures" / "models" / arch / "config.json")
        if overrides:
            cfg = json.loads((tmp / "tokenizer_config.json").read_text())
            (tmp / "tokenizer_config.json").write_text(json.dumps({**cfg, **overrides}))
        self.hf = transformers.AutoTokenizer.from_pretrained(str(tmp))
        self.llm = LLM(str(tmp), load_format="dummy", device="cpu", threads=2, ctx=256)
        self.tok = self.llm.get_tokenizer()


@pytest.fixture(scope="module", params=list(FAMILIES))
def pair(request, tmp_path_factory):
    return Pair(request.param, tmp_path_factory.mktemp(request.param))


def test_special_tokens_equal_transformers(pair):
    for attr in ATTRS:
        assert getattr(pair.tok, attr) == getattr(pair.hf, attr), attr
    assert pair.tok.all_special_tokens  # every family has some
    for name in pair.hf.special_tokens_map:  # model-specific named ones too (image_token)
        assert getattr(pair.tok, name) == getattr(pair.hf, name), name
        assert getattr(pair.tok, name + "_id") == getattr(pair.hf, name + "_id"), name
    with pytest.raises(AttributeError):
        pair.tok.not_a_token
    # Copies: changing what they return leaves the tokenizer's own.
    pair.tok.special_tokens_map["bos_token"] = "x"
    pair.tok.all_special_tokens.append("x")
    assert pair.tok.special_tokens_map == pair.hf.special_tokens_map
    assert pair.tok.all_special_tokens == pair.hf.all_special_tokens


def test_decode_clean_up_equals_transformers(pair):
    seqs = [pair.hf.encode(t, add_special_tokens=False) for t in TEXTS]
    bpe_flag = "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"
    own = getattr(pair.hf, bpe_flag)
    try:
        for force in (False, True):  # with the flag, transformers cleans a BPE tokenizer's text up too
            for t in (pair.tok, pair.hf):
                setattr(t, bpe_flag, force)
            for clean in (None, True, False):
                for skip in (False, True):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # ours warns as transformers does when it ignores True
                        got = [pair.tok.decode(s, skip, clean_up_tokenization_spaces=clean) for s in seqs]
                        batch = pair.tok.batch_decode(seqs, skip_special_tokens=skip, clean_up_tokenization_spaces=clean)
                    want = [pair.hf.decode(s, skip_special_tokens=skip, clean_up_tokenization_spaces=clean) for s in seqs]
                    assert got == want and batch == want, (force, clean, skip)
    finally:
        for t in (pair.tok, pair.hf):
            setattr(t, bpe_flag, own)
    assert pair.tok.clean_up_tokenization(TEXTS[0]) == pair.hf.clean_up_tokenization(TEXTS[0])
    with pytest.raises(ValueError, match="clean_up_tokenization_spaces must be True or False"):
        pair.tok.decode(seqs[0], clean_up_tokenization_spaces="yes")


def test_decode_clean_up_ignored_for_bpe_warns(pair):
    if pair.tok.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output:
        pytest.skip("this tokenizer_config.json asks for the cleanup on BPE")
    ids = pair.hf.encode(TEXTS[0], add_special_tokens=False)
    with pytest.warns(UserWarning, match="ignored for a BPE tokenizer"):
        assert pair.tok.decode(ids, clean_up_tokenization_spaces=True) == TEXTS[0]


def transformers_gguf():
    """transformers' tokenizer of the default GGUF, or None where its GGUF reader cannot run (no torch)."""
    try:
        return transformers.PreTrainedTokenizerFast.from_pretrained(
            str(ROOT / "models"), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    except ImportError:
        return None


def test_gguf_special_tokens_equal_transformers(llm):
    tok, hf = llm.get_tokenizer(), transformers_gguf()
    want = GGUF_RECORDED if hf is None else {a: getattr(hf, a) for a in GGUF_RECORDED}
    for attr, value in want.items():
        assert getattr(tok, attr) == value, attr
    names = want["special_tokens_map"]
    for n in NAMED:
        assert getattr(tok, n) == names.get(n)
        assert getattr(tok, n + "_id") == (None if n not in names else want["all_special_ids"][
            want["all_special_tokens"].index(names[n])])
    ids = tok.encode(TEXTS[0], add_special_tokens=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for clean in (None, True, False):  # BPE: transformers leaves the text as it is
            want_text = TEXTS[0] if hf is None else hf.decode(ids, clean_up_tokenization_spaces=clean)
            assert tok.decode(ids, clean_up_tokenization_spaces=clean) == want_text
