"""Structured outputs (issue 23): response_format, vLLM's guided_* / structured_outputs and
logit_bias against the default model. Every constrained output is checked by an independent
judge (Python's jsonschema, re, json) rather than by our own grammar code."""
import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
import datetime
import uuid
from enum import Enum, IntEnum
from typing import Annotated, Dict, List, Literal, Optional, Tuple, Union

import jsonschema
import pytest
import requests
from pydantic import BaseModel, Field

from conftest import BIN, Server

MAX = 120


def chat(server, body):
    body = {"messages": [{"role": "user", "content": body.pop("prompt", "Answer in JSON.")}],
            "temperature": 0, "max_tokens": MAX, **body}
    return requests.post(server.url + "/v1/chat/completions", json=body, timeout=300)


def completion(server, body):
    body = {"prompt": "Q: Is the sky blue?\nA:", "temperature": 0, "max_tokens": 40, **body}
    return requests.post(server.url + "/v1/completions", json=body, timeout=300)


def content(r):
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


# ---- Pydantic models through the official client's chat.completions.parse ----------------------
# 20 schemas: nested objects, arrays, enums, numbers with bounds, optional fields, anyOf / oneOf,
# tuples (prefixItems), dicts (additionalProperties), allOf, multipleOf, formats. Strings are
# bounded so that the tiny model always finishes inside max_tokens.

def S():
    return Field(max_length=16)


class Color(str, Enum):
    red = "red"
    green = "green"
    blue = "blue"


class Level(IntEnum):
    low = 1
    mid = 2
    high = 3


class Person(BaseModel):
    name: str = S()
    age: int = Field(ge=0, le=130)


class Address(BaseModel):
    street: str = S()
    city: str = S()
    zip_code: str = Field(pattern=r"^[0-9]{5}$")


class Employee(BaseModel):
    person: Person
    address: Address
    skills: List[str] = Field(max_length=3)


class Paint(BaseModel):
    color: Color
    finish: Literal["matte", "gloss"]
    litres: float


class Note(BaseModel):
    title: str = S()
    body: Optional[str] = Field(max_length=16)
    tags: List[Literal["a", "b", "c"]] = Field(max_length=3)


class Shape(BaseModel):
    kind: Union[int, Color]
    sides: List[int] = Field(min_length=1, max_length=4)
    closed: bool


class Inventory(BaseModel):
    items: List[Person] = Field(max_length=2)
    count: int = Field(gt=-1, lt=1000)


class Reading(BaseModel):
    celsius: float = Field(ge=-40, le=60)
    humidity: float = Field(gt=0, lt=100)
    level: Level


class Point(BaseModel):
    xy: Tuple[int, int]
    label: Tuple[Annotated[str, Field(max_length=8)], float] = Field(description="a name and a weight")


class Scores(BaseModel):
    by_name: Dict[Annotated[str, Field(max_length=12)], int] = Field(max_length=3)
    total: int = Field(ge=0, le=1000)


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = Field(ge=1, le=9)


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Owner(BaseModel):
    name: str = S()
    pet: Union[Cat, Dog] = Field(discriminator="kind")


class Batch(BaseModel):
    quantity: int = Field(multiple_of=5, ge=0, le=100)
    crates: int = Field(multiple_of=12)


class Event(BaseModel):
    day: datetime.date
    ticket: uuid.UUID
    at: datetime.time


class Flags(BaseModel):
    on: bool
    nothing: None
    maybe: Optional[bool] = None


class Grid(BaseModel):
    rows: List[Annotated[List[int], Field(max_length=3)]] = Field(min_length=1, max_length=2)
    fill: Optional[Color] = None


class Code(BaseModel):
    code: str = Field(min_length=2, max_length=4)
    prefix: str = Field(pattern=r"^[A-Z]{2}$")


class Base(BaseModel):
    id: int = Field(ge=1, le=99)


class Derived(Base):
    note: Optional[str] = Field(default=None, max_length=10)
    ratio: float = Field(ge=0, le=1)


class Team(BaseModel):
    lead: Person
    backup: Optional[Person] = None
    colors: List[Color] = Field(min_length=1, max_length=2)


class Measure(BaseModel):
    value: Union[int, float, None]
    unit: Literal["m", "s", "kg"]
    sign: Literal[-1, 1]


PYDANTIC_MODELS = [Person, Employee, Paint, Note, Shape, Inventory, Reading, Point, Scores, Owner, Batch, Event,
                   Flags, Grid, Code, Derived, Team, Measure, Address, Cat]


def test_parse_pydantic_models(client, model):
    """All 20 at once (the server batches them); each parsed and validated with jsonschema."""
    assert len(set(PYDANTIC_MODELS)) == 20

    def parse(model_cls):
        return client.chat.completions.parse(
            model=model, messages=[{"role": "user", "content": f"Give an example {model_cls.__name__} as JSON."}],
            response_format=model_cls, temperature=0, max_tokens=400)

    with ThreadPoolExecutor(len(PYDANTIC_MODELS)) as ex:
        results = list(ex.map(parse, PYDANTIC_MODELS))
    for model_cls, r in zip(PYDANTIC_MODELS, results):
        choice = r.choices[0]
        assert choice.finish_reason == "stop", (model_cls.__name__, choice.message.content)
        assert isinstance(choice.message.parsed, model_cls), (model_cls.__name__, choice.message.content)
        jsonschema.validate(json.loads(choice.message.content), model_cls.model_json_schema(),
                            format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def test_schema_keywords_generate_valid_output(server):
    """Each keyword that used to answer 400, generated under and judged by jsonschema."""
    schemas = [
        {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                   {"properties": {"a": {"minimum": 3, "maximum": 9}, "b": {"type": "boolean"}}, "required": ["b"],
                    "additionalProperties": False}]},
        {"type": "array", "items": {"type": "number", "minimum": -2.0, "exclusiveMaximum": 3}, "maxItems": 4},
        {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 1}, "maxItems": 4},
        {"type": "array", "items": {"type": "integer", "multipleOf": 7}, "maxItems": 4},
        {"type": "array", "prefixItems": [{"type": "string", "maxLength": 5}, {"type": "integer"}], "items": False,
         "minItems": 2},
        {"type": "object", "patternProperties": {"^k[0-9]$": {"type": "integer", "minimum": 0, "maximum": 9}},
         "additionalProperties": False},
        {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}},
        {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 1},
    ]

    def one(schema):
        return completion(server, {"prompt": "JSON:", "guided_json": schema, "max_tokens": 120})

    with ThreadPoolExecutor(len(schemas)) as ex:
        results = list(ex.map(one, schemas))
    for schema, r in zip(schemas, results):
        assert r.status_code == 200, r.text
        c = r.json()["choices"][0]
        assert c["finish_reason"] == "stop", (schema, c)
        jsonschema.validate(json.loads(c["text"]), schema)


# ---- response_format / guided_* on both endpoints -------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 30},
        "population": {"type": "integer", "minimum": 0},
        "coastal": {"type": "boolean"},
        "districts": {"type": "array", "items": {"type": "string", "maxLength": 20}, "minItems": 1, "maxItems": 3},
    },
    "required": ["city", "population", "coastal", "districts"],
    "additionalProperties": False,
}


def test_json_schema_chat(server):
    r = chat(server, {"prompt": "Describe Lisbon.", "max_tokens": 200,
                      "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA, "strict": True}}})
    jsonschema.validate(json.loads(content(r)), SCHEMA)
    assert r.json()["choices"][0]["finish_reason"] == "stop"


def test_json_schema_completions_and_guided_json(server):
    for extra in ({"response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA}}},
                  {"guided_json": SCHEMA}, {"guided_json": json.dumps(SCHEMA)},
                  {"structured_outputs": {"json": SCHEMA}}):
        r = completion(server, {"prompt": "A city as JSON:", "max_tokens": 200, **extra})
        assert r.status_code == 200, r.text
        jsonschema.validate(json.loads(r.json()["choices"][0]["text"]), SCHEMA)


def test_json_object(server):
    r = chat(server, {"prompt": "List three fruits in JSON.", "response_format": {"type": "json_object"}, "max_tokens": 200})
    assert isinstance(json.loads(content(r)), dict)


def test_guided_regex_choice_grammar(server):
    r = completion(server, {"guided_regex": r"(yes|no), [0-9]{2} percent"})
    assert re.fullmatch(r"(yes|no), [0-9]{2} percent", r.json()["choices"][0]["text"]), r.text
    r = completion(server, {"guided_choice": ["definitely", "never", "sometimes"], "temperature": 1.0, "seed": 5})
    assert r.json()["choices"][0]["text"] in ("definitely", "never", "sometimes")
    r = completion(server, {"structured_outputs": {"choice": ["A", "B"]}})
    assert r.json()["choices"][0]["text"] in ("A", "B")
    grammar = 'root ::= "The sky is " color "."\ncolor ::= "blue" | "grey" | "red"'
    r = completion(server, {"guided_grammar": grammar})
    assert re.fullmatch(r"The sky is (blue|grey|red)\.", r.json()["choices"][0]["text"]), r.text


def test_streamed_json_schema_reassembles(server):
    body = {"messages": [{"role": "user", "content": "Describe Oslo."}], "temperature": 0, "max_tokens": 200,
            "stream": True, "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA}}}
    text = ""
    with requests.post(server.url + "/v1/chat/completions", json=body, stream=True, timeout=300) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                d = json.loads(line[6:])
                text += d["choices"][0]["delta"].get("content") or ""
    jsonschema.validate(json.loads(text), SCHEMA)
    blocking = content(chat(server, {"prompt": "Describe Oslo.", "max_tokens": 200,
                                     "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA}}}))
    assert text == blocking


def test_constrained_and_free_requests_share_a_batch(server):
    schemas = [SCHEMA, {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "maxItems": 6},
               {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False},
               {"enum": ["alpha", "beta", 7, None]}]

    def one(i):
        if i % 5 == 4:  # unconstrained neighbour
            return None, completion(server, {"prompt": "Once upon a time", "temperature": 0.9, "seed": i})
        s = schemas[i % 5]
        return s, completion(server, {"prompt": f"JSON number {i}:", "guided_json": s, "temperature": 0.9,
                                      "seed": i, "max_tokens": 150})

    with ThreadPoolExecutor(10) as ex:
        results = list(ex.map(one, range(20)))
    for s, r in results:
        assert r.status_code == 200, r.text
        c = r.json()["choices"][0]
        if s is not None and c["finish_reason"] == "stop":
            jsonschema.validate(json.loads(c["text"]), s)


# ---- logit_bias -------------------------------------------------------------------------------------

def token_id(text):
    out = subprocess.run([str(BIN), "tokenize", "-m", "default", "--json", "-q", text],
                         check=True, capture_output=True, text=True).stdout
    ids = json.loads(out)["tokens"]
    assert len(ids) == 1, ids
    return ids[0]


def test_logit_bias_forces_and_bans(server):
    hello = token_id(" hello")
    r = completion(server, {"max_tokens": 4, "logit_bias": {str(hello): 100}})
    assert r.json()["choices"][0]["text"] == " hello" * 4
    free = completion(server, {"max_tokens": 1}).json()["choices"][0]["text"]
    first = token_id(free)
    banned = completion(server, {"max_tokens": 1, "logit_bias": {str(first): -100}}).json()["choices"][0]["text"]
    assert banned != free


# ---- errors: 400 naming the parameter --------------------------------------------------------------

@pytest.mark.parametrize("extra,param,needle", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object",
                                                                                         "patternProperties": {"^a": {}}}}}},
     "response_format", "patternProperties"),
    ({"guided_json": {"type": "number", "maximum": 2.5}}, "guided_json", "'maximum'"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": True}}}},
     "response_format", "uniqueItems"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}}, "response_format", "name"),
    ({"response_format": {"type": "yaml"}}, "response_format", "yaml"),
    ({"guided_json": {"type": "string", "format": "hostname"}}, "guided_json", "hostname"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer",
                                                                                         "const": "abc"}}}},
     "response_format", "admit no value"),
    ({"guided_json": {"type": "string", "enum": [1, 2]}}, "guided_json", "admit no value"),
    ({"guided_json": {"type": "string", "pattern": "^\\d+$", "format": "date-time"}}, "guided_json",
     "'pattern' with 'format' is not supported"),
    ({"guided_regex": "(a)\\1"}, "guided_regex", "backreferences"),
    ({"guided_grammar": "root ::= \"a"}, "guided_grammar", "unterminated"),
    ({"guided_grammar": "root ::= missing"}, "guided_grammar", "undefined rule 'missing'"),
    ({"guided_grammar": ""}, "guided_grammar", "no rules"),
    ({"structured_outputs": {"grammar": ""}}, "structured_outputs.grammar", "no rules"),
    ({"guided_choice": []}, "guided_choice", "non-empty"),
    ({"guided_regex": "a", "guided_choice": ["a"]}, "guided_choice", "both constrain"),
    ({"structured_outputs": {"structural_tag": {}}}, "structured_outputs.structural_tag", "not supported"),
    ({"logit_bias": {"abc": 1}}, "logit_bias", "abc"),
    ({"logit_bias": {"5": 101}}, "logit_bias", "[-100, 100]"),
    ({"logit_bias": {"99999999": 1}}, "logit_bias", "99999999"),
])
def test_unsupported_or_bad_constraints_are_400(server, extra, param, needle):
    for send in (chat, completion):
        r = send(server, dict(extra))
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["param"] == param and needle in err["message"], err


# ---- a grammar that no token can continue -----------------------------------------------------------

DUMMY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
         "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 1, "vocab_size": 256,
         "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": True}


def test_dead_end_grammar_is_an_error_not_a_hang(tmp_path):
    """Random weights without a tokenizer: no token spells any text, so the grammar admits nothing."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(DUMMY))
    s = Server(ctx=128, model=("-m", str(cfg), "--load-format", "dummy"))
    try:
        body = {"prompt": [1, 2, 3], "max_tokens": 20, "guided_regex": "abc"}
        r = requests.post(s.url + "/v1/completions", json=body, timeout=30)
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "grammar_dead_end"
        with requests.post(s.url + "/v1/completions", json={**body, "stream": True}, stream=True, timeout=30) as r:
            events = [json.loads(l[6:]) for l in r.iter_lines() if l.startswith(b"data: {")]
        assert events[-1]["error"]["code"] == "grammar_dead_end"
        free = requests.post(s.url + "/v1/completions", json={"prompt": [1, 2, 3], "max_tokens": 3}, timeout=30)
        assert free.status_code == 200 and free.json()["usage"]["completion_tokens"] == 3
    finally:
        assert s.stop() == 0, "".join(s.log)
