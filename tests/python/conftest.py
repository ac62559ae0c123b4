"""Fixtures for the Python package's tests: one LLM over the default model on the CPU.

The package is the one the main CMake build made in build/python (scripts/test puts it on
PYTHONPATH); the CLI for the parity checks is $LITE_LLAMA_BIN or build/bin/lite-llama.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "common"))  # hf_chat_template, the tests' shared reference
BIN = Path(os.environ.get("LITE_LLAMA_BIN", ROOT / "build" / "bin" / "lite-llama"))
try:
    import lite_llama  # noqa: F401
except ImportError:  # run by hand without PYTHONPATH: the default build's package
    sys.path.insert(0, str(ROOT / "build" / "python"))
    try:
        import lite_llama  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{e}: the module in build/python must be built for this Python "
                          f"({sys.version_info.major}.{sys.version_info.minor}); see the CMake "
                          "output's 'lite-llama Python module' line") from e

# Small enough for 2 CPU cores (as tests/server); the CLI runs get the same threads.
THREADS = 2
CTX = 1024
KV_TOKENS = 8192

SEED_PROMPTS = [
    "I believe the meaning of life is",
    "Simply put, the theory of relativity states that",
    "A brief message congratulating the team on the launch:\n\nHi everyone,\n\nI just",
    "Translate English to French:\n\nsea otter => loutre de mer\npeppermint => menthe poivrée\n"
    "plush girafe => girafe peluche\ncheese =>",
]


@pytest.fixture(scope="session")
def llm():
    os.chdir(ROOT)  # "default" is found in ./models
    return lite_llama.LLM("default", device="cpu", threads=THREADS, ctx=CTX, kv_tokens=KV_TOKENS)


def run_cli(*args):
    """`lite-llama ARGS -m default ...`, its stdout parsed as JSON."""
    cmd = [str(BIN), *args, "-m", "default", "-t", str(THREADS), "-q"]
    out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout)


def assert_idle(llm):
    """No request left, and no KV slot held by a request (the prefix cache's own slots are free)."""
    s = llm.get_stats()
    assert s["running"] == 0 and s["waiting"] == 0, s
    assert s["kv_slots_used"] == 0, s
    assert s["kv_slots_total"] == llm.model_info["kv_slots"], s
