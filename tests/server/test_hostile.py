"""Hostile and careless clients: a taken port, malformed or oversized requests, bursts of
connections, control characters in the log, an absurd --threads. Every answer comes fast and the
server keeps serving."""
import socket
import subprocess
import time

import pytest
import requests

from conftest import BIN, COMMON_ARGS, CTX


def raw_request(port, data, timeout=5.0, shut_write=False):
    """Sends raw bytes; returns (status or None when closed without an answer, seconds taken)."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if shut_write:
            s.shutdown(socket.SHUT_WR)
        buf = b""
        try:
            while b"\r\n" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
        except (ConnectionResetError, socket.timeout):
            pass
    took = time.monotonic() - t0
    if not buf.startswith(b"HTTP/1."):
        return None, took
    return int(buf.split(b" ", 2)[1]), took


def test_second_bind_refused(server):
    cmd = [str(BIN), "serve", *COMMON_ARGS, "--ctx", str(CTX), "--port", str(server.port), "-q"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot listen on"), p.stderr
    assert requests.get(server.url + "/health", timeout=5).status_code == 200


def test_log_escapes_control_characters(server):
    r = requests.get(server.url + "/v1/nothing%0d%0aGET /forged 200 0.1 ms%1b[31m", timeout=5)
    assert r.status_code == 404
    time.sleep(0.2)
    assert not any(line.startswith("GET /forged") for line in server.log), server.log[-3:]
    assert any("/v1/nothing\\x0d\\x0aGET /forged" in line and "\\x1b[31m" in line for line in server.log)


def test_connection_burst_no_resets(server):
    """A burst well past cpp-httplib's backlog of 5: every connection is accepted and answered."""
    n = 400
    socks = [socket.create_connection(("127.0.0.1", server.port), timeout=20) for _ in range(n)]
    try:
        for s in socks:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        ok = 0
        for s in socks:
            if s.recv(64).startswith(b"HTTP/1.1 200"):
                ok += 1
        assert ok == n
    finally:
        for s in socks:
            s.close()


def test_threads_capped():
    p = subprocess.run([str(BIN), "generate", "-m", "default", "--threads", "1000", "-n", "2", "-q",
                        "-p", "Hello"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "--threads 1000 is more than the" in p.stderr
