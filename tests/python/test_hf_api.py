"""The HF tokenizer calls and vLLM's LLM.chat arguments that users bring: tokenizer(text),
batch_decode, get_vocab; chat(tools=..., chat_template=...).

Each family runs on random weights (load_format="dummy", the tiny fixture architecture's config,
its vocabulary widened) beside the real tokenizer (models/tokenizers, from scripts/fetch-tokenizers).
The independent references: HF `tokenizers` over the same tokenizer.json (with tokenizer_config's
pad token), and jinja2 rendering the templates as transformers does.
"""
import json

import hf_chat_template
import pytest
from conftest import ROOT
from lite_llama import LLM, SamplingParams
from tokenizers import Tokenizer as HFTokenizer

FAMILIES = {  # name: (fixture architecture, template file or None for tokenizer_config's)
    "llama3.2": ("llama", ROOT / "tests" / "fixtures" / "chat_templates" / "llama3.2.jinja"),
    "qwen3": ("qwen3", None),
}
TEXTS = ["Hello world", "", "  two  spaces and\nnew lines\t", "naïve café 東京 🙂",
         "<|im_start|>user\nhi<|im_end|>", "<|begin_of_text|>x<|eot_id|>", "a much longer sentence than the others, "
         "so that padding has something to do"]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather forecast for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
CONV = [{"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "content": '{"temp": 21}', "tool_call_id": "call_1"}]
GREEDY1 = SamplingParams(temperature=0, max_tokens=1)


class Family:
    def __init__(self, name, tmp):
        arch, template_file = FAMILIES[name]
        src = ROOT / "models" / "tokenizers" / name
        if not (src / "tokenizer.json").exists():
            pytest.fail(f"{src}/tokenizer.json missing: run scripts/fetch-tokenizers")
        self.hf = HFTokenizer.from_file(str(src / "tokenizer.json"))
        self.template, self.special, cfg = hf_chat_template.dummy_model_dir(
            src, tmp, ROOT / "tests" / "fixtures" / "models" / arch / "config.json", template_file)
        self.pad = cfg["pad_token"]
        self.dir = tmp
        self.llm = LLM(str(tmp), load_format="dummy", device="cpu", threads=2, ctx=1024)
        self.tok = self.llm.get_tokenizer()

    def render(self, messages, template=None, add_generation_prompt=True, **kw):
        return hf_chat_template.render(template or self.template, messages, add_generation_prompt, **self.special, **kw)


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    return Family(request.param, tmp_path_factory.mktemp(request.param))


def template_view(conv):
    """The messages as the template sees them: tool-call arguments as objects (vLLM's, transformers')."""
    out = []
    for m in conv:
        m = dict(m)
        if "tool_calls" in m:
            m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                               for c in m["tool_calls"]]
        out.append(m)
    return out


def test_call_equals_hf(family):
    for add in (True, False):
        hf = family.hf.encode_batch(TEXTS, add_special_tokens=add)
        got = family.tok(TEXTS, add_special_tokens=add)
        assert got["input_ids"] == [e.ids for e in hf]
        assert got.attention_mask == [e.attention_mask for e in hf]
        one = family.tok(TEXTS[3], add_special_tokens=add)
        assert one == {"input_ids": hf[3].ids, "attention_mask": hf[3].attention_mask}
    assert family.tok(TEXTS[0])["input_ids"] == family.tok.encode(TEXTS[0])
    assert "attention_mask" not in family.tok(TEXTS, return_attention_mask=False)


@pytest.mark.parametrize("side", ["right", "left"])
def test_padding_equals_hf(family, side):
    pad_id = family.hf.token_to_id(family.pad)
    assert family.tok.pad_token_id == pad_id and family.tok.pad_token == family.pad
    family.hf.enable_padding(direction=side, pad_id=pad_id, pad_token=family.pad)
    try:
        hf = family.hf.encode_batch(TEXTS)
    finally:
        family.hf.no_padding()
    got = family.tok(TEXTS, padding=True, padding_side=side)
    assert got["input_ids"] == [e.ids for e in hf]
    assert got["attention_mask"] == [e.attention_mask for e in hf]
    family.tok.padding_side = side  # the attribute, as HF's
    try:
        assert family.tok(TEXTS, padding="longest") == got
    finally:
        family.tok.padding_side = "right"
    with pytest.raises(ValueError, match="padding must be"):
        family.tok(TEXTS, padding="max_length")


def test_batch_decode_equals_hf(family):
    seqs = [e.ids for e in family.hf.encode_batch(TEXTS)] + [[]]
    for skip in (False, True):
        assert family.tok.batch_decode(seqs, skip_special_tokens=skip) == \
            family.hf.decode_batch(seqs, skip_special_tokens=skip)


def test_get_vocab_equals_hf(family):
    vocab = family.tok.get_vocab()
    assert vocab == family.hf.get_vocab(with_added_tokens=True)
    vocab["not a token"] = 0  # a copy: the tokenizer's own map is untouched
    assert family.tok.convert_tokens_to_ids("not a token") is None


def test_chat_tools_equal_template(family):
    kw = {"enable_thinking": False}
    want = family.render(template_view(CONV), tools=TOOLS, **kw)
    assert '"get_weather"' in want and "Paris" in want  # the template shows the tools and the call
    out = family.llm.chat(CONV, GREEDY1, use_tqdm=False, tools=TOOLS, chat_template_kwargs=kw)[0]
    assert out.prompt == want
    assert out.prompt_token_ids == family.hf.encode(want, add_special_tokens=False).ids
    assert family.tok.apply_chat_template(CONV, tools=TOOLS, **kw) == want
    # chat_template_kwargs' tools win over tools=, as in vLLM.
    other = [{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}]
    out = family.llm.chat(CONV, GREEDY1, use_tqdm=False, tools=TOOLS, chat_template_kwargs={**kw, "tools": other})[0]
    assert out.prompt == family.render(template_view(CONV), tools=other, **kw)
    with pytest.raises(ValueError, match="tools must be a list"):
        family.llm.chat(CONV, GREEDY1, use_tqdm=False, tools={"type": "function"})


CUSTOM = ("{{ bos_token }}{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}{{ eos_token }}\n{% endfor %}"
          "{% if tools %}tools:{% for t in tools %} {{ t.function.name }}{% endfor %}\n{% endif %}"
          "{% if add_generation_prompt %}[ASSISTANT]{% endif %}")


def test_chat_template_argument(family, tmp_path):
    conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    want = family.render(conv, CUSTOM, tools=TOOLS)
    assert want.startswith(family.special["bos_token"] + "[SYSTEM] Be brief.")
    out = family.llm.chat(conv, GREEDY1, use_tqdm=False, chat_template=CUSTOM, tools=TOOLS)[0]
    assert out.prompt == want
    assert out.prompt_token_ids == family.hf.encode(want, add_special_tokens=False).ids
    f = tmp_path / "custom.jinja"
    f.write_text(CUSTOM)
    assert family.llm.chat([conv], GREEDY1, use_tqdm=False, chat_template=str(f), tools=TOOLS)[0].prompt == want
    assert family.tok.apply_chat_template(conv, chat_template=CUSTOM, add_generation_prompt=False) == \
        family.render(conv, CUSTOM, add_generation_prompt=False)
    # continue_final_message with it: transformers' cut right after the final content.
    cont = conv + [{"role": "assistant", "content": "Hello! I"}]
    full = family.render(cont, CUSTOM, add_generation_prompt=False)
    got = family.llm.chat(cont, GREEDY1, use_tqdm=False, chat_template=CUSTOM, add_generation_prompt=False,
                          continue_final_message=True)[0].prompt
    assert got == full[:full.rindex("Hello! I") + len("Hello! I")]
    # The model's own template is untouched by an earlier custom one.
    assert family.llm.chat(conv, GREEDY1, use_tqdm=False)[0].prompt == family.render(conv)
    with pytest.raises(ValueError, match="looks like a file path"):
        family.llm.chat(conv, GREEDY1, use_tqdm=False, chat_template=str(tmp_path / "missing.jinja"))
    with pytest.raises(ValueError):
        family.llm.chat(conv, GREEDY1, use_tqdm=False, chat_template="{% for m in messages %}")


def test_llm_chat_template_replaces_the_models(family, tmp_path):
    """LLM(chat_template=...), as --chat-template: the engine's template everywhere (chat, the
    tokenizer's apply_chat_template), the model's bos_token / eos_token in it; chat(chat_template=)
    still wins per call; one that does not parse fails the constructor."""
    f = tmp_path / "custom.jinja"
    f.write_text(CUSTOM)
    llm = LLM(str(family.dir), load_format="dummy", device="cpu", threads=2, ctx=1024,
              chat_template=str(f))
    conv = [{"role": "user", "content": "Hi there"}]
    want = family.render(conv, CUSTOM)
    assert llm.chat(conv, GREEDY1, use_tqdm=False)[0].prompt == want
    assert llm.get_tokenizer().apply_chat_template(conv) == want
    assert llm.chat(conv, GREEDY1, use_tqdm=False, chat_template=family.template)[0].prompt == family.render(conv)
    with pytest.raises(ValueError, match="^chat_template: the template does not parse: chat template line 1"):
        LLM(str(family.dir), load_format="dummy", device="cpu", threads=2, ctx=1024,
            chat_template="{% for m in messages %}")
