"""bench/report.py without matplotlib: the committed report is what the data renders to, merged
files combine as documented, and the goals and profile tables' arithmetic (expected values worked
out by hand below)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import report  # noqa: E402

GIB = 1 << 30
H100 = "cuda:0 (NVIDIA H100 80GB HBM3)"


def rec(model, engine, case, batch=1, piece="piece_a.json", error=None, **kw):
    r = {"model": model, "engine": engine, "case": case, "section": case.split(":")[0],
         "label": case.split(":")[1], "batch": batch, "prompt_lens": [128], "gen_len": 256,
         "piece": piece, **kw}
    if error:
        r["error"] = error
    return r


def merged(path, records, pieces=None):
    pieces = pieces or [{"file": "piece_a.json", "commit": "aaaaaaa", "started": "2026-01-01T00:00:00+00:00",
                         "device": "NVIDIA H100 80GB HBM3"}]
    path.write_text(json.dumps({"schema": report.SCHEMA, "pieces": pieces, "records": records}))
    return path.name


def make_report(tmp_path, *files):
    """A Report over merged files written into tmp_path, with the committed manifest's names,
    goals and copy rates."""
    man = json.loads(Path(report.MANIFEST).read_text())
    man["compare"] = list(files)
    man.pop("perplexity", None)
    (tmp_path / "inputs.json").write_text(json.dumps(man))
    return report.Report(report.load_manifest(str(tmp_path / "inputs.json")), report.Template(report.TEMPLATE))


def test_committed_report_and_readme_are_the_rendering_of_the_manifest():
    """docs/benchmarks/report.md and the README's block equal what the manifest's data renders to,
    so a changed data file, manifest or template without a re-render fails here."""
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "report.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_check_fails_on_a_stale_report(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("# an old report\n")
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "report.py"), "--check", "--out-dir", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "report.md: differs" in r.stdout


def test_later_file_wins_but_an_error_never_replaces_a_success(tmp_path):
    c1, c2 = "batch:p128_g256:b1", "batch:p128_g256:b2"
    a = merged(tmp_path / "a.json", [rec("m", "hf_eager", c1, total_s={"median": 1.0}),
                                     rec("m", "hf_eager", c2, total_s={"median": 2.0}),
                                     rec("m", "lite-llama-int8", c1, total_s={"median": 9.0})])
    b = merged(tmp_path / "b.json", [rec("m", "hf_eager", c1, error="time limit reached"),
                                     rec("m", "hf_eager", c2, total_s={"median": 3.0})])
    rep = make_report(tmp_path, a, b)
    got = {(r["engine"], r["case"]): r for r in rep.recs}
    assert got[("hf_eager", c1)]["total_s"]["median"] == 1.0
    assert got[("hf_eager", c2)]["total_s"]["median"] == 3.0
    assert ("lite-llama-int8", c1) not in got  # engines the manifest does not name are left out


def test_template_refuses_a_missing_value():
    tpl = report.Template(report.TEMPLATE)
    assert "lite-llama at `abc` (2026-01-01)" == tpl.fill("measured_engine", engine="lite-llama",
                                                          commits="`abc`", dates="2026-01-01")
    with pytest.raises(KeyError):
        tpl.fill("measured_engine", engine="lite-llama")


def test_measured_line_names_device_commits_in_run_order_and_dates(tmp_path):
    pieces = [{"file": "p2.json", "commit": "bbbbbbb", "started": "2026-01-02T00:00:00+00:00", "device": "GPU X"},
              {"file": "p1.json", "commit": "aaaaaaa", "started": "2026-01-01T00:00:00+00:00", "device": "GPU X"}]
    recs = [rec("m", "hf_eager", "batch:p128_g256:b1", piece="p2.json"),
            rec("m", "hf_eager", "batch:p128_g256:b2", piece="p1.json"),
            rec("m", "lite-llama", "batch:p128_g256:b1", piece="p2.json"),
            rec("m", "hf_static", "batch:p128_g256:b1", piece="p1.json", error="time limit")]
    rep = make_report(tmp_path, merged(tmp_path / "a.json", recs, pieces))
    assert rep.measured(rep.recs) == ("Measured on GPU X: lite-llama at `bbbbbbb` (2026-01-02); "
                                      "HF eager (sdpa) at `aaaaaaa`, `bbbbbbb` (2026-01-01, 2026-01-02).")


def goals_row(rep, title, batch):
    text = rep.goals()
    row = next(x for x in text.splitlines() if x.startswith(f"| {title} | {batch} |"))
    return text, [c.strip() for c in row.strip("|").split("|")]


def test_goals_rates_and_verdicts(tmp_path):
    """One model at batch 1: lite-llama 1,000 tok/s at 1.0 ms a step, HF compiled 333.3 tok/s at
    3.0 ms, HF eager 50 tok/s at 30 ms, 2e9 weight bytes, H100 (copy 3.00 TB/s).
    lite-llama streams 2e9 B / 1 ms = 2.00 TB/s (67% of 3.00); 3x compiled needs
    2e9 / (3 ms / 3) = 2.00 TB/s (67%); 20x eager needs 2e9 / (30 ms / 20) = 1.33 TB/s (44%).
    Speed-ups: 1000 / 333.3 = 3.00x (met), 1000 / 50 = 20.00x (met). Memory 1.00 vs 1.50 GiB: met."""
    case = "batch:p128_g256:b1"
    recs = [
        rec("llama-3.2-1b", "lite-llama", case, backend=H100, throughput_tok_s={"median": 1000.0},
            tpot_ms={"median": 1.0}, memory={"weight_bytes": 2e9, "peak_device_bytes": 1 * GIB}),
        rec("llama-3.2-1b", "hf_static", case, throughput_tok_s={"median": 1000.0 / 3},
            tpot_ms={"median": 3.0}, memory={"device_used_bytes": 1.5 * GIB}),
        rec("llama-3.2-1b", "hf_eager", case, throughput_tok_s={"median": 50.0},
            tpot_ms={"median": 30.0}, memory={"device_used_bytes": 2 * GIB}),
    ]
    text, cells = goals_row(make_report(tmp_path, merged(tmp_path / "a.json", recs)), "Llama-3.2-1B", 1)
    assert cells[2] == "3.00x: met"
    assert cells[3] == "20.00x: met"
    assert cells[4] == "2.00 (67%) / 1.33 (44%)"
    assert cells[5] == "2.00 (67%)"
    assert cells[6] == "1.00 / 1.50 GiB: met"
    assert "(H100: 3.00 TB/s, quantization.md" in text and "H200" not in text  # only the kinds used
    assert "0 of the 2 speed goals need more than the copy rate" in text
    assert "the other 2 need 44-67% of it, where lite-llama streams 67-67%" in text
    assert "HF eager is bound by its per-token Python and kernel-launch overhead (30-30 ms a step" in text


def test_goals_missed_when_hf_is_faster(tmp_path):
    case = "batch:p128_g256:b8"
    recs = [
        rec("qwen3-4b", "lite-llama", case, batch=8, backend="NVIDIA H100", throughput_tok_s={"median": 100.0},
            tpot_ms={"median": 4.0}, memory={"weight_bytes": 8e9, "peak_device_bytes": 3 * GIB}),
        rec("qwen3-4b", "hf_static", case, batch=8, throughput_tok_s={"median": 50.0},
            tpot_ms={"median": 8.0}, memory={"device_used_bytes": 2 * GIB}),
        # batch 4 is not a goal batch: no row
        rec("qwen3-4b", "lite-llama", "batch:p128_g256:b4", batch=4, throughput_tok_s={"median": 1.0},
            tpot_ms={"median": 1.0}),
    ]
    text, cells = goals_row(make_report(tmp_path, merged(tmp_path / "a.json", recs)), "Qwen3-4B", 8)
    # 2x < 3x; 8e9 / (8 ms / 3) = 3.00 TB/s = 100% of the copy rate; memory 3 > 2 GiB.
    assert cells[2] == "2.00x: **missed**"
    assert cells[4] == "3.00 (100%) / -"
    assert cells[6] == "3.00 / 2.00 GiB: **missed**"
    assert "| Qwen3-4B | 4 |" not in text


def test_profile_table_sums_families_per_batch(tmp_path):
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
    rep = make_report(tmp_path, merged(tmp_path / "a.json", [prof_rec(8, 1.25, 1.3), prof_rec(1, 0.9, 1.1)]))
    table = rep.profile_table("llama-3.2-1b")
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.strip("|").split("|")[1:]]
            for r in table.splitlines()[2:]}
    assert table.splitlines()[0].startswith("| op family | Llama-3.2-1B b1 ms/step | Llama-3.2-1B b8 ms/step |")
    assert rows["GEMM (GEMV at 1 token, cuBLASLt above)"] == ["0.900 (65 calls)", "1.250 (65 calls)"]
    assert rows["embedding, copies, argmax"] == ["0.060", "0.060"]
    assert rows["attention decode"] == ["0.000", "0.000"]
    assert rows["CUDA-graph step (timed runs)"] == ["1.100", "1.300"]
    assert rep.profile_table("qwen3-4b") is None
    assert "commit `aaaaaaa`, 2026-01-01 (piece `piece_a.json`)" in rep.profiles()


def test_profile_table_survives_a_later_sweep_without_profiles_and_never_mixes_runs(tmp_path):
    """A later plain sweep wins the throughput tables but the profile table stays the last profiled
    run's; a model's table never mixes two profiled files (b64 exists only in the older one)."""
    def prof(batch, gemm_ms, piece):
        return rec("llama-3.2-1b", "lite-llama", f"batch:p128_g256:b{batch}", batch=batch, piece=piece,
                   step_ms={"median": 1.0}, total_s={"median": 1.0},
                   profile={"families": [{"family": "gemm", "ms_per_step": gemm_ms, "calls_per_step": 65}],
                            "gaps_ms_per_step": 0.1, "wall_ms_per_step": 1.5})
    pieces = [{"file": f"piece_{x}.json", "commit": x * 7, "started": f"2026-01-0{i + 1}T00:00:00+00:00",
               "device": "NVIDIA H100 80GB HBM3"} for i, x in enumerate("abc")]
    old = merged(tmp_path / "a.json", [prof(1, 0.5, "piece_a.json"), prof(64, 0.7, "piece_a.json")], pieces[:1])
    new = merged(tmp_path / "b.json", [prof(1, 0.9, "piece_b.json")], pieces[1:2])
    plain = merged(tmp_path / "c.json", [rec("llama-3.2-1b", "lite-llama", "batch:p128_g256:b1", piece="piece_c.json",
                                             step_ms={"median": 2.0}, total_s={"median": 2.0})], pieces[2:])
    rep = make_report(tmp_path, old, new, plain)
    got = {r["case"]: r for r in rep.recs}
    assert got["batch:p128_g256:b1"]["piece"] == "piece_c.json"
    table = rep.profile_table("llama-3.2-1b")
    assert table.splitlines()[0] == "| op family | Llama-3.2-1B b1 ms/step |"
    assert "0.900 (65 calls)" in table and "0.500" not in table and "0.700" not in table
    assert "piece `piece_b.json`" in rep.profiles()


def test_few_runs_lists_only_measured_cases_under_the_default(tmp_path):
    recs = [rec("qwen3-4b", "hf_eager", "long:p128_g1024:b8", runs=3),
            rec("qwen3-4b", "hf_eager", "long:p128_g1024:b1", runs=5),
            rec("qwen3-4b", "hf_eager", "long:p128_g1024:b64", runs=3, error="time limit")]
    rep = make_report(tmp_path, merged(tmp_path / "a.json", recs))
    assert [x for x in rep.few_runs().splitlines() if x.startswith("| qwen3-4b")] == [
        "| qwen3-4b | hf_eager | long:p128_g1024:b8 | 3 |"]
    rep.recs = rep.recs[1:]
    assert rep.few_runs() == ""


def test_charts_need_two_generation_lengths_at_batch_1(tmp_path):
    def r(case, batch, gen, prompt=128):
        return dict(rec("qwen3-4b", "lite-llama", case, batch=batch, tpot_ms={"median": 4.0},
                        throughput_tok_s={"median": 250.0}), gen_len=gen, prompt_lens=[prompt])
    one = [r("batch:p128_g256:b1", 1, 256), r("batch:p128_g256:b8", 8, 256), r("seed004:p3_g50:b1", 1, 50, 3)]
    rep = make_report(tmp_path, merged(tmp_path / "a.json", one))
    series = rep.chart_series()
    assert series["throughput_tok_s"] == {"qwen3-4b": {"lite-llama": [(1, 250.0), (8, 250.0)]}}
    assert "genlen" not in series  # the 3-token prompts do not count as a second length
    rep = make_report(tmp_path, merged(tmp_path / "b.json", one + [r("long:p128_g1024:b1", 1, 1024)]))
    assert rep.chart_series()["genlen"] == {"qwen3-4b": {"lite-llama": [(256, 4.0), (1024, 4.0)]}}
