"""tools/kernel_bench/decode_timeline.py on a synthetic timeline: blocks grouped into calls by
pool and start gaps, and each phase's median against hand-worked values."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "kernel_bench"))
import decode_timeline  # noqa: E402

PERIOD = 20000  # ns between calls


def write_timeline(path, calls=6, pools=2, pool_of=None):
    """Call i uses pool i % pools and starts at i * PERIOD; its three split blocks start 0, 100
    and 200 ns late and pass each stamp 1 us after the one before; two merge blocks start 5 us in,
    are released at 7 us and end at 8 us (the second one 50 ns later)."""
    lines = [f"timeline D 64 batch 1 context 8192 pdl 1 splits 3 stages 4 calls {calls} pools {pools}"]
    for i in range(calls):
        c0, pool = 1_000_000 + i * PERIOD, (pool_of or (lambda i: i % pools))(i)
        for x, late in enumerate((0, 100, 200)):
            stamps = [c0 + late + 1000 * k for k in range(7)]
            lines.append(f"TL {3 if x == 2 else 1} 0 0 {x} {pool} " + " ".join(map(str, stamps)))
        for h, late in enumerate((0, 50)):
            stamps = [c0 + 5000 + late, c0 + 7000 + late, c0 + 8000 + late, 0, 0, 0, 0]
            lines.append(f"TL 2 0 0 {h} {pool} " + " ".join(map(str, stamps)))
    path.write_text("\n".join(lines) + "\n")


def test_blocks_group_into_calls_in_time_order(tmp_path):
    f = tmp_path / "tl.txt"
    write_timeline(f)
    head, recs = decode_timeline.load(f)
    calls = decode_timeline.calls_of(head, recs)
    assert len(calls) == 6
    assert all(len(c["split"]) == 3 and len(c["merge"]) == 2 for c in calls)
    starts = [min(r[2][0] for r in c["split"]) for c in calls]
    assert starts == sorted(starts) and starts[1] - starts[0] == PERIOD


def test_calls_keep_time_order_whatever_the_pool_numbers(tmp_path):
    f = tmp_path / "tl.txt"
    write_timeline(f, calls=6, pools=3, pool_of=lambda i: (2 - i) % 3)
    head, recs = decode_timeline.load(f)
    starts = [min(r[2][0] for r in c["split"]) for c in decode_timeline.calls_of(head, recs)]
    assert starts == [1_000_000 + i * PERIOD for i in range(6)]


def test_phases_against_hand_worked_values(tmp_path):
    f = tmp_path / "tl.txt"
    write_timeline(f)
    head, recs = decode_timeline.load(f)
    row = decode_timeline.phases(decode_timeline.calls_of(head, recs)[2])
    want = {"start_last": 0.2, "prologue": 1.0, "wait_at": 2.1, "q": 1.0, "tiles": 2.0, "combine": 1.0,
            "end_med": 6.1, "end_last": 6.2, "m_start": 5.0, "m_wait": 7.05, "m_end": 8.05}
    for k, v in want.items():
        assert row[k] == pytest.approx(v), k


def test_main_prints_the_period_of_middle_calls(tmp_path, capsys):
    f = tmp_path / "tl.txt"
    write_timeline(f, calls=8)
    decode_timeline.main(f)
    median = [l for l in capsys.readouterr().out.splitlines() if l.startswith("median")][0]
    assert "period 20.00" in median and "prologue 1.00" in median
