"""Many clients at once: batched replies equal solo replies, KV slots come back, and a client
that hangs up mid-stream has its request cancelled."""
import concurrent.futures as cf
import json
import subprocess
import time

import requests

from conftest import BIN, COMMON_ARGS, Server

TOPICS = ["the sea", "a robot", "winter", "coffee", "a lighthouse", "mountains", "a cat", "the moon",
          "rain", "a library", "trains", "bees", "a volcano", "autumn", "a violin", "deserts",
          "a garden", "clocks", "the wind", "a city", "rivers", "snow", "a dragon", "bread",
          "stars", "a forest", "paper", "the sun", "an island", "music", "a bridge", "fire"]
PROMPTS = [f"Write one sentence about {t}." for t in TOPICS]


def chat_kwargs(model, prompt):
    return dict(model=model, messages=[{"role": "user", "content": prompt}], max_tokens=12, temperature=0)


def stream_text(client, model, prompt):
    chunks = client.chat.completions.create(stream=True, **chat_kwargs(model, prompt))
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_32_concurrent_streams_equal_solo(server, client, model):
    assert len(PROMPTS) == 32
    solo = [client.chat.completions.create(**chat_kwargs(model, p)).choices[0].message.content for p in PROMPTS]
    before = server.metrics()
    with cf.ThreadPoolExecutor(32) as pool:
        together = list(pool.map(lambda p: stream_text(client, model, p), PROMPTS))
    for p, a, b in zip(PROMPTS, solo, together):
        assert a == b, f"{p!r}: alone {a!r}, batched {b!r}"
    m = server.wait_idle()
    assert m["lite_llama_kv_slots_used"] == 0
    assert m["lite_llama_requests_running"] == 0
    assert m['lite_llama_requests_total{status="ok"}'] - before['lite_llama_requests_total{status="ok"}'] == 32
    assert m["lite_llama_kv_slots_total"] > 0


def test_capped_prompt_chunks_beside_streams_equal_solo(client, model):
    """--max-prefill-with-decodes: two ~700-token prompts arrive while 8 short streams decode, in
    chunks of at most 16 tokens beside them (64 with nobody decoding); every greedy reply equals the
    shared server's (whole-budget chunks, one request at a time), every slot comes back."""
    story = " ".join(f"Chapter {i}: the lighthouse keeper counted {i * 7} ships and wrote them down."
                     for i in range(40))
    long_prompts = [f"{story} Summarise chapter {n} in one sentence." for n in (3, 17)]
    prompts = PROMPTS[:8] + long_prompts
    solo = [client.chat.completions.create(**chat_kwargs(model, p)).choices[0].message.content for p in prompts]
    s = Server("--max-num-seqs", "16", "--max-batched-tokens", "64", "--max-prefill-with-decodes", "16")
    try:
        c = s.client()
        with cf.ThreadPoolExecutor(len(prompts)) as pool:
            shorts = [pool.submit(stream_text, c, model, p) for p in prompts[:8]]
            time.sleep(0.1)  # the short streams are decoding when the long prompts arrive
            longs = [pool.submit(stream_text, c, model, p) for p in long_prompts]
            together = [f.result() for f in shorts + longs]
        for p, a, b in zip(prompts, solo, together):
            assert a == b, f"{p[-40:]!r}: alone {a!r}, capped chunks {b!r}"
        m = s.wait_idle()
        assert m["lite_llama_kv_slots_used"] == 0
        assert m['lite_llama_requests_total{status="ok"}'] == len(prompts)
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_negative_prefill_cap_is_a_one_line_error():
    p = subprocess.run([str(BIN), "serve", *COMMON_ARGS, "--max-prefill-with-decodes", "-1"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "max-prefill-with-decodes" in lines[0], p.stderr


def test_client_disconnect_cancels(server, model):
    before = server.metrics()['lite_llama_requests_total{status="cancelled"}']
    body = {"model": model, "prompt": "Tell me a very long story.", "max_tokens": 900, "stream": True,
            "ignore_eos": True}
    r = requests.post(server.url + "/v1/completions", json=body, stream=True, timeout=60)
    lines = r.iter_lines()
    got = 0
    for line in lines:
        if line.startswith(b"data: {"):
            json.loads(line[6:])
            got += 1
            if got == 3:
                break
    assert server.metrics()["lite_llama_kv_slots_used"] > 0
    r.close()  # hang up mid-stream
    deadline = time.time() + 10
    while time.time() < deadline:
        m = server.metrics()
        if m['lite_llama_requests_total{status="cancelled"}'] > before and m["lite_llama_kv_slots_used"] == 0:
            break
        time.sleep(0.05)
    assert m['lite_llama_requests_total{status="cancelled"}'] == before + 1
    assert m["lite_llama_kv_slots_used"] == 0 and m["lite_llama_requests_running"] == 0
    assert any("client disconnected" in line for line in server.log)


def test_blocking_client_disconnect_cancels(server, model):
    before = server.metrics()['lite_llama_requests_total{status="cancelled"}']
    body = {"model": model, "prompt": "Another long story.", "max_tokens": 900, "ignore_eos": True}
    try:
        requests.post(server.url + "/v1/completions", json=body, timeout=1.0)
    except requests.exceptions.ReadTimeout:
        pass  # the client gives up and closes the connection
    m = server.wait_idle()
    assert m['lite_llama_requests_total{status="cancelled"}'] == before + 1
    assert m["lite_llama_kv_slots_used"] == 0


def test_metrics_format(server):
    text = requests.get(server.url + "/metrics", timeout=10).text
    for family in ("lite_llama_requests_total", "lite_llama_prompt_tokens_total",
                   "lite_llama_generation_tokens_total", "lite_llama_requests_running",
                   "lite_llama_requests_waiting", "lite_llama_kv_slots_used", "lite_llama_kv_slots_total"):
        assert f"# TYPE {family} " in text
    for h in ("lite_llama_time_to_first_token_seconds", "lite_llama_inter_token_latency_seconds"):
        assert f"# TYPE {h} histogram" in text
        assert f'{h}_bucket{{model="SmolLM2-135M-Instruct.Q4_1",le="+Inf"}}' in text
        assert f"{h}_sum" in text and f"{h}_count" in text
    m = server.metrics()
    assert m["lite_llama_generation_tokens_total"] > 0 and m["lite_llama_prompt_tokens_total"] > 0
    assert m['lite_llama_time_to_first_token_seconds_bucket{le="+Inf"}'] == m[
        "lite_llama_time_to_first_token_seconds_count"]
