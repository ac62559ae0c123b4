"""bench/serve_bench.py against the test server with tiny settings (it must keep working)."""
import json
import subprocess
import sys

from conftest import ROOT


def test_serve_bench_smoke(server):
    for mode in (["--concurrency", "2"], ["--rate", "20"]):
        out = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "serve_bench.py"), "--url", server.url, *mode,
             "--num-requests", "4", "--prompt-len", "4", "8", "--output-len", "3", "6", "--vocab", "49152",
             "--seed", "1"],
            check=True, capture_output=True, text=True, timeout=120).stdout
        rep = json.loads(out)
        assert rep["completed"] == 4 and rep["failed"] == 0
        # ignore_eos: every request generates exactly its drawn max_tokens.
        assert 4 * 3 <= rep["output_tokens"] <= 4 * 6
        assert rep["ttft_ms"]["p50"] > 0 and rep["itl_ms"]["p99"] >= rep["itl_ms"]["p50"] > 0
        assert rep["output_tokens_per_s"] > 0
