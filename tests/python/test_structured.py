"""Constrained generation through Python: SamplingParams(json_schema / regex / choice / grammar /
logit_bias), outputs judged by jsonschema and re, and the CLI's --json-schema giving the same
tokens (one engine path, two front ends)."""
import json
import re

import jsonschema
import pytest

from conftest import assert_idle, run_cli
from lite_llama import LLM, SamplingParams

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


# Random weights without a tokenizer (as tests/server's dead-end test): no token spells any text.
DUMMY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
         "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 1, "vocab_size": 256,
         "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": True}


def test_dead_end_grammar_raises(tmp_path):
    """A grammar that no token can continue is a ValueError with the engine's reason (the server's
    400 grammar_dead_end), from generate and from generate_stream; it was a silent
    finish_reason 'error' (not one of vLLM's) and an empty stream."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(DUMMY))
    llm = LLM(str(cfg), load_format="dummy", device="cpu", threads=2, ctx=128)
    dead = SamplingParams(temperature=0, max_tokens=20, regex="abc")
    free = SamplingParams(temperature=0, max_tokens=3)
    with pytest.raises(ValueError, match="no token can continue"):
        llm.generate([[1, 2, 3], [4, 5, 6]], [dead, free], use_tqdm=False)
    assert_idle(llm)
    with pytest.raises(ValueError, match="no token can continue"):
        list(llm.generate_stream([1, 2, 3], dead))
    assert_idle(llm)
    assert len(llm.generate([[4, 5, 6]], free, use_tqdm=False)[0].outputs[0].token_ids) == 3
