"""Tool calling (issue 23) against the default model: `required` and named tool choices decode
under a grammar of the function's parameters, so the arguments must validate with jsonschema
whatever the tiny model would have written; the answers come back as message.tool_calls and as
streamed delta.tool_calls that reassemble to the same calls."""
import json

import jsonschema
import pytest
import requests

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 40}, "unit": {"enum": ["celsius", "fahrenheit"]},
                   "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 20}}, "required": ["zone"],
        "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather forecast for a city", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time in a zone", "parameters": TIME}},
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK = [{"role": "user", "content": "What will the weather be in Paris tomorrow?"}]


def post(server, body):
    body = {"messages": ASK, "temperature": 0, "max_tokens": 120, "tools": TOOLS, **body}
    return requests.post(server.url + "/v1/chat/completions", json=body, timeout=300)


def check_calls(calls, names):
    assert calls, "no tool calls"
    for c in calls:
        assert c["type"] == "function" and c["id"].startswith("call_")
        assert c["function"]["name"] in names
        jsonschema.validate(json.loads(c["function"]["arguments"]), SCHEMAS[c["function"]["name"]])


def test_required_calls_validate(server):
    r = post(server, {"tool_choice": "required"})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    if choice["finish_reason"] == "length":
        pytest.skip("ran out of tokens inside a call")
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    check_calls(choice["message"]["tool_calls"], SCHEMAS)


@pytest.mark.parametrize("name", ["get_weather", "get_time"])
def test_named_function_single_call(server, name):
    r = post(server, {"tool_choice": {"type": "function", "function": {"name": name}}, "parallel_tool_calls": False,
                      "temperature": 0.8, "seed": 11})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    calls = choice["message"]["tool_calls"]
    assert len(calls) == 1 and calls[0]["function"]["name"] == name
    check_calls(calls, {name})


def test_streamed_tool_calls_reassemble(server):
    body = {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": False}
    blocking = post(server, body).json()["choices"][0]["message"]["tool_calls"]
    calls, finish = {}, None
    with requests.post(server.url + "/v1/chat/completions", stream=True, timeout=300,
                       json={"messages": ASK, "temperature": 0, "max_tokens": 120, "tools": TOOLS, "stream": True, **body}) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ch = json.loads(line[6:])["choices"][0]
            for d in ch["delta"].get("tool_calls") or []:
                c = calls.setdefault(d["index"], {"name": "", "arguments": ""})
                c["name"] += d.get("function", {}).get("name") or ""
                c["arguments"] += d.get("function", {}).get("arguments") or ""
            finish = ch["finish_reason"] or finish
    assert finish == "tool_calls"
    assert [calls[i] for i in sorted(calls)] == [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                                                  for c in blocking]


def test_openai_client_round_trip(client, model):
    r = client.chat.completions.create(model=model, messages=ASK, tools=TOOLS, tool_choice="required",
                                       temperature=0, max_tokens=120, parallel_tool_calls=False)
    call = r.choices[0].message.tool_calls[0]
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    # The next turn: the call and its result go back in; the model answers in text.
    msgs = ASK + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                  {"role": "tool", "tool_call_id": call.id, "content": "18 degrees and sunny"}]
    r2 = client.chat.completions.create(model=model, messages=msgs, tools=TOOLS, temperature=0, max_tokens=20)
    assert r2.choices[0].message.content


def test_tool_choice_none_and_auto_answer_text(server):
    for choice in ("none", "auto"):
        r = post(server, {"tool_choice": choice, "max_tokens": 15})
        assert r.status_code == 200, r.text
        c = r.json()["choices"][0]
        assert c["finish_reason"] in ("stop", "length", "tool_calls")
        if choice == "none":
            assert "tool_calls" not in c["message"]


@pytest.mark.parametrize("extra,param,needle", [
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice", "nope"),
    ({"tool_choice": "sometimes"}, "tool_choice", "sometimes"),
    ({"tools": [{"type": "function", "function": {"description": "x"}}]}, "tools", "name"),
    ({"tools": [{"type": "retrieval"}]}, "tools", "function"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}}}}],
      "tool_choice": "required"}, "tools", "uniqueItems"),
    ({"tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice", "both constrain"),
    ({"tools": None, "tool_choice": "required"}, "tool_choice", "needs 'tools'"),
    ({"tools": [], "tool_choice": "required"}, "tool_choice", "needs 'tools'"),
    ({"tools": [], "tool_choice": "auto"}, "tool_choice", "needs 'tools'"),
    ({"tools": [], "tool_choice": {"type": "function", "function": {"name": "f"}}}, "tool_choice", "needs 'tools'"),
    # A "type" that is no string was a 500 (nlohmann's value() threw).
    ({"tools": [{"type": 1, "function": {"name": "f"}}]}, "tools", "function"),
    ({"tool_choice": {"type": 1, "function": {"name": "get_time"}}}, "tool_choice", "must be"),
    # Naming no tool is not `required`.
    ({"tool_choice": {"type": "function", "function": {"name": ""}}}, "tool_choice", "not among"),
])
def test_bad_tool_requests_are_400(server, extra, param, needle):
    r = post(server, extra)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and needle in err["message"], err


def test_calls_before_a_cut_one_are_kept(server):
    # Parallel calls under `required`: the tiny model repeats calls until max_tokens cuts one.
    # The whole calls before the cut come back as tool_calls, none of their markup as content,
    # and the finish reason stays "length".
    cut = 0
    for max_tokens in (60, 90):
        r = post(server, {"tool_choice": "required", "max_tokens": max_tokens, "n": 3, "seed": 3, "temperature": 1})
        assert r.status_code == 200, r.text
        for c in r.json()["choices"]:
            msg = c["message"]
            if c["finish_reason"] == "length" and msg.get("tool_calls"):
                cut += 1
                assert "<tool_call>" not in (msg.get("content") or ""), msg
                for call in msg["tool_calls"]:
                    jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[call["function"]["name"]])
            elif msg.get("tool_calls"):
                assert c["finish_reason"] == "tool_calls", c
    assert cut > 0, "no answer was cut after a whole call"


def test_forced_call_cut_before_a_whole_call_leaves_no_markup(server):
    # max_tokens or a stop string cuts a required or named call before any call is whole: no call
    # comes back, and none of the call's markup is content (streamed or not).
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice in ("required", named):
        for cut in ({"max_tokens": 2}, {"max_tokens": 6}, {"max_tokens": 12}, {"stop": ["\n"]}, {"stop": ["city"]}):
            body = {"tool_choice": choice, **cut}
            finish = "length" if "max_tokens" in cut else "stop"
            r = post(server, body)
            assert r.status_code == 200, r.text
            c = r.json()["choices"][0]
            assert c["finish_reason"] == finish, c
            assert not c["message"].get("tool_calls") and not c["message"]["content"], c
            r = post(server, {**body, "stream": True})
            assert r.status_code == 200, r.text
            content, got = "", None
            for line in r.text.splitlines():
                if line.startswith("data: {"):
                    ch = json.loads(line[6:])["choices"][0]
                    content += ch["delta"].get("content") or ""
                    assert not ch["delta"].get("tool_calls"), ch
                    got = ch["finish_reason"] or got
            assert got == finish and content == "", (cut, content)


def test_empty_tools_list_is_no_tools(server):
    for choice in (None, "none"):
        body = {"tools": [], "max_tokens": 5}
        if choice:
            body["tool_choice"] = choice
        r = post(server, body)
        assert r.status_code == 200, r.text
        assert "tool_calls" not in r.json()["choices"][0]["message"]


def test_tools_on_completions_are_400(server):
    r = requests.post(server.url + "/v1/completions", json={"prompt": "x", "tools": TOOLS}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["param"] == "tools"


def test_tool_message_needs_id(server):
    msgs = ASK + [{"role": "tool", "content": "18"}]
    r = post(server, {"messages": msgs})
    assert r.status_code == 400 and "tool_call_id" in r.json()["error"]["message"]


def test_tools_reach_the_model_when_a_message_names_one(server):
    """The default model's template ignores `tools`, so they go in a system message. A message that
    names a tool used to pass for the template showing them (the name was found in the prompt), and
    the model got no tools at all: the same prompt as without them."""
    def prompt_tokens(content, tools):
        body = {"messages": [{"role": "user", "content": content}], "max_tokens": 1, "temperature": 0}
        if tools:
            body["tools"] = TOOLS
        r = requests.post(server.url + "/v1/chat/completions", json=body, timeout=60)
        assert r.status_code == 200, r.text
        return r.json()["usage"]["prompt_tokens"]

    plain = prompt_tokens("What is the weather in Paris?", True) - prompt_tokens("What is the weather in Paris?", False)
    named = prompt_tokens("Tell me about get_weather", True) - prompt_tokens("Tell me about get_weather", False)
    assert plain > 50 and named == plain, (plain, named)


def test_auto_without_parallel_calls_returns_one(server):
    # The model writes two calls under tool_choice auto; parallel_tool_calls false allows one (the
    # first, as vLLM keeps it), streamed or not.
    two = ('<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>\n'
           '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>')
    body = {"tool_choice": "auto", "guided_choice": [two], "parallel_tool_calls": False}
    r = post(server, body)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    calls = choice["message"]["tool_calls"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [("get_time", {"zone": "UTC"})]
    r = post(server, {**body, "stream": True})
    streamed = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith(b"data: {")]
    deltas = [d for ch in streamed for d in ch["choices"][0]["delta"].get("tool_calls", [])]
    assert [(d["index"], d["function"]["name"]) for d in deltas] == [(0, "get_time")]
    # With parallel calls allowed both come back.
    r = post(server, {"tool_choice": "auto", "guided_choice": [two]})
    assert [c["function"]["name"] for c in r.json()["choices"][0]["message"]["tool_calls"]] == ["get_time", "get_weather"]
