"""bench/cpu_vs_llamacpp.py's parsing of llama-batched-bench's table: the sample rows are the ones
llama.cpp documents for its tool (tools/batched-bench/README.md), not our output."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import cpu_vs_llamacpp as cvl  # noqa: E402

README_TABLE = """
main: n_kv_max = 16384, n_batch = 2048, n_ubatch = 512, flash_attn = 0, is_pp_shared = 0, n_gpu_layers = 99, n_threads = 8, n_threads_batch = 8

|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |
|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|
|   128 |    128 |    1 |    256 |    0.108 |  1186.64 |    3.079 |    41.57 |    3.187 |    80.32 |
|   128 |    128 |    8 |   2048 |    0.751 |  1363.27 |    7.344 |   139.43 |    8.095 |   252.99 |
|   128 |    256 |    8 |   3072 |    0.751 |  1363.92 |   15.110 |   135.54 |   15.861 |   193.69 |
"""


def test_generation_speed_of_the_asked_row():
    assert cvl.parse_batched_bench(README_TABLE, 128, 1) == pytest.approx(41.57)
    # The first row with PP = 128 and B = 8 (TG is fixed by the command line in the script).
    assert cvl.parse_batched_bench(README_TABLE, 128, 8) == pytest.approx(139.43)


def test_missing_row_is_an_error():
    with pytest.raises(RuntimeError, match="no result row"):
        cvl.parse_batched_bench(README_TABLE, 512, 8)
