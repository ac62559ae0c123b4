"""--chat-template (vLLM's): a chat template for the whole server, for `chat` and for
`generate --chat`, in place of the model's (a model without one chats with it), rendered with the
model's own bos_token / eos_token and used for the tool-call format too; one that does not parse
stops the start with one line of error and a non-zero status.

Models: random weights (`--load-format dummy`) beside the real Llama 3.2 tokenizer, whose
tokenizer_config has no chat template, and Qwen3's. The references: jinja2 renders the templates as
transformers does (tests/common/hf_chat_template.py) and HF `tokenizers` counts their tokens.
"""
import json
import subprocess

import hf_chat_template
import pytest
import requests
from tokenizers import Tokenizer

from conftest import BASE_ARGS, BIN, ROOT, Server

TEMPLATE = ("{{ bos_token }}{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}{{ eos_token }}\n{% endfor %}"
            "{% if add_generation_prompt %}[ASSISTANT]{% endif %}")
CONV = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
BROKEN = "{% for m in messages %}{{ m.content }}"  # no endfor


class Model:
    """A dummy-weight model folder with a real tokenizer (tests/common/hf_chat_template.py)."""

    def __init__(self, name, arch, tmp):
        src = ROOT / "models" / "tokenizers" / name
        if not (src / "tokenizer.json").exists():
            pytest.fail(f"{src}/tokenizer.json missing: run scripts/fetch-tokenizers")
        self.dir = tmp / "model"
        self.dir.mkdir()
        self.own, self.special, _ = hf_chat_template.dummy_model_dir(
            src, self.dir, ROOT / "tests" / "fixtures" / "models" / arch / "config.json")
        self.tokenizer = Tokenizer.from_file(str(src / "tokenizer.json"))
        self.args = ("-m", str(self.dir), "--load-format", "dummy")

    def count(self, text):
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    m = Model("llama3.2", "llama", tmp_path_factory.mktemp("bare"))
    assert m.own is None, "the Llama 3.2 tokenizer_config was meant to have no chat template"
    return m


@pytest.fixture(scope="module")
def template_file(tmp_path_factory):
    f = tmp_path_factory.mktemp("template") / "custom.jinja"
    f.write_text(TEMPLATE)
    return f


def test_serve_renders_the_flags_template_with_the_models_tokens(bare, template_file):
    want = hf_chat_template.render(TEMPLATE, CONV, True, **bare.special)
    assert want.startswith("<|begin_of_text|>[SYSTEM] Be brief.<|end_of_text|>\n[USER] Hi there")
    s = Server("--chat-template", str(template_file), ctx=1024, model=bare.args)
    try:
        r = requests.post(s.url + "/v1/chat/completions", timeout=120,
                          json={"messages": CONV, "max_tokens": 1, "temperature": 0})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["prompt_tokens"] == bare.count(want)
        # The same template as Jinja source on the command line.
        assert s.stop() == 0, "".join(s.log)
        s = Server("--chat-template", TEMPLATE, ctx=1024, model=bare.args)
        r = requests.post(s.url + "/v1/chat/completions", timeout=120,
                          json={"messages": CONV[1:], "max_tokens": 1, "temperature": 0})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["prompt_tokens"] == bare.count(
            hf_chat_template.render(TEMPLATE, CONV[1:], True, **bare.special))
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_tool_format_comes_from_the_flags_template(tmp_path):
    """Qwen3 (its own template writes <tool_call> blocks) served with Llama 3.2's template: a call
    in Llama 3's JSON form parses back as a call, so the format was taken from the flag's template."""
    qwen = Model("qwen3", "qwen3", tmp_path)
    llama = (ROOT / "tests" / "fixtures" / "chat_templates" / "llama3.2.jinja").read_text()
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                              "required": ["city"]}}}]
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    call = {"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    before = hf_chat_template.render(llama, ask, True, tools=tools, **qwen.special)
    after = hf_chat_template.render(llama, ask + [{"role": "assistant", "content": "", "tool_calls": [call]}], False,
                                    tools=tools, **qwen.special)
    assert after.startswith(before)
    text = after[len(before):]
    text = text[: text.rfind("<|eot_id|>")].strip()
    assert text.startswith("{") and "<tool_call>" not in text, text
    s = Server("--chat-template", llama, ctx=1024, model=qwen.args)
    try:
        r = requests.post(s.url + "/v1/chat/completions", timeout=300,
                          json={"messages": ask, "tools": tools, "tool_choice": "auto", "temperature": 0,
                                "max_tokens": 160, "guided_choice": [text]})
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        assert r.json()["usage"]["prompt_tokens"] == qwen.count(before)
        assert choice["finish_reason"] == "tool_calls", choice
        [got] = choice["message"]["tool_calls"]
        assert got["function"]["name"] == "get_weather"
        assert json.loads(got["function"]["arguments"]) == {"city": "Paris"}
    finally:
        assert s.stop() == 0, "".join(s.log)


def run(*args, stdin=""):
    return subprocess.run([str(BIN), *args], input=stdin, capture_output=True, text=True, timeout=300)


def test_generate_and_chat_use_it_on_a_model_without_a_template(bare, template_file):
    model = [*bare.args, "-t", "2", "--ctx", "1024"]
    r = run("generate", *model, "--chat", "--system", CONV[0]["content"], "-p", CONV[1]["content"],
            "--chat-template", str(template_file), "-n", "1", "--json", "-q")
    assert r.returncode == 0, r.stderr
    want = hf_chat_template.render(TEMPLATE, CONV, True, **bare.special)
    assert json.loads(r.stdout)["prompt_tokens"] == bare.count(want)
    r = run("chat", *model, "--chat-template", str(template_file), "-n", "2", stdin="Hi there\n/exit\n")
    assert r.returncode == 0, r.stderr
    assert "error" not in r.stderr, r.stderr
    # Without it the model has no template to chat with.
    r = run("chat", *model, "-n", "2", stdin="Hi there\n/exit\n")
    assert r.returncode != 0 and "has no chat template" in r.stderr, r.stderr


COMMANDS = {
    "serve": ["serve", "--port", "0"],
    "chat": ["chat"],
    "generate": ["generate", "--chat", "-p", "hi"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_broken_template_fails_the_start_on_one_line(command, tmp_path):
    f = tmp_path / "broken.jinja"
    f.write_text(BROKEN)
    for arg in (str(f), BROKEN):
        r = run(*COMMANDS[command], "-m", "default", *BASE_ARGS, "--chat-template", arg, stdin="hi\n")
        assert r.returncode == 2, (r.returncode, r.stderr)
        errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and errors[0] == r.stderr.strip().splitlines()[-1], r.stderr
        assert errors[0].startswith("error: --chat-template: the template does not parse: chat template line 1"), \
            r.stderr
        assert "unclosed 'for'" in errors[0], r.stderr
        assert "loaded" not in r.stderr, r.stderr  # before the weights
    r = run(*COMMANDS[command], "-m", "default", *BASE_ARGS, "--chat-template", str(tmp_path / "missing.jinja"))
    assert r.returncode == 2
    assert r.stderr.strip() == f"error: --chat-template: '{tmp_path / 'missing.jinja'}' looks like a file path, " \
                               "but it is not a file", r.stderr


def test_generate_takes_it_only_with_chat():
    r = run("generate", "-m", "default", "-p", "hi", "--chat-template", TEMPLATE)
    assert r.returncode == 2 and r.stderr.strip() == "error: --chat-template requires --chat (see --help)", r.stderr
