"""Constrained generation through Python: SamplingParams(json_schema / regex / choice / grammar /
logit_bias), outputs judged by jsonschema and re, and the CLI's --json-schema giving the same
tokens (one engine path, two front ends)."""
import json
import re

import jsonschema
import pytest

from conftest import run_cli
from lite_llama import SamplingParams

SCHEMA = {"type": "object",
          "properties": {"title": {"type": "string", "maxLength": 30}, "year": {"type": "integer", "minimum": 1900, "maximum": 2030},
                         "genres": {"type": "array", "items": {"enum": ["drama", "comedy", "sci-fi"]}, "maxItems": 2}},
          "required": ["title", "year", "genres"], "additionalProperties": False}


def test_json_schema_batch(llm):
    prompts = [f"Describe film number {i} as JSON:" for i in range(6)]
    outs = llm.generate(prompts, SamplingParams(temperature=0.8, seed=3, max_tokens=120, json_schema=SCHEMA), use_tqdm=False)
    done = 0
    for o in outs:
        if o.outputs[0].finish_reason == "stop":
            jsonschema.validate(json.loads(o.outputs[0].text), SCHEMA)
            done += 1
    assert done >= 3


def test_json_schema_equals_cli(llm, tmp_path):
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    prompt = "A film as JSON:"
    cli = run_cli("generate", "--temp", "0", "-n", "80", "--json", "--json-schema", str(path), "-p", prompt)
    out = llm.generate([prompt], SamplingParams(temperature=0, max_tokens=80, json_schema=SCHEMA), use_tqdm=False)[0]
    assert out.outputs[0].token_ids == cli["token_ids"]


def test_regex_choice_grammar_logit_bias(llm):
    r = llm.generate(["Today's date:"], SamplingParams(temperature=0, max_tokens=20, regex=r"20[0-9]{2}-[01][0-9]-[0-3][0-9]"),
                     use_tqdm=False)[0].outputs[0].text
    assert re.fullmatch(r"20[0-9]{2}-[01][0-9]-[0-3][0-9]", r), r
    c = llm.generate(["Pick:"], SamplingParams(temperature=1.0, seed=1, max_tokens=5, choice=["left", "right"]),
                     use_tqdm=False)[0].outputs[0].text
    assert c in ("left", "right")
    g = llm.generate(["Say:"], SamplingParams(temperature=0, max_tokens=10, grammar='root ::= "ok" [!?]'),
                     use_tqdm=False)[0].outputs[0].text
    assert re.fullmatch(r"ok[!?]", g)
    tok = llm.get_tokenizer().encode(" banana", add_special_tokens=False)
    assert len(tok) == 1
    b = llm.generate(["Fruit:"], SamplingParams(temperature=0, max_tokens=3, logit_bias={tok[0]: 100}), use_tqdm=False)[0]
    assert b.outputs[0].token_ids == tok * 3


@pytest.mark.parametrize("kw,needle", [
    ({"json_schema": {"type": "object", "patternProperties": {"^a": {}}}}, "patternProperties"),
    ({"regex": "(a)\\1"}, "backreferences"),
    ({"grammar": "root ::= [a"}, "line 1"),
    ({"regex": "a", "choice": ["a"]}, "both constrain"),
    ({"logit_bias": {5: 500}}, "logit_bias"),
])
def test_bad_constraints_raise(kw, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        SamplingParams(**kw)
