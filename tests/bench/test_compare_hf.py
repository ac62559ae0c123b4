"""bench/compare_hf.py and bench/pieces.py without a GPU or torch: merging pieces, resuming with
--skip-done, selecting cases, the A/B table, and the HF worker's records streaming in."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import compare_hf  # noqa: E402
import pieces  # noqa: E402

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
    doc = pieces.merge([str(tmp_path)])
    got = {(r["engine"], r["case"]): r for r in doc["records"]}
    assert got[("hf_eager", "batch:p128_g256:b1")]["total_s"]["median"] == 1.0
    assert got[("hf_eager", "batch:p128_g256:b2")]["total_s"]["median"] == 3.0
    assert got[("hf_static", "batch:p128_g256:b1")]["error"] == "skipped"  # no success anywhere


def test_done_keys_counts_successes_only_and_rejects_other_files(tmp_path):
    p = piece(tmp_path / "piece_a.json", "2026-01-01T00:00:00",
              [rec("m", "hf_eager", "batch:p128_g256:b1"),
               rec("m", "hf_static", "batch:p128_g256:b1", error="time limit reached")])
    assert pieces.done_keys([str(tmp_path)]) == {("m", "hf_eager", "batch:p128_g256:b1")}
    assert pieces.done_keys([str(p)]) == {("m", "hf_eager", "batch:p128_g256:b1")}
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "something-else", "records": []}))
    with pytest.raises(SystemExit):
        pieces.done_keys([str(other)])


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
    written = list(out.glob("piece_*.json"))
    assert len(written) == 1 and json.loads(written[0].read_text())["records"] == []


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
    lines = pieces.ab_table(pieces.load_pieces([str(tmp_path)])).splitlines()
    assert lines[0] == "| model | engine | case | default | LITE_LLAMA_X=16 |"
    assert lines[2] == "| m | lite-llama | batch:p128_g256:b1 | - | 1.000 |"  # no default run: no change
    assert lines[3] == "| m | lite-llama | batch:p128_g256:b8 | 2.000 | 1.500 (-25.0%) |"
    assert len(lines) == 4  # HF records are not part of an A/B of lite-llama's switches


def test_run_hf_hands_over_each_case_as_it_streams_in(tmp_path, monkeypatch):
    """A stand-in worker writes two cases' JSONL lines and then hangs past the time limit: both
    reach on_record while it still runs (the parent saves them at once), the third case gets the
    time-limit error, and the worker is killed."""
    real_popen = subprocess.Popen
    procs = []

    def fake_worker(cmd):
        assert Path(cmd[1]).name == "hf_worker.py" and cmd[2] == "run"
        jl = cmd[6]  # python3 hf_worker.py run WDIR ENGINE SPEC JSONL ...
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


def test_hf_worker_takes_the_arguments_run_hf_passes():
    """The worker is a separate script: its `run` command parses what run_hf hands it (argparse
    exits before torch is imported) and it finds compare_hf's helpers."""
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "hf_worker.py"), "run", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for opt in ("--runs", "--warmup", "--device", "--deadline"):
        assert opt in r.stdout


def test_merge_command_writes_merged_file(tmp_path):
    piece(tmp_path / "piece_a.json", "2026-01-01T00:00:00", [rec("m", "hf_eager", "batch:p128_g256:b1")])
    out = tmp_path / "all.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "compare_hf.py"), "merge", str(tmp_path),
                        "-o", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert [p["file"] for p in doc["pieces"]] == ["piece_a.json"]
    assert [x["piece"] for x in doc["records"]] == ["piece_a.json"]
