"""Fixtures for the server tests: `lite-llama serve` started on a free port with the default model.

The binary is $LITE_LLAMA_BIN, or build/bin/lite-llama (scripts/test sets it from BUILD_DIR).
"""
import json
import os
import sys
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import openai
import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "common"))  # hf_chat_template, the tests' shared reference
BIN = Path(os.environ.get("LITE_LLAMA_BIN", ROOT / "build" / "bin" / "lite-llama"))

# Small enough for 2 CPU cores and little memory; ctx leaves room for the length-limit tests.
CTX = 1024
BASE_ARGS = ["--kv-tokens", "8192", "-t", "2"]
COMMON_ARGS = ["-m", "default", *BASE_ARGS]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `lite-llama serve` child process; its stderr is kept for the request log."""

    def __init__(self, *args, ctx=CTX, model=("-m", "default")):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [str(BIN), "serve", *model, *BASE_ARGS, "--ctx", str(ctx), "--port", str(self.port), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n" + "".join(self.log))
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("server did not become healthy in 60 s:\n" + "".join(self.log))

    def _read_log(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def client(self, api_key="none", **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0, timeout=120, **kw)

    def metrics(self):
        """The Prometheus samples as {name{labels}: value}, model label dropped."""
        text = requests.get(self.url + "/metrics", timeout=10).text
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            key, value = line.rsplit(" ", 1)
            key = re.sub(r'model="[^"]*",?', "", key).replace("{}", "")
            out[key] = float(value)
        return out

    def wait_idle(self, timeout=10):
        """Waits until nothing runs and every KV slot is free; returns the metrics."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if (m["lite_llama_kv_slots_used"] == 0 and m["lite_llama_requests_running"] == 0
                    and m["lite_llama_requests_waiting"] == 0) or time.time() > deadline:
                return m
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)
        return self.proc.returncode


@pytest.fixture(scope="session", autouse=True)
def check_binary():
    if not BIN.exists():
        pytest.exit(f"{BIN} not found: build first (scripts/setup) or set LITE_LLAMA_BIN", returncode=2)


@pytest.fixture(scope="session")
def server():
    """The shared server: 32 sequences batched, no API key."""
    s = Server("--max-num-seqs", "32")
    yield s
    assert s.stop() == 0, "".join(s.log)


@pytest.fixture(scope="session")
def client(server):
    return server.client()


@pytest.fixture(scope="session")
def model(client):
    return client.models.list().data[0].id


def tokenize_count(text, parse_special=True):
    """Token count from the CLI (an independent path to the same tokenizer)."""
    args = [str(BIN), "tokenize", "-m", "default", "--json", "-q", text]
    if parse_special:
        args.insert(-1, "--parse-special")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["count"]
