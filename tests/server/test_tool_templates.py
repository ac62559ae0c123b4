"""Tool calls in and out through the Llama 3.2 and Qwen3 chat templates (issue 23).

Each family runs on random weights (`--load-format dummy` with the tiny fixture architecture's
config, its vocabulary widened) beside the real tokenizer (models/tokenizers, fetched from PyPI
by scripts/fetch-tokenizers) and the real chat template. The independent references:
  - jinja2 renders the template as transformers does (sandbox, trim_blocks, lstrip_blocks,
    tojson) and HF `tokenizers` counts the prompt's tokens: tools and role "tool" messages with
    their tool_call_id must reach the template exactly so;
  - the text that template writes for an assistant tool call is the model's own call format:
    forced as the output (guided_choice with tool_choice auto), it must parse back into that call;
  - `required` / named calls decode under the format's grammar: whatever the random model picks,
    the arguments validate with jsonschema and the streamed deltas reassemble to the same call.
"""
import json

import hf_chat_template
import jsonschema
import pytest
import requests
from tokenizers import Tokenizer

from conftest import ROOT, Server

FAMILIES = {
    # name: (fixture architecture, template file or None for tokenizer_config's, end-of-turn text)
    "llama3.2": ("llama", ROOT / "tests" / "fixtures" / "chat_templates" / "llama3.2.jinja", "<|eot_id|>"),
    "qwen3": ("qwen3", None, "<|im_end|>"),
}
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}, "unit": {"enum": ["celsius", "fahrenheit"]},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 12}}, "required": ["zone"],
        "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast for a city",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time in a zone", "parameters": TIME}},
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK = [{"role": "user", "content": "What will the weather be in Paris tomorrow?"}]
# Qwen3 without thinking: the prompt closes an empty <think> block, the answer is the call.
KWARGS = {"chat_template_kwargs": {"enable_thinking": False}}


class Family:
    def __init__(self, name, tmp):
        arch, template_file, self.end_of_turn = FAMILIES[name]
        src = ROOT / "models" / "tokenizers" / name
        if not (src / "tokenizer.json").exists():
            pytest.fail(f"{src}/tokenizer.json missing: run scripts/fetch-tokenizers")
        self.name = name
        self.tokenizer = Tokenizer.from_file(str(src / "tokenizer.json"))
        self.template, self.special, _ = hf_chat_template.dummy_model_dir(
            src, tmp, ROOT / "tests" / "fixtures" / "models" / arch / "config.json", template_file)
        end_id = self.tokenizer.token_to_id(self.end_of_turn)
        (tmp / "generation_config.json").write_text(json.dumps({"eos_token_id": [end_id]}))
        self.server = Server(ctx=1024, model=("-m", str(tmp), "--load-format", "dummy"))

    def render(self, messages, add_generation_prompt=True, **kw):
        return hf_chat_template.render(self.template, messages, add_generation_prompt, **self.special, **kw)

    def count(self, text):
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def post(self, body, stream=False):
        body = {"messages": ASK, "tools": TOOLS, "temperature": 0, "max_tokens": 160, **KWARGS, **body}
        return requests.post(self.server.url + "/v1/chat/completions", json={**body, "stream": stream},
                             stream=stream, timeout=300)


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    f = Family(request.param, tmp_path_factory.mktemp(request.param))
    yield f
    assert f.server.stop() == 0, "".join(f.server.log)


def plain_calls(calls):
    """OpenAI tool_calls -> the template's view (arguments as objects)."""
    return [{"id": c["id"], "type": "function",
             "function": {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}}
            for c in calls]


def check_calls(calls, names):
    assert calls, "no tool calls"
    for c in calls:
        assert c["type"] == "function" and c["id"]
        assert c["function"]["name"] in names
        jsonschema.validate(json.loads(c["function"]["arguments"]), SCHEMAS[c["function"]["name"]])


def test_tools_reach_the_template(family):
    r = family.post({"tool_choice": "auto", "max_tokens": 1})
    assert r.status_code == 200, r.text
    want = family.count(family.render(ASK, tools=TOOLS, enable_thinking=False))
    assert r.json()["usage"]["prompt_tokens"] == want


def test_template_call_text_parses_back(family):
    """The template's own rendering of a call, forced as the output, comes back as that call."""
    call = {"id": "abc123XYZ", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius", "days": 2}}}
    before = family.render(ASK, tools=TOOLS, enable_thinking=False)
    after = family.render(ASK + [{"role": "assistant", "content": "", "tool_calls": [call]}], add_generation_prompt=False,
                          tools=TOOLS, enable_thinking=False)
    # The assistant turn's text: after the generation prompt, up to the end-of-turn token.
    assert after.startswith(before), (before, after)
    text = after[len(before):]
    text = text[: text.rfind(family.end_of_turn)].strip()
    assert "get_weather" in text and "Zürich" in text, text
    r = family.post({"tool_choice": "auto", "guided_choice": [text]})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    assert choice["message"]["content"] is None
    [got] = choice["message"]["tool_calls"]
    assert got["function"]["name"] == "get_weather"
    assert json.loads(got["function"]["arguments"]) == call["function"]["arguments"]
    # Text that is no call stays content.
    r = family.post({"tool_choice": "auto", "guided_choice": ["It is sunny."]})
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["content"] == "It is sunny."
    assert "tool_calls" not in choice["message"]


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_time"}}],
                         ids=["required", "named"])
def test_constrained_calls_validate_and_stream_the_same(family, choice):
    body = {"tool_choice": choice, "parallel_tool_calls": False}
    r = family.post(body)
    assert r.status_code == 200, r.text
    c = r.json()["choices"][0]
    assert c["finish_reason"] == "tool_calls", c
    assert c["message"]["content"] is None
    calls = c["message"]["tool_calls"]
    assert len(calls) == 1
    check_calls(calls, {"get_time"} if isinstance(choice, dict) else SCHEMAS)
    streamed, finish = {}, None
    with family.post(body, stream=True) as s:
        assert s.status_code == 200
        for line in s.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ch = json.loads(line[6:])["choices"][0]
            assert not ch["delta"].get("content"), ch
            for d in ch["delta"].get("tool_calls") or []:
                one = streamed.setdefault(d["index"], {"name": "", "arguments": ""})
                one["name"] += d.get("function", {}).get("name") or ""
                one["arguments"] += d.get("function", {}).get("arguments") or ""
            finish = ch["finish_reason"] or finish
    assert finish == "tool_calls"
    assert [streamed[i] for i in sorted(streamed)] == [
        {"name": x["function"]["name"], "arguments": x["function"]["arguments"]} for x in calls]


def test_tool_result_turn_reaches_the_template(family):
    """The call, then a role "tool" message with its tool_call_id, go back in the next turn."""
    r = family.post({"tool_choice": "required", "parallel_tool_calls": False})
    calls = r.json()["choices"][0]["message"]["tool_calls"]
    msgs = ASK + [{"role": "assistant", "content": None, "tool_calls": calls},
                  {"role": "tool", "tool_call_id": calls[0]["id"], "content": "18 degrees and sunny"}]
    r2 = family.post({"messages": msgs, "tool_choice": "auto", "max_tokens": 1})
    assert r2.status_code == 200, r2.text
    golden_msgs = ASK + [{"role": "assistant", "content": "", "tool_calls": plain_calls(calls)},
                         {"role": "tool", "tool_call_id": calls[0]["id"], "content": "18 degrees and sunny"}]
    want = family.count(family.render(golden_msgs, tools=TOOLS, enable_thinking=False))
    assert r2.json()["usage"]["prompt_tokens"] == want
