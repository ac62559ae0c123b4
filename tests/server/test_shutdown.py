"""SIGTERM: no new requests, running ones finish within the grace period (or are cut short after
it), then the process exits 0."""
import json
import signal
import socket
import threading
import time

import requests

from conftest import Server


def start_stream(server, max_tokens):
    """Starts a streaming request; returns (thread, result) where result fills in as it reads."""
    result = {"chunks": [], "done": False, "finish": None}
    r = requests.post(server.url + "/v1/completions", stream=True, timeout=60,
                      json={"prompt": "Once upon a time", "max_tokens": max_tokens, "stream": True,
                            "ignore_eos": True})
    assert r.status_code == 200

    def read():
        for line in r.iter_lines():
            if line == b"data: [DONE]":
                result["done"] = True
            elif line.startswith(b"data: "):
                c = json.loads(line[6:])
                result["chunks"].append(c)
                if c["choices"] and c["choices"][0]["finish_reason"]:
                    result["finish"] = c["choices"][0]["finish_reason"]

    t = threading.Thread(target=read, daemon=True)
    t.start()
    while not result["chunks"]:
        time.sleep(0.01)
    return t, result


def test_sigterm_lets_running_stream_finish():
    s = Server("--max-num-seqs", "2", "--shutdown-grace", "30")
    # Long enough to still be running 0.3 s after the signal (40 tokens took ~0.25 s once the
    # CPU decoded at ~150 tok/s), short enough to finish well within the grace period.
    reader, result = start_stream(s, 300)
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    # Draining: not healthy, no new work.
    assert requests.get(s.url + "/health", timeout=5).status_code == 503
    r = requests.post(s.url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}, timeout=5)
    assert r.status_code == 503 and r.json()["error"]["code"] == "server_shutting_down"
    assert s.proc.wait(30) == 0
    reader.join(5)
    assert result["done"] and result["finish"] == "length"
    assert sum(len(c["choices"]) for c in result["chunks"]) >= 1
    assert time.time() - t0 < 30
    s.stop()
    assert any("SIGTERM" in line for line in s.log)


def test_sigterm_cancels_after_grace():
    s = Server("--max-num-seqs", "2", "--shutdown-grace", "1")
    reader, result = start_stream(s, 1000)
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(15) == 0
    elapsed = time.time() - t0
    reader.join(5)
    assert result["done"] and result["finish"] == "abort"
    assert elapsed < 8, elapsed
    s.stop()


def test_sigterm_answers_requests_being_handled():
    # Requests read in full but still parsed and tokenized on the workers when the listener
    # stopped had their connections closed without an answer (and the event loops, out of work
    # once it stopped accepting, had returned: no answer could be written).
    s = Server()
    body = json.dumps({"prompt": "hello world, " * 1_000_000, "max_tokens": 1}).encode()
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    socks = []
    for _ in range(12):
        c = socket.create_connection(("127.0.0.1", s.port))
        c.sendall(head + body[:-1])
        socks.append(c)
    for c in socks:  # every request complete at once: most wait for a worker
        c.sendall(body[-1:])
    time.sleep(0.1)
    s.proc.send_signal(signal.SIGTERM)
    for c in socks:
        c.settimeout(30)
        got = b""
        while chunk := c.recv(65536):
            got += chunk
        c.close()
        assert got.startswith(b"HTTP/1.1 ") and got.endswith(b"}"), got[:200]
    assert s.proc.wait(30) == 0
    s.stop()
