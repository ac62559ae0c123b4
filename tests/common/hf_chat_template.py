"""transformers' apply_chat_template rendering (chat_template_utils), in plain jinja2: the reference
the server's and the Python package's chat-template tests compare with."""
import datetime
import json

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
