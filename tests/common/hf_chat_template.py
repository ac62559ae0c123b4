"""transformers' apply_chat_template rendering (chat_template_utils), in plain jinja2: the reference
the server's and the Python package's chat-template tests compare with; and the dummy-weight model
folder those tests serve a real tokenizer from."""
import datetime
import json
import shutil

import jinja2
import jinja2.ext
import jinja2.sandbox


def render(template, messages, add_generation_prompt=True, **variables):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                            documents=None, **variables)


def dummy_model_dir(src, tmp, config_json, template_file=None):
    """A model folder in tmp: the fixture config (config_json) with the vocabulary of the tokenizer
    in src, its tokenizer files and, if given, a chat template file. Returns (template source or
    None where there is none, {"bos_token", "eos_token"}, tokenizer_config)."""
    cfg = json.loads((src / "tokenizer_config.json").read_text())
    template = template_file.read_text() if template_file else cfg.get("chat_template")
    config = json.loads(config_json.read_text())
    tok = json.loads((src / "tokenizer.json").read_text())
    config["vocab_size"] = max(len(tok["model"]["vocab"]), 1 + max(a["id"] for a in tok["added_tokens"]))
    (tmp / "config.json").write_text(json.dumps(config))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(src / f, tmp / f)
    if template_file:
        (tmp / "chat_template.jinja").write_text(template)
    special = {"bos_token": cfg.get("bos_token") or "", "eos_token": cfg.get("eos_token") or ""}
    return template, special, cfg
