"""bench/compare_hf.py and bench/report.py without a GPU or torch: merging pieces, resuming with
--skip-done, and the goals table's arithmetic (expected values worked out by hand below)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import compare_hf  # noqa: E402
import report  # noqa: E402

SCHEMA = "lite-llama-compare-hf/1"
GIB = 1 << 30


def rec(model, engine, case, batch=1, error=None, **kw):
    r = {"model": model, "engine": engine, "case": case, "section": case.split(":")[0],
         "label": case.split(":")[1], "batch": batch, "prompt_lens": [128], "gen_len": 256, **kw}
    if error:
        r["error"] = error
    return r


def piece(path, finished, records, env=None):
    meta = {"finished": finished, **({"env": env} if env else {})}
    path.write_text(json.dumps({"schema": SCHEMA, "meta": meta, "records": records}))
    return path


def test_merge_newest_success_wins_and_errors_never_replace_a_success(tmp_path):
    piece(tmp_path / "piece_a.json", "2026-01-01T00:00:00",
          [rec("m", "hf_eager", "batch:p128_g256:b1", total_s={"median": 1.0}),
           rec("m", "hf_eager", "batch:p128_g256:b2", total_s={"median": 2.0})])
    piece(tmp_path / "piece_b.json", "2026-01-02T00:00:00",
          [rec("m", "hf_eager", "batch:p128_g256:b1", error="time limit reached"),
           rec("m", "hf_eager", "batch:p128_g256:b2", total_s={"median": 3.0}),
           rec("m", "hf_static", "batch:p128_g256:b1", error="skipped")])
    doc = compare_hf.merge([str(tmp_path)])
    got = {(r["engine"], r["case"]): r for r in doc["records"]}
    assert got[("hf_eager", "batch:p128_g256:b1")]["total_s"]["median"] == 1.0
    assert got[("hf_eager", "batch:p128_g256:b2")]["total_s"]["median"] == 3.0
    assert got[("hf_static", "batch:p128_g256:b1")]["error"] == "skipped"  # no success anywhere


def test_done_keys_counts_successes_only_and_rejects_other_files(tmp_path):
    p = piece(tmp_path / "piece_a.json", "2026-01-01T00:00:00",
              [rec("m", "hf_eager", "batch:p128_g256:b1"),
               rec("m", "hf_static", "batch:p128_g256:b1", error="time limit reached")])
    assert compare_hf.done_keys([str(tmp_path)]) == {("m", "hf_eager", "batch:p128_g256:b1")}
    assert compare_hf.done_keys([str(p)]) == {("m", "hf_eager", "batch:p128_g256:b1")}
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "something-else", "records": []}))
    with pytest.raises(SystemExit):
        compare_hf.done_keys([str(other)])


def test_skip_done_runs_nothing_that_is_done(tmp_path):
    """Every case of the seed004 section already done: no weights are made (that would need torch
    and fail here), no case runs, and the piece written holds no records."""
    model = "llama-3.2-1b"
    done = [rec(model, "lite-llama", c["id"]) for c in compare_hf.cases_for("seed004", model)]
    prev = piece(tmp_path / "prev.json", "2026-01-01T00:00:00", done)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "compare_hf.py"), "--bin", "/bin/true",
                        "--out", str(out), "--models", model, "--sections", "seed004",
                        "--engines", "lite-llama", "--skip-done", str(prev), str(prev), "--device", "cpu",
                        "--no-report"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "0 of 4 (model, engine, case) runs to do (4 done in --skip-done files)" in r.stdout
    pieces = list(out.glob("piece_*.json"))
    assert len(pieces) == 1 and json.loads(pieces[0].read_text())["records"] == []


def test_cases_filter_keeps_matching_ids_only(tmp_path):
    """--cases is a regex on the case id: the prompt sets hold 2 cases at 256 and 2 at 1,024 new
    tokens per model (seed 002's four prompts, seed 000's eight)."""
    def planned(*extra):
        r = subprocess.run([sys.executable, str(ROOT / "bench" / "compare_hf.py"), "--dry-run",
                            "--out", str(tmp_path), "--models", "qwen3-4b", "--sections", "prompts,long",
                            "--engines", "hf_eager", *extra], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("qwen3-4b")]
    assert len(planned()) == 7
    assert planned("--cases", "g1024") == [
        "prompts:seed002_g1024:b4", "prompts:seed000_long_g1024:b8",
        "long:p128_g1024:b1", "long:p128_g1024:b8", "long:p128_g1024:b64"]
    assert planned("--cases", "^prompts:.*_g256") == ["prompts:seed002_g256:b4", "prompts:seed000_long_g256:b8"]


def goals_row(recs, model, title, batch):
    """The goals section's lines and the cells of one model's row at a batch size."""
    lines = []
    report.goals_section(recs, [model], lines.append)
    row = next(x for x in lines if x.startswith(f"| {title} | {batch} |"))
    return lines, [c.strip() for c in row.strip("|").split("|")]


def test_goals_rates_and_verdicts():
    """One model at batch 1: lite-llama 1,000 tok/s at 1.0 ms a step, HF compiled 333.3 tok/s at
    3.0 ms, HF eager 50 tok/s at 30 ms, 2e9 weight bytes, H100 (copy 3.00 TB/s).
    lite-llama streams 2e9 B / 1 ms = 2.00 TB/s (67% of 3.00); 3x compiled needs
    2e9 / (3 ms / 3) = 2.00 TB/s (67%); 20x eager needs 2e9 / (30 ms / 20) = 1.33 TB/s (44%).
    Speed-ups: 1000 / 333.3 = 3.00x (met), 1000 / 50 = 20.00x (met). Memory 1.00 vs 1.50 GiB: met."""
    case = "batch:p128_g256:b1"
    recs = [
        rec("llama-3.2-1b", "lite-llama", case, backend="cuda:0 (NVIDIA H100 80GB HBM3)",
            throughput_tok_s={"median": 1000.0}, tpot_ms={"median": 1.0},
            memory={"weight_bytes": 2e9, "peak_device_bytes": 1 * GIB}),
        rec("llama-3.2-1b", "hf_static", case, throughput_tok_s={"median": 1000.0 / 3},
            tpot_ms={"median": 3.0}, memory={"device_used_bytes": 1.5 * GIB}),
        rec("llama-3.2-1b", "hf_eager", case, throughput_tok_s={"median": 50.0},
            tpot_ms={"median": 30.0}, memory={"device_used_bytes": 2 * GIB}),
    ]
    lines, cells = goals_row(recs, "llama-3.2-1b", "Llama-3.2-1B", 1)
    assert cells[2] == "3.00x: met"
    assert cells[3] == "20.00x: met"
    assert cells[4] == "2.00 (67%) / 1.33 (44%)"
    assert cells[5] == "2.00 (67%)"
    assert cells[6] == "1.00 / 1.50 GiB: met"
    why = next(x for x in lines if x.startswith("Why the speed goals"))
    assert "0 of the 2 speed goals need more than the copy rate" in why
    assert "the other 2 need 44-67% of it, where lite-llama streams 67-67%" in why


def test_goals_missed_when_hf_is_faster():
    case = "batch:p128_g256:b8"
    recs = [
        rec("qwen3-4b", "lite-llama", case, batch=8, backend="NVIDIA H100",
            throughput_tok_s={"median": 100.0}, tpot_ms={"median": 4.0},
            memory={"weight_bytes": 8e9, "peak_device_bytes": 3 * GIB}),
        rec("qwen3-4b", "hf_static", case, batch=8, throughput_tok_s={"median": 50.0},
            tpot_ms={"median": 8.0}, memory={"device_used_bytes": 2 * GIB}),
    ]
    _, cells = goals_row(recs, "qwen3-4b", "Qwen3-4B", 8)
    # 2x < 3x; 8e9 / (8 ms / 3) = 3.00 TB/s = 100% of the copy rate; memory 3 > 2 GiB.
    assert cells[2] == "2.00x: **missed**"
    assert cells[4] == "3.00 (100%) / -"
    assert cells[6] == "3.00 / 2.00 GiB: **missed**"


def test_profile_table_sums_families_per_batch():
    """Two batch sizes of one model: 'embedding, copies, argmax' is the sum of its three families
    (0.01 + 0.02 + 0.03 = 0.060); the graph step comes from the same record's timed runs."""
    def prof_rec(batch, gemm_ms, step_ms):
        fams = [{"family": "gemm", "ms_per_step": gemm_ms, "calls_per_step": 65},
                {"family": "embedding", "ms_per_step": 0.01, "calls_per_step": 1},
                {"family": "copies", "ms_per_step": 0.02, "calls_per_step": 1},
                {"family": "sampling", "ms_per_step": 0.03, "calls_per_step": 1}]
        return rec("llama-3.2-1b", "lite-llama", f"batch:p128_g256:b{batch}", batch=batch,
                   step_ms={"median": step_ms},
                   profile={"families": fams, "gaps_ms_per_step": 0.2, "wall_ms_per_step": 1.5})
    table = report.profile_table([prof_rec(8, 1.25, 1.3), prof_rec(1, 0.9, 1.1)], "llama-3.2-1b")
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.strip("|").split("|")[1:]]
            for r in table.splitlines()[2:]}
    assert table.splitlines()[0].startswith("| op family | Llama-3.2-1B b1 ms/step | Llama-3.2-1B b8 ms/step |")
    assert rows["GEMM (GEMV at 1 token, cuBLASLt above; 1-2 tokens before cf5f8a9)"] == ["0.900 (65 calls)", "1.250 (65 calls)"]
    assert rows["embedding, copies, argmax"] == ["0.060", "0.060"]
    assert rows["attention decode"] == ["0.000", "0.000"]
    assert rows["CUDA-graph step (timed runs)"] == ["1.100", "1.300"]
    assert report.profile_table([], "llama-3.2-1b") is None


def test_ab_table_one_column_per_switch_setting(tmp_path):
    """`compare_hf.py ab`: cases side by side per LITE_LLAMA_* setting (from each piece's env),
    the change against the run without switches: 1.5 ms against 2.0 ms is -25.0%."""
    case = "batch:p128_g256:b8"
    piece(tmp_path / "piece_b.json", "2026-01-01T00:01:00",
          [rec("m", "lite-llama", case, batch=8, tpot_ms={"median": 1.5}),
           rec("m", "lite-llama", "batch:p128_g256:b1", tpot_ms={"median": 1.0})], env={"LITE_LLAMA_X": "16"})
    piece(tmp_path / "piece_a.json", "2026-01-01T00:00:00",
          [rec("m", "lite-llama", case, batch=8, tpot_ms={"median": 2.0}),
           rec("m", "hf_eager", case, batch=8, tpot_ms={"median": 9.0})])
    lines = compare_hf.ab_table(compare_hf.load_pieces([str(tmp_path)])).splitlines()
    assert lines[0] == "| model | engine | case | default | LITE_LLAMA_X=16 |"
    assert lines[2] == "| m | lite-llama | batch:p128_g256:b1 | - | 1.000 |"  # no default run: no change
    assert lines[3] == "| m | lite-llama | batch:p128_g256:b8 | 2.000 | 1.500 (-25.0%) |"
    assert len(lines) == 4  # HF records are not part of an A/B of lite-llama's switches


def test_few_runs_section_lists_only_measured_cases_under_5_runs():
    recs = [rec("qwen3-4b", "hf_eager", "long:p128_g1024:b8", runs=3, total_s={"median": 50.0}),
            rec("qwen3-4b", "hf_eager", "long:p128_g1024:b1", runs=5, total_s={"median": 50.0}),
            rec("qwen3-4b", "hf_eager", "long:p128_g1024:b64", runs=3, error="time limit")]
    lines = []
    report.few_runs_section(recs, lines.append)
    assert [x for x in lines if x.startswith("| qwen3-4b")] == ["| qwen3-4b | hf_eager | long:p128_g1024:b8 | 3 |"]
    lines = []
    report.few_runs_section(recs[1:], lines.append)
    assert lines == []


def test_run_hf_hands_over_each_case_as_it_streams_in(tmp_path, monkeypatch):
    """A stand-in worker writes two cases' JSONL lines and then hangs past the time limit: both
    reach on_record while it still runs (the parent saves them at once), the third case gets the
    time-limit error, and the worker is killed."""
    real_popen = subprocess.Popen
    procs = []

    def fake_worker(cmd):
        jl = cmd[6]  # python3 compare_hf.py _hf-worker WDIR ENGINE SPEC JSONL ...
        script = ("import json, time\n"
                  "for cid in ('a', 'b'):\n"
                  f"    open({jl!r}, 'a').write(json.dumps({{'case_id': cid, 'x': cid}}) + '\\n')\n"
                  "time.sleep(60)\n")
        procs.append(real_popen([sys.executable, "-c", script]))
        return procs[-1]

    monkeypatch.setattr(compare_hf.subprocess, "Popen", fake_worker)
    start = compare_hf.time.time()
    args = type("A", (), {"runs": 3, "warmup": 1, "device": "cpu",
                          "time_left": staticmethod(lambda: 3 - (compare_hf.time.time() - start))})()
    cases = [{"id": i, "batch": 1, "prompt_lens": [3], "gen_len": 5} for i in ("a", "b", "c")]
    got = []
    compare_hf.run_hf(args, "qwen3-4b", "/nonexistent", "hf_eager", cases, str(tmp_path),
                      lambda cid, r: got.append((cid, r.get("x"), r.get("error"), procs[0].poll())))
    assert [g[:3] for g in got] == [("a", "a", None), ("b", "b", None),
                                    ("c", None, "time limit reached (--time-limit-s)")]
    assert got[0][3] is None and got[1][3] is None  # handed over while the worker still ran
    assert procs[0].poll() is not None
