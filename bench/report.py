#!/usr/bin/env python3
"""docs/benchmarks/report.md and its PNG charts from the benchmark JSON files.

Inputs:
  --compare FILE (repeatable)  merged results of bench/compare_hf.py (schema lite-llama-compare-hf/1)
  --legacy DATA_DIR            the 2026-11-22 H200 run of bench/gpu_speed.py (Llama-3.2-1B shapes,
                               batch 1/8/64, prompt 128, 256 new tokens), default docs/benchmarks/data;
                               --no-legacy leaves it out. Where a merged file has the same
                               (model, engine, case), the merged file wins.
Outputs (--out-dir, default docs/benchmarks): report.md, chart_throughput_vs_batch.png,
chart_tpot_vs_batch.png, and chart_tpot_vs_genlen.png once two or more generation lengths are
measured at batch 1.

usage: python3 bench/report.py [--compare merged.json ...] [--legacy DIR | --no-legacy] [--out-dir DIR]
Needs matplotlib (pip install matplotlib); runs anywhere, no GPU.
"""
import argparse
import datetime
import glob
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ["llama-3.2-1b", "llama-3.2-3b", "qwen2.5-3b", "qwen3-4b"]
MODEL_TITLE = {"llama-3.2-1b": "Llama-3.2-1B", "llama-3.2-3b": "Llama-3.2-3B",
               "qwen2.5-3b": "Qwen2.5-3B", "qwen3-4b": "Qwen3-4B"}
ENGINE_TITLE = {"lite-llama": "lite-llama", "lite-llama-nograph": "lite-llama (no CUDA graphs)",
                "hf_eager": "HF eager (sdpa)", "hf_static": "HF static cache (compiled)"}
ENGINE_ORDER = ["lite-llama", "lite-llama-nograph", "hf_eager", "hf_static"]
SECTION_SHORT = {"batch": "batch sweep (p128, 256 new)", "seed004": "seed 004 lengths",
                 "prompts": "seed prompt sets", "long": "1024 new tokens"}
COLORS = {"lite-llama": "#d62728", "lite-llama-nograph": "#ff9896", "hf_eager": "#1f77b4",
          "hf_static": "#2ca02c"}
SECTION_TITLE = {"batch": "Batch sweep: random prompts of 128 tokens, 256 new tokens",
                 "seed004": "Seed 004's table: batch 1, input 3 / 26 tokens, 50 / 100 new tokens",
                 "prompts": "The seeds' prompt sets (token counts of the real prompts, see below)",
                 "long": "1024-token generations: random prompts of 128 tokens"}
LEGACY_DATE = "2026-11-22"
GIB = float(1 << 30)


# ----------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------

def _stat(median, lo=None, hi=None):
    return {"median": median, "min": median if lo is None else lo, "max": median if hi is None else hi}


def _flip(s, f):
    return None if s is None else {"median": f(s["median"]), "min": f(s["max"]), "max": f(s["min"])}


def load_legacy(data_dir):
    """The 2026-11-22 H200 run (bench/gpu_speed.py at efc825c) as records of the compare schema."""
    date = LEGACY_DATE
    paths = {k: os.path.join(data_dir, f"gpu_speed_{k}_{date}.json") for k in ("hf", "ours_o1", "ours_o2", "ours_o3", "ours_o4")}
    if not all(os.path.exists(paths[k]) for k in ("hf", "ours_o1")):
        return [], None
    recs, extra = [], {}
    for key, eng in (("ours_o1", "lite-llama"), ("ours_o2", "lite-llama-nograph")):
        if not os.path.exists(paths[key]):
            continue
        d = json.load(open(paths[key]))
        G = d["gen_len"]
        for r in d["results"]:
            B = r["batch"]
            total = {k: v / 1e3 for k, v in r["total_ms"].items()}
            recs.append({
                "model": "llama-3.2-1b", "section": "batch", "case": f"batch:p128_g256:b{B}",
                "label": "p128_g256", "engine": eng, "batch": B, "prompt_lens": [d["prompt_len"]],
                "gen_len": G, "runs": d["runs"], "warmup": d["warmup"],
                "total_s": total, "ttft_ms": r["ttft_ms"],
                "tpot_ms": _flip(r["decode_tokens_per_s"], lambda x, B=B: 1e3 * B / x),
                "step_ms": r.get("step_ms"),
                "throughput_tok_s": _flip(total, lambda x, B=B: B * G / x),
                "decode_tok_s": r["decode_tokens_per_s"], "prefill_tok_s": r.get("prefill_tokens_per_s"),
                "memory": {"peak_device_bytes": r.get("peak_device_bytes"), "weight_bytes": d["weight_bytes"],
                           "kv_bytes": d["kv_bytes"], "activation_bytes": d["activation_bytes"],
                           "accounted_bytes": d["weight_bytes"] + d["kv_bytes"] + d["activation_bytes"]},
                "profile": r.get("profile"), "source": os.path.relpath(paths[key], ROOT),
            })
    hf = json.load(open(paths["hf"]))
    for key, eng in (("hf_eager", "hf_eager"), ("hf_compiled", "hf_static")):
        for r in hf.get(key, []):
            B, G = r["batch"], 256
            recs.append({
                "model": "llama-3.2-1b", "section": "batch", "case": f"batch:p128_g256:b{B}",
                "label": "p128_g256", "engine": eng, "batch": B, "prompt_lens": [128], "gen_len": G,
                "runs": 2, "warmup": 1,
                "total_s": _stat(r["total_s"]), "ttft_ms": _stat(r["ttft_s"] * 1e3),
                "tpot_ms": _stat(1e3 * B / r["decode_tokens_per_s"]),
                "throughput_tok_s": _stat(r["tokens_per_s"]), "decode_tok_s": _stat(r["decode_tokens_per_s"]),
                "memory": {"max_allocated_bytes": r["peak_bytes"]},
                "source": os.path.relpath(paths["hf"], ROOT),
            })
    for key in ("ours_o3", "ours_o4"):
        if os.path.exists(paths[key]):
            extra[key] = json.load(open(paths[key]))
    meta = {
        "label": f"H200 run of {date} (bench/gpu_speed.py, commit efc825c)",
        "device": "NVIDIA H200 (143,771 MiB, 132 SMs), the workplace's nvidia-h200 machine",
        "software": f"PyPI torch {hf.get('torch')}, transformers 5.17.0, nvcc 13.0, sm_90",
        "date": date, "commit": "efc825c",
        "commands": [
            "tests/gpu/device_setup.sh; tests/gpu/run_all.sh build",
            "python3 bench/gpu_speed.py build-gpu/bin/lite-llama $OUT/ours --sections bw,ours --runs 3",
            "python3 bench/gpu_speed.py build-gpu/bin/lite-llama $OUT/hf --sections hf --hf-batches 1,8,64",
        ],
        "method": "lite-llama: `lite-llama bench --load-format dummy` (random weights drawn by lite-llama), "
                  "batch 1/8/64 in one process (KV pool sized for batch 64), warm-up 1, 3 timed runs (2 without "
                  "CUDA graphs), "
                  "median/min/max. HF: `generate` on transformers' own random init of the same config, "
                  "warm-up then 2 runs (median of 2 = mean, no spread recorded); TTFT = time of a "
                  "`generate(max_new_tokens=1)`; TPOT = (time of 256 tokens - TTFT) / 255.",
        "extra": extra,
    }
    return recs, meta


def load_compare(paths):
    recs, pieces = [], []
    for p in paths:
        d = json.load(open(p))
        if d.get("schema") != "lite-llama-compare-hf/1":
            raise SystemExit(f"{p}: not a merged compare_hf.py file")
        for r in d["records"]:
            recs.append(dict(r, source=os.path.relpath(os.path.abspath(p), ROOT)))
        seen = {q.get("file") for q in pieces}
        pieces += [q for q in d.get("pieces", []) if q.get("file") not in seen]
    return recs, pieces


def combine(legacy, compare):
    best = {}
    for r in legacy + compare:  # later (compare) wins
        k = (r["model"], r["engine"], r["case"])
        if r.get("error") and k in best and not best[k].get("error"):
            continue
        best[k] = r
    return list(best.values())


# ----------------------------------------------------------------------------------------------
# Formatting
# ----------------------------------------------------------------------------------------------

def fnum(x, nd=0):
    if x is None:
        return "-"
    if nd == 0:
        return f"{x:,.0f}"
    return f"{x:,.{nd}f}"


def fstat(s, nd=0, spread=True):
    if not s:
        return "-"
    m = fnum(s["median"], nd)
    if spread and s.get("min") is not None and s.get("max") is not None and s["min"] != s["max"]:
        return f"{m} ({fnum(s['min'], nd)}-{fnum(s['max'], nd)})"
    return m


def med(r, key):
    s = r.get(key) if r else None
    return s["median"] if s else None


def ratio(a, b):
    if not (a and b):
        return "-"
    v = a / b
    return f"{v:.1f}x" if v >= 10 else f"{v:.2f}x"


def memory_gib(r, hf_key):
    """lite-llama's device-wide cudaMemGetInfo peak, or HF's figure under `hf_key`, in GiB."""
    if not r or r.get("error"):
        return None
    m = r.get("memory") or {}
    v = m.get("peak_device_bytes") if r["engine"].startswith("lite-llama") else m.get(hf_key)
    return v / GIB if v else None


def peak_gib(r):
    """The engine's own peak memory figure: HF tensors (max_memory_allocated), lite-llama the
    device-wide peak."""
    return memory_gib(r, "max_allocated_bytes")


def device_gib(r):
    """Device-wide figure: lite-llama's peak_device_bytes, HF's total - free after the runs."""
    return memory_gib(r, "device_used_bytes")


def ok(r):
    return r is not None and not r.get("error")


def error_cell(r):
    """A failed case's table cell: cases cut or skipped by a call's time limit were not run."""
    e = str(r.get("error") or "")
    return "not run (time limit)" if e.startswith(("time limit", "skipped")) else "error"


# ----------------------------------------------------------------------------------------------
# Charts
# ----------------------------------------------------------------------------------------------

def charts(recs, out_dir, models, subtitle):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = {}
    batch_models = [m for m in models if any(ok(r) and r["model"] == m and r["section"] == "batch" for r in recs)]
    for key, fname, ylabel, title in (
            ("throughput_tok_s", "chart_throughput_vs_batch.png", "throughput, tokens/s (B x 256 / total time)",
             "Throughput vs batch size (prompt 128, 256 new tokens)"),
            ("tpot_ms", "chart_tpot_vs_batch.png", "time per output token, ms (per sequence)",
             "Per-token latency vs batch size (prompt 128, 256 new tokens)")):
        if not batch_models:
            continue
        n = len(batch_models)
        fig, axes = plt.subplots(1, n, figsize=(max(7.5, 5.2 * n), 4.8), squeeze=False)
        for ax, m in zip(axes[0], batch_models):
            for eng in ENGINE_ORDER:
                pts = sorted((r["batch"], med(r, key)) for r in recs
                             if ok(r) and r["model"] == m and r["section"] == "batch" and r["engine"] == eng
                             and med(r, key))
                if not pts:
                    continue
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker="o", color=COLORS[eng], label=ENGINE_TITLE[eng])
                if eng == "lite-llama-nograph":
                    continue  # its labels would sit on lite-llama's
                up = (eng == "lite-llama") == (key == "throughput_tok_s")  # ours above when it is on top
                for x, y in pts:
                    ax.annotate(fnum(y, 0 if y >= 100 else 1 if y >= 10 else 2), (x, y),
                                textcoords="offset points", xytext=(0, 7 if up else -12), ha="center",
                                fontsize=7, color=COLORS[eng])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.margins(x=0.08, y=0.12)
            xt = sorted({r["batch"] for r in recs if r["model"] == m and r["section"] == "batch"})
            ax.set_xticks(xt)
            ax.set_xticklabels([str(x) for x in xt])
            ax.set_xlabel("batch size")
            ax.set_ylabel(ylabel)
            ax.set_title(MODEL_TITLE.get(m, m))
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"{title}\n{subtitle}", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, fname), dpi=110)
        plt.close(fig)
        made[key] = fname

    # Per-token latency vs generation length, batch 1 (any section; prompt length in the label).
    series = {}
    for r in recs:
        # Seed 004's 3-token inputs are left out: one point per length, prompt 26 or 128.
        if ok(r) and r["batch"] == 1 and med(r, "tpot_ms") and r["prompt_lens"][0] != 3:
            series.setdefault((r["model"], r["engine"]), {})[r["gen_len"]] = (med(r, "tpot_ms"), r["prompt_lens"][0])
    gl_models = [m for m in models if any(len(v) >= 2 for (mm, _), v in series.items() if mm == m)]
    if gl_models:
        n = len(gl_models)
        fig, axes = plt.subplots(1, n, figsize=(max(7.5, 5.2 * n), 4.8), squeeze=False)
        for ax, m in zip(axes[0], gl_models):
            for eng in ENGINE_ORDER:
                pts = sorted(series.get((m, eng), {}).items())
                if len(pts) < 1:
                    continue
                xs = [g for g, _ in pts]
                ys = [v[0] for _, v in pts]
                ax.plot(xs, ys, marker="o", color=COLORS[eng], label=ENGINE_TITLE[eng])
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            xt = sorted({g for (mm, _), v in series.items() if mm == m for g in v})
            ax.set_xticks(xt)
            ax.set_xticklabels([str(x) for x in xt])
            ax.set_xlabel("new tokens (prompt 26 for 50/100, 128 otherwise)")
            ax.set_ylabel("time per output token, ms")
            ax.set_title(MODEL_TITLE.get(m, m) + ", batch 1")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"Per-token latency vs generation length\n{subtitle}", fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "chart_tpot_vs_genlen.png"), dpi=110)
        plt.close(fig)
        made["genlen"] = "chart_tpot_vs_genlen.png"
    return made


# ----------------------------------------------------------------------------------------------
# Tables
# ----------------------------------------------------------------------------------------------

def by_case(recs, model, section):
    cases = {}
    for r in recs:
        if r["model"] == model and r["section"] == section:
            cases.setdefault(r["case"], {})[r["engine"]] = r
    return cases


# Device-to-device copy bandwidth (bytes read + written) measured on each machine kind, with
# where: the ceiling for streaming weights.
COPY_TBS = {"H100": (3.00, "quantization.md, H100 session of 2026-11-22"),
            "H200": (4.26, "gpu.md, H200 session of 2026-11-22")}


def copy_tbs(r):
    dev = str(r.get("backend") or "") + " " + str(r.get("device") or "")
    return next((v for k, v in COPY_TBS.items() if k in dev), (None, None))


def profile_recs(recs, model):
    """lite-llama's batch-sweep records of a model that carry a `bench --profile`, by batch size."""
    return sorted((r for r in recs if r.get("profile") and r["engine"] == "lite-llama" and r["model"] == model
                   and r["section"] == "batch"), key=lambda r: r["batch"])


def profile_shares(recs, models):
    """One sentence from the batch-1 `--profile` records: GEMM's and decode attention's share of the
    profiled step, and attention's time per call (one call a layer)."""
    parts = []
    for m in models:
        r = next((r for r in profile_recs(recs, m) if r["batch"] == 1), None)
        if not r:
            continue
        p = r["profile"]
        fams = {f["family"]: f for f in p["families"]}
        if "gemm" not in fams or "attention decode" not in fams:
            continue
        wall, att = p["wall_ms_per_step"], fams["attention decode"]
        parts.append(f"{MODEL_TITLE.get(m, m)} GEMM {100 * fams['gemm']['ms_per_step'] / wall:.0f}%, "
                     f"attention {100 * att['ms_per_step'] / wall:.0f}% "
                     f"({1000 * att['ms_per_step'] / att['calls_per_step']:.0f} us a layer)")
    if not parts:
        return ""
    return ("Shares of the profiled batch-1 step (eager, CUDA events): " + "; ".join(parts)
            + ". At these short contexts (128-384 keys) decode attention reads well under 1 MB a layer, "
            "so its time is latency, not bandwidth. ")


def goals_section(recs, models, w):
    """Issue 6's goals at batch 1 and 8 (p128, 256 new): >= 3x HF compiled, >= 20x HF eager, peak
    memory no more than HF's, from the batch-sweep records, with the weight streaming rate that
    each speed goal would need (a decode step reads every weight once)."""
    # needs: (TB/s a speed goal needs, copy TB/s); mine_pct: our rate as % of the copy rate;
    # hf_rates: HF compiled's TB/s; eager_ms: HF eager's step times.
    rows, needs, mine_pct, hf_rates, eager_ms = [], [], [], [], []
    for m in models:
        cases = by_case(recs, m, "batch")
        for _, c in sorted(cases.items(), key=lambda kv: case_sort_key(kv[1])):
            ll = c.get("lite-llama")
            if not ok(ll) or ll["batch"] not in (1, 8):
                continue
            he, hs = c.get("hf_eager"), c.get("hf_static")
            t = lambda r: med(r, "throughput_tok_s") if ok(r) else None
            rs, re_ = (t(ll) / t(hs) if t(hs) else None), (t(ll) / t(he) if t(he) else None)
            hf_dev = [device_gib(r) for r in (he, hs) if ok(r) and device_gib(r)]
            ours = device_gib(ll)
            mem = (f"{ours:.2f} / {min(hf_dev):.2f} GiB: " + ("met" if ours <= min(hf_dev) else "**missed**")
                   if ours and hf_dev else "-")
            verdict = lambda x, goal: "-" if x is None else f"{x:.2f}x: " + ("met" if x >= goal else "**missed**")
            wb = (ll.get("memory") or {}).get("weight_bytes")
            cp, _ = copy_tbs(ll)
            rate = lambda tpot_ms: wb / (tpot_ms * 1e-3) / 1e12  # TB/s of weights at that step time
            fmt = lambda tbs: f"{tbs:.2f}" + (f" ({100 * tbs / cp:.0f}%)" if cp else "")
            if ok(he):
                eager_ms.append(med(he, "tpot_ms"))
            if ok(hs) and wb:
                hf_rates.append(rate(med(hs, "tpot_ms")))
            cells = []
            for r, goal in ((hs, 3.0), (he, 20.0)):
                if ok(r) and wb:
                    need = rate(med(r, "tpot_ms") / goal)
                    needs.append((need, cp))
                    cells.append(fmt(need))
                else:
                    cells.append("-")
            mine = fmt(rate(med(ll, "tpot_ms"))) if wb else "-"
            if wb and cp:
                mine_pct.append(100 * rate(med(ll, "tpot_ms")) / cp)
            rows.append(f"| {MODEL_TITLE.get(m, m)} | {ll['batch']} | {verdict(rs, 3.0)} | {verdict(re_, 20.0)} | "
                        f"{cells[0]} / {cells[1]} | {mine} | {mem} |")
    if not rows:
        return
    w("## Goals (batch 1 and 8, prompt 128, 256 new tokens)")
    w("")
    w("A decode step at batch 1-8 reads every weight once, so weight bytes / step time is the rate at "
      "which it streams weights, and the device-to-device copy rate is its ceiling ("
      + "; ".join(f"{k}: {v:.2f} TB/s, {src}" for k, (v, src) in COPY_TBS.items())
      + "). The columns \"needs\" give the rate that each speed goal would take: weight bytes / "
      "(HF's TPOT / 3) and / (HF's TPOT / 20), in TB/s and as a share of the copy rate.")
    w("")
    w("| model | batch | >= 3x HF static cache (compiled) | >= 20x HF eager | needs for 3x compiled / 20x eager, TB/s | lite-llama streams, TB/s | peak memory <= HF's (device-wide: ours / HF) |")
    w("| --- | --- | --- | --- | --- | --- | --- |")
    for x in rows:
        w(x)
    w("")
    over = [n for n, cp in needs if cp and n > cp]
    within = sorted(100 * n / cp for n, cp in needs if cp and n <= cp)
    text = (f"Why the speed goals are missed ([gpu.md](gpu.md) has the profiles): {len(over)} of the "
            f"{len(needs)} speed goals need more than the copy rate, which no bf16 engine can reach on "
            "this GPU (int8/int4 weights change the arithmetic: [quantization.md](quantization.md))")
    if within:
        text += (f"; the other {len(within)} need {within[0]:.0f}-{within[-1]:.0f}% of it, where lite-llama "
                 f"streams {min(mine_pct):.0f}-{max(mine_pct):.0f}%")
    text += (". Most of a lite-llama step is the weight GEMVs, which run below the copy rate (least so "
             "on the 1B model's small matrices); the rest is small kernels (norms, RoPE + KV write, "
             "attention) that CUDA graphs already chain without gaps: see the `--profile` breakdown "
             "below and gpu.md's ncu tables. ")
    text += profile_shares(recs, models)
    if eager_ms:
        text += (f"HF eager is bound by its per-token Python and kernel-launch overhead "
                 f"({min(eager_ms):.0f}-{max(eager_ms):.0f} ms a step on this machine, nearly whatever the "
                 "batch), faster than in the seeds, so 20x it is a bandwidth question, not an overhead one. ")
    if hf_rates:
        text += f"HF compiled already streams weights at {min(hf_rates):.2f}-{max(hf_rates):.2f} TB/s. "
    text += ("Memory: both figures are device-wide (CUDA context included; HF's read after its runs, "
             "with its allocator cache), with lite-llama's KV pool and activation arena sized to the run.")
    w(text)
    w("")


def case_sort_key(case_recs):
    r = next(iter(case_recs.values()))
    return (r["label"], r["batch"])


def engines_present(cases):
    return [e for e in ENGINE_ORDER if any(e in c for c in cases.values())]


def table_throughput(cases, batch_rows=True):
    engs = engines_present(cases)
    hf = [e for e in ("hf_eager", "hf_static") if e in engs]
    head = (["batch" if batch_rows else "case"] + [ENGINE_TITLE[e] + " tok/s" for e in engs]
            + [f"lite-llama vs {ENGINE_TITLE[e].split(' (')[0]}" for e in hf])
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for _, c in sorted(cases.items(), key=lambda kv: case_sort_key(kv[1])):
        r0 = next(iter(c.values()))
        row = [str(r0["batch"]) if batch_rows else case_name(r0)]
        for e in engs:
            r = c.get(e)
            cell = fstat(r.get("throughput_tok_s")) if ok(r) else (error_cell(r) if r else "-")
            row.append(f"**{cell}**" if e == "lite-llama" and ok(r) else cell)
        ll = med(c.get("lite-llama"), "throughput_tok_s") if ok(c.get("lite-llama")) else None
        for e in hf:
            row.append(ratio(ll, med(c.get(e), "throughput_tok_s") if ok(c.get(e)) else None))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def table_latency_memory(cases, batch_rows=True):
    engs = engines_present(cases)
    short = {"lite-llama": "ours", "lite-llama-nograph": "ours, no graphs", "hf_eager": "eager", "hf_static": "compiled"}
    order = " / ".join(short[e] for e in engs)
    head = ["batch" if batch_rows else "case", f"TTFT ms ({order})", f"TPOT ms ({order})",
            f"total s ({order})", f"peak memory GiB ({order})"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for _, c in sorted(cases.items(), key=lambda kv: case_sort_key(kv[1])):
        r0 = next(iter(c.values()))
        row = [str(r0["batch"]) if batch_rows else case_name(r0)]
        for key, nd in (("ttft_ms", 2), ("tpot_ms", 3), ("total_s", 3)):
            row.append(" / ".join(fnum(med(c.get(e), key), nd) if ok(c.get(e)) else "-" for e in engs))
        row.append(" / ".join(fnum(peak_gib(c.get(e)), 2) for e in engs))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def case_name(r):
    lens = r["prompt_lens"]
    L = f"input {lens[0]}" if len(lens) == 1 else f"inputs {','.join(map(str, lens))}"
    label = r["label"]
    if label.startswith("seed002"):
        L = f"seed 002's 4 prompts ({','.join(map(str, lens))} tokens)"
    elif label.startswith("seed000_long"):
        L = f"seed 000's 8 prompts ({','.join(map(str, lens))} tokens)"
    return f"B={r['batch']}, {L}, {r['gen_len']} new"


def table_seed004(cases):
    """Like seed 004's summary: configuration | latency s | throughput | peak memory, per engine."""
    engs = engines_present(cases)
    head = ["configuration"] + sum(([f"{ENGINE_TITLE[e]}: latency s", "tok/s", "peak GiB"] for e in engs), [])
    if "lite-llama" in engs and "hf_eager" in engs:
        head.append("lite-llama vs eager")
    if "lite-llama" in engs and "hf_static" in engs:
        head.append("vs compiled")
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for _, c in sorted(cases.items(), key=lambda kv: (kv[1][next(iter(kv[1]))]["prompt_lens"][0],
                                                      kv[1][next(iter(kv[1]))]["gen_len"])):
        r0 = next(iter(c.values()))
        row = [f"input {r0['prompt_lens'][0]}, {r0['gen_len']} new"]
        for e in engs:
            r = c.get(e)
            row += [fnum(med(r, "total_s"), 3) if ok(r) else "-",
                    fnum(med(r, "throughput_tok_s"), 1) if ok(r) else "-", fnum(peak_gib(r), 2)]
        ll = med(c.get("lite-llama"), "throughput_tok_s") if ok(c.get("lite-llama")) else None
        if "lite-llama" in engs and "hf_eager" in engs:
            row.append(ratio(ll, med(c.get("hf_eager"), "throughput_tok_s") if ok(c.get("hf_eager")) else None))
        if "lite-llama" in engs and "hf_static" in engs:
            row.append(ratio(ll, med(c.get("hf_static"), "throughput_tok_s") if ok(c.get("hf_static")) else None))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def errors_of(recs):
    return [r for r in recs if r.get("error")]


PROFILE_FAMILIES = [("gemm", "GEMM (GEMV at 1 token, cuBLASLt above; 1-2 tokens before cf5f8a9)"),
                    ("attention decode", "attention decode"), ("norm", "RMSNorm / add+RMSNorm"),
                    ("rope+kv write", "RoPE + KV write"), ("activation", "SwiGLU"),
                    (("embedding", "copies", "sampling"), "embedding, copies, argmax")]
# The Qwen3-4B batch-1 column of docs/benchmarks/gpu.md (H200; that run's JSON is not under data/),
# shown beside the legacy H200 Llama-3.2-1B profile only.
QWEN3_GPU_MD = {"gemm": "2.797 (145)", "attention decode": "0.594", "norm": "0.414", "rope+kv write": "0.376",
                "activation": "0.164", "other": "0.032", "gaps": "0.485", "eager": "4.863", "graph": "3.447"}


def profile_table(recs, model, qwen_column=False):
    """GPU ms per decode step by op family, one column per batch size, from the `bench --profile`
    records of one model; the CUDA-graph step of the same records' timed runs below."""
    profs = [(r["batch"], r["profile"], r) for r in profile_recs(recs, model)]
    if not profs:
        return None
    head = ["op family"] + [f"{MODEL_TITLE.get(model, model)} b{b} ms/step" for b, _, _ in profs]
    head += ["Qwen3-4B b1 (gpu.md)"] if qwen_column else []
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    q = lambda k: [QWEN3_GPU_MD[k]] if qwen_column else []
    for fam, title in PROFILE_FAMILIES:
        row = [title]
        for _, p, _ in profs:
            fams = {f["family"]: f for f in p["families"]}
            keys = fam if isinstance(fam, tuple) else (fam,)
            ms = sum(fams[k]["ms_per_step"] for k in keys if k in fams)
            calls = sum(fams[k]["calls_per_step"] for k in keys if k in fams)
            row.append(f"{ms:.3f}" + (f" ({calls:.0f} calls)" if fam == "gemm" else ""))
        lines.append("| " + " | ".join(row + q("other" if isinstance(fam, tuple) else fam)) + " |")
    lines.append("| idle / gaps | " + " | ".join([f"{p['gaps_ms_per_step']:.3f}" for _, p, _ in profs] + q("gaps")) + " |")
    lines.append("| eager step (profiled run) | " + " | ".join([f"{p['wall_ms_per_step']:.3f}" for _, p, _ in profs]
                                                               + q("eager")) + " |")
    lines.append("| CUDA-graph step (timed runs) | " + " | ".join(
        [f"{r['step_ms']['median']:.3f}" if r.get("step_ms") else "-" for _, _, r in profs] + q("graph")) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------

def git(*a):
    try:
        return subprocess.run(["git", "-C", ROOT] + list(a), text=True, capture_output=True).stdout.strip()
    except OSError:
        return ""


def few_runs_section(recs, w):
    """The records shown with fewer than 5 timed runs (the suite's default), listed by case."""
    few = sorted({(r["model"], r["engine"], r["case"], r["runs"]) for r in recs
                  if ok(r) and isinstance(r.get("runs"), int) and r["runs"] < 5})
    if not few:
        return
    w("## Cases with fewer than 5 timed runs")
    w("")
    w("Warm-up then this many timed runs (fewer, to fit a session's device time: an HF eager "
      "1,024-token case takes 5-6 minutes at 5 runs); the tables' median and min-max are over them.")
    w("")
    w("| model | engine | case | timed runs |")
    w("| --- | --- | --- | --- |")
    for m, e, c, n in few:
        w(f"| {m} | {e} | {c} | {n} |")
    w("")


def write_report(recs, legacy_meta, pieces, charts_made, out_dir, argv, legacy=()):
    L = []
    w = L.append
    today = datetime.date.today().isoformat()
    commit = git("rev-parse", "--short", "HEAD")
    w("# lite-llama vs HF transformers: benchmark report")
    w("")
    w(f"Generated by `python3 {' '.join(['bench/report.py'] + [shlex.quote(x) for x in argv])}` on {today} "
      f"at commit `{commit}` (report generator); the measurements' own devices, dates, commits and "
      "commands are listed under [Runs](#runs). Raw data: [data/](data/). The suite that produces "
      "every table below for all four models is `bench/compare_hf.py` (see [How to reproduce]"
      "(#how-to-reproduce)).")
    w("")
    measured = {(r["model"], r["section"]) for r in recs if ok(r)}
    only_legacy = legacy_meta is not None and not pieces
    if only_legacy:
        w(f"> **Status: the Llama-3.2-1B subset measured on {legacy_meta['date']}** (H200, batch 1/8/64, "
          "prompt 128, 256 new tokens, HF eager and static cache). The other models, batch sizes "
          "2/4/16, seed 004's lengths, the seeds' prompt sets and the 1024-token generations are "
          "**not yet measured**: `bench/compare_hf.py` is written for them and was exercised end to "
          "end on the CPU with a tiny checkpoint only.")
        w("")
    w("| model | " + " | ".join(SECTION_SHORT[s] for s in SECTION_TITLE) + " |")
    w("|" + " --- |" * (len(SECTION_TITLE) + 1))
    models = MODELS + sorted({r["model"] for r in recs} - set(MODELS))
    short = {"lite-llama": "lite-llama", "lite-llama-nograph": "no graphs", "hf_eager": "eager",
             "hf_static": "compiled"}

    def coverage(m, s):  # cases measured per engine, e.g. "lite-llama 6/6, eager 6/6, compiled 4/6"
        cases = {r["case"] for r in recs if r["model"] == m and r["section"] == s}
        got = [f"{short[e]} {len({r['case'] for r in recs if r['model'] == m and r['section'] == s and r['engine'] == e and ok(r)})}/{len(cases)}"
               for e in ENGINE_ORDER if e != "lite-llama-nograph" or any(r["engine"] == e for r in recs)]
        return ", ".join(got)

    for m in models:
        w(f"| {MODEL_TITLE.get(m, m)} | " + " | ".join(
            (coverage(m, s) + (f" ({legacy_meta['date']} subset: batch 1/8/64)" if only_legacy and m == "llama-3.2-1b" and s == "batch" else ""))
            if (m, s) in measured else "not yet measured" for s in SECTION_TITLE) + " |")
    w("")
    w("Cases measured per engine and section (a case missing for an engine leaves its cells \"-\""
      + ("; [Cases that failed or were not run](#cases-that-failed-or-were-not-run) lists why)."
         if errors_of(recs) else ")."))
    w("")
    w("Engines: **lite-llama** (`lite-llama bench`, bf16, CUDA graphs for decode), **HF eager** "
      "(`model.generate`, dynamic cache, SDPA attention), **HF static cache (compiled)** "
      "(`generate(cache_implementation=\"static\")`, which transformers compiles with "
      "`torch.compile` on CUDA). Greedy, EOS ignored, bf16, all requests of a batch submitted "
      "together, random weights of the real shapes (`tests/gpu/configs/`).")
    w("")
    w("Metrics: **throughput** = batch x new tokens / total time (median of the timed runs, min-max "
      "in brackets); **TTFT** = start to the first generated token of the batch; **TPOT** = time "
      "per output token of one sequence = decode time / (new tokens - 1) (the seeds' \"per token "
      "latency\" is total time / generated tokens = 1000 / throughput, derivable from the tables); "
      "**peak memory**: lite-llama's `peak_device_bytes` (cudaMemGetInfo total - free, the whole "
      "device, its CUDA context and cuBLAS workspace included), HF's `torch.cuda.max_memory_allocated()` "
      "(tensors only: no context, no allocator cache), so HF's figure is the smaller by construction; "
      "device-wide figures for HF and lite-llama's own accounting are in the per-model notes. "
      "Speed-up = lite-llama throughput / HF throughput.")
    w("")

    for m in models:
        secs = [s for s in SECTION_TITLE if (m, s) in measured]
        if not secs:
            continue
        w(f"## {MODEL_TITLE.get(m, m)}")
        w("")
        if only_legacy and m == "llama-3.2-1b":
            w(f"Measured on {legacy_meta['device']}, {legacy_meta['date']}, commit `{legacy_meta['commit']}`. "
              + legacy_meta["method"])
            w("")
        for s in secs:
            cases = by_case(recs, m, s)
            w(f"### {SECTION_TITLE[s]}")
            w("")
            if s == "seed004":
                w(table_seed004(cases))
            else:
                w(table_throughput(cases, batch_rows=(s != "prompts")))
                w("")
                w(table_latency_memory(cases, batch_rows=(s != "prompts")))
            w("")
            if s == "prompts":
                w("The prompt sets are not tokenized at run time (random weights, no tokenizer): each "
                  "prompt is fed as random token ids of its length under the model family's real "
                  "tokenizer (`bench/prompts/token_counts.json`): seed 002's four prompts "
                  "(`tests/fixtures/seed_prompts.json`) and seed 000's eight long prompts "
                  "(`bench/prompts/seed000_long.json`); HF gets them left-padded with an attention "
                  "mask, lite-llama packed (`bench --prompt-lens`).")
                w("")
        notes = memory_notes(recs, m)
        if notes:
            w(notes)
            w("")
        if m == "llama-3.2-1b" and only_legacy:
            ex = legacy_meta["extra"]
            rows = []
            if "ours_o3" in ex:
                r = ex["ours_o3"]["results"][0]
                rows.append(f"| lite-llama prefill, 8 x 512-token prompts | {fnum(r['prefill_tokens_per_s']['median'])} tok/s "
                            f"({fnum(r['prefill_tokens_per_s']['min'])}-{fnum(r['prefill_tokens_per_s']['max'])}) |")
            if "ours_o4" in ex:
                r = ex["ours_o4"]["results"][0]
                rows.append(f"| lite-llama TTFT, one 128-token prompt (KV pool sized for it) | {r['ttft_ms']['median']:.2f} ms "
                            f"({r['ttft_ms']['min']:.2f}-{r['ttft_ms']['max']:.2f}) |")
            if rows:
                w("| single measurement (same run) | result |")
                w("| --- | --- |")
                for x in rows:
                    w(x)
                w("")

    goals_section(recs, models, w)

    # Charts
    if charts_made:
        w("## Charts")
        w("")
        if "throughput_tok_s" in charts_made:
            w(f"![throughput vs batch]({charts_made['throughput_tok_s']})")
            w("")
        if "tpot_ms" in charts_made:
            w(f"![per-token latency vs batch]({charts_made['tpot_ms']})")
            w("")
        if "genlen" in charts_made:
            w(f"![per-token latency vs generation length]({charts_made['genlen']})")
        else:
            w("Per-token latency vs generation length (`chart_tpot_vs_genlen.png`): not yet drawn; it "
              "needs batch-1 runs at two or more generation lengths (seed 004's 50/100, 256 and 1024 "
              "new tokens from `bench/compare_hf.py`), and the data so far has 256 only.")
        w("")

    # Profile
    w("## Where a lite-llama decode step goes: `lite-llama bench --profile`")
    w("")
    w("`lite-llama bench --profile` adds one eager run per batch size in which every decode op is "
      "timed with CUDA events and summed by family (`tools/cli/cmd_bench.cpp`); the JSON carries it "
      "under `results[].profile` (`bench/compare_hf.py --profile` keeps it in the batch sweep's records).")
    w("")
    tables = [(m, t) for m, t in ((m, profile_table(recs, m)) for m in models) if t]
    for m, t in tables:
        r = profile_recs(recs, m)[0]
        w(f"{MODEL_TITLE.get(m, m)}, prompt 128, 256 new tokens, {r.get('backend') or '?'} "
          f"(piece `{r.get('piece', '?')}`):")
        w("")
        w(t)
        w("")
    have = {m for m, _ in tables}
    if "llama-3.2-1b" not in have and legacy:
        qwen_col = "qwen3-4b" not in have
        w(("No run with the current data carries a profile; this one is from the " if not tables else
           "Llama-3.2-1B has no profile in the current data; this one is from the ")
          + f"{LEGACY_DATE} H200 run (`data/gpu_speed_ours_o1_{LEGACY_DATE}.json`), Llama-3.2-1B shapes, "
          "prompt 128, 256 new tokens"
          + ("; the Qwen3-4B column is copied from "
             "[gpu.md](gpu.md#where-a-decode-step-goes-lite-llama-bench---profile-eager-cuda-events-per-op) "
             "(same H200 session)" if qwen_col else "")
          + ". gpu.md's analysis (GEMV efficiency on small matrices, launch-bound small kernels, "
          "M = 8 on cuBLASLt) applies here too.")
        w("")
        pt = profile_table(list(legacy), "llama-3.2-1b", qwen_column=qwen_col)
        if pt:
            w(pt)
            w("")

    # Errors
    errs = errors_of(recs)
    if errs:
        w("## Cases that failed or were not run")
        w("")
        w("| model | case | engine | error |")
        w("| --- | --- | --- | --- |")
        for r in errs:
            w(f"| {r['model']} | {r['case']} | {r['engine']} | {str(r['error']).splitlines()[0][:160]} |")
        w("")

    few_runs_section(recs, w)

    # Runs
    w("## Runs")
    w("")
    if legacy_meta and (legacy or any(r.get("source", "").startswith("docs/benchmarks/data/gpu_speed_") for r in recs)):
        w(f"- **{legacy_meta['label']}**: {legacy_meta['device']}; {legacy_meta['software']}. Commands "
          "(repo root on the GPU machine):")
        for c in legacy_meta["commands"]:
            w(f"  - `{c}`")
        w(f"  - files: `data/gpu_speed_hf_{LEGACY_DATE}.json`, `data/gpu_speed_ours_o1_{LEGACY_DATE}.json` (graphs), "
          f"`_o2_` (no graphs), `_o3_` (prefill 8 x 512), `_o4_` (TTFT 1 x 128)")
    for p in pieces:
        w(f"- piece `{p.get('file')}`: {p.get('device')}, torch {p.get('torch')}, transformers "
          f"{p.get('transformers')}, commit `{p.get('commit')}`, {p.get('started')} - {p.get('finished')}"
          f"{'' if p.get('complete') else ' (incomplete)'}: "
          + "".join(f"`{k}={v}` " for k, v in sorted((p.get("env") or {}).items()))
          + f"`{p.get('command')}`")
    w("")

    w("## How to reproduce")
    w("")
    w("On a GPU machine with torch, transformers and the CUDA build (`tests/gpu/run_all.sh build`):")
    w("")
    w("```bash")
    w("python3 bench/compare_hf.py --bin build-gpu/bin/lite-llama --out gpu-results/compare_hf   # everything, then this report")
    w("python3 bench/compare_hf.py plan      # the same as calls of < 10 minutes: resumable with --skip-done DIR, repeated until nothing is left")
    w("python3 bench/compare_hf.py merge DIR && python3 bench/report.py --compare DIR/merged.json")
    w("```")
    w("")
    w("Where each call is capped but the machine stays up between calls (the 2026-11-24 runs), the "
      "whole command can run detached (`setsid nohup python3 bench/compare_hf.py ... &`) while later "
      "calls copy its --out folder: every case is saved to its piece file as it finishes, HF's "
      "included, so a machine that goes back mid-run loses only the case in progress.")
    w("")
    w("Accuracy (perplexity of the default model against HF, GPU logit parity): [accuracy.md](accuracy.md).")
    w("")
    path = os.path.join(out_dir, "report.md")
    open(path, "w").write("\n".join(L))
    return path


README_START = "<!-- benchmarks:start (written by bench/report.py) -->"
README_END = "<!-- benchmarks:end -->"


def readme_block(recs, legacy_meta, pieces, charts_made):
    """The README's headline: Llama-3.2-1B batch sweep, lite-llama vs HF eager / compiled."""
    cases = by_case(recs, "llama-3.2-1b", "batch")
    rows, sources = [], set()
    for _, c in sorted(cases.items(), key=lambda kv: case_sort_key(kv[1])):
        ll, he, hs = c.get("lite-llama"), c.get("hf_eager"), c.get("hf_static")
        if not (ok(ll) and (ok(he) or ok(hs))):
            continue
        sources |= {r.get("source") for r in (ll, he, hs) if ok(r)}
        t = lambda r: med(r, "throughput_tok_s") if ok(r) else None
        p = lambda r: fnum(med(r, "tpot_ms"), 2) if ok(r) else "-"
        rows.append(f"| {ll['batch']} | **{fnum(t(ll))}** | {fnum(t(he))} | {fnum(t(hs))} | "
                    f"**{ratio(t(ll), t(he))}** | **{ratio(t(ll), t(hs))}** | {p(ll)} / {p(he)} / {p(hs)} |")
    if not rows:
        return None
    # The device of the rows shown: the legacy H200 run unless a compare file supplied them.
    compare_rows = any(src and src.endswith(".json") and "gpu_speed" not in src for src in sources)
    if pieces and compare_rows:
        where = ", ".join(sorted({p.get("device") for p in pieces if p.get("device")}))
    else:
        where = f"NVIDIA H200, {legacy_meta['date']}, commit `{legacy_meta['commit']}`"
    L = [README_START, "",
         f"Llama-3.2-1B shapes (random weights, bf16), {where}: batches of random 128-token prompts, "
         "256 new tokens each, greedy; throughput = batch x 256 / total time (median of the timed "
         "runs); TPOT = time per output token of one sequence. HF transformers: `generate` eager "
         "(SDPA, dynamic cache) and with `cache_implementation=\"static\"` (compiled by "
         "`torch.compile`).", "",
         "| batch | lite-llama tok/s | HF eager tok/s | HF static cache (compiled) tok/s | vs eager | vs compiled | TPOT ms (lite-llama / eager / compiled) |",
         "| --- | --- | --- | --- | --- | --- | --- |"] + rows + [""]
    if "throughput_tok_s" in charts_made:
        L += [f"![throughput vs batch size](docs/benchmarks/{charts_made['throughput_tok_s']})", ""]
    # The default model's run (other perplexity files score llama.cpp re-quantisations of it).
    ppl = [f for f in sorted(glob.glob(os.path.join(ROOT, "docs", "benchmarks", "data", "perplexity_*.json")))
           if json.load(open(f)).get("model", "").endswith("SmolLM2-135M-Instruct.Q4_1.gguf")]
    if ppl:
        d = json.load(open(ppl[-1]))
        res = d["results"]
        hf = next((v for k, v in res.items() if k.startswith("HF")), None)
        ours = next((v for k, v in res.items() if k.startswith("lite-llama, CPU (default")), None)
        if hf and ours:
            L += [f"Accuracy: perplexity of the default model on a {d['tokens']:,}-token English text "
                  f"(`{d['text']}`), CPU, same tokens: lite-llama **{ours['ppl']:.4f}**, HF transformers "
                  f"(fp32) **{hf['ppl']:.4f}** ({100 * (ours['ppl'] / hf['ppl'] - 1):+.4f}%).", ""]
    L += ["Full tables (TTFT, per-token latency, peak memory, the `--profile` breakdown), the other "
          "models and how to regenerate everything (`bench/compare_hf.py`, `bench/report.py`): "
          "[docs/benchmarks/report.md](docs/benchmarks/report.md); GPU details: "
          "[gpu.md](docs/benchmarks/gpu.md); CPU against llama.cpp: [cpu.md](docs/benchmarks/cpu.md); "
          "perplexity against HF: [accuracy.md](docs/benchmarks/accuracy.md).", "", README_END]
    return "\n".join(L)


def update_readme(path, block):
    text = open(path).read()
    if README_START not in text or README_END not in text:
        return False
    a = text.index(README_START)
    b = text.index(README_END) + len(README_END)
    open(path, "w").write(text[:a] + block + text[b:])
    return True


def memory_notes(recs, m):
    ll = [r for r in recs if ok(r) and r["model"] == m and r["engine"] == "lite-llama"
          and (r.get("memory") or {}).get("accounted_bytes") and r["memory"].get("peak_device_bytes")]
    hf = [r for r in recs if ok(r) and r["model"] == m and r["engine"].startswith("hf_") and (r.get("memory") or {}).get("device_used_bytes")]
    out = []
    if ll:
        r = max(ll, key=lambda r: r["batch"])
        mm = r["memory"]
        out.append(f"lite-llama's own accounting ({r['case']}): weights {mm['weight_bytes'] / GIB:.2f} GiB + "
                   f"KV pool {mm['kv_bytes'] / GIB:.2f} GiB + activations/workspace {mm['activation_bytes'] / GIB:.2f} GiB "
                   f"= {mm['accounted_bytes'] / GIB:.2f} GiB, against a device-wide peak of "
                   f"{mm['peak_device_bytes'] / GIB:.2f} GiB (the rest: CUDA context, cuBLAS, CUDA graphs"
                   + (", and in the 2026-11-22 run the parent Python process's own CUDA context, since "
                      "`bench/gpu_speed.py` had used torch before starting lite-llama; there the KV pool "
                      "was sized for batch 64 at every batch size)" if "gpu_speed" in r.get("source", "") else ")")
                   + ".")
    if hf:
        s = ", ".join(f"{ENGINE_TITLE[r['engine']].split(' (')[0]} b{r['batch']} {r['memory']['device_used_bytes'] / GIB:.2f}"
                      for r in sorted(hf, key=lambda r: (r["engine"], r["batch"])) if r["section"] == "batch")
        if s:
            out.append(f"HF device-wide use after the runs (total - free, GiB; context and allocator cache included): {s}.")
    return " ".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", action="append", default=[])
    ap.add_argument("--legacy", default=os.path.join(ROOT, "docs", "benchmarks", "data"))
    ap.add_argument("--no-legacy", action="store_true")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "docs", "benchmarks"))
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"),
                    help="README whose block between the benchmarks markers gets the headline table")
    ap.add_argument("--no-readme", action="store_true")
    a = ap.parse_args()
    argv = sys.argv[1:]
    legacy, meta = ([], None) if a.no_legacy else load_legacy(a.legacy)
    comp, pieces = load_compare(a.compare)
    # The legacy H200 rows only where no compare file measured that model and section, so that
    # no table mixes devices; its --profile breakdown stays (the profile table says H200).
    covered = {(r["model"], r["section"]) for r in comp if not r.get("error")}
    recs = combine([r for r in legacy if (r["model"], r["section"]) not in covered], comp)
    if not recs:
        raise SystemExit("no data (give --compare FILE or keep the legacy data)")
    os.makedirs(a.out_dir, exist_ok=True)
    devs = sorted({p.get("device") for p in pieces if p.get("device")})
    if pieces:
        subtitle = ", ".join(devs) + f"; bench/compare_hf.py ({len(pieces)} pieces)"
    else:
        subtitle = f"NVIDIA H200, bf16, random weights; measured {meta['date']} (commit {meta['commit']})"
    made = charts(recs, a.out_dir, MODELS + sorted({r["model"] for r in recs} - set(MODELS)), subtitle)
    path = write_report(recs, meta, pieces, made, a.out_dir, argv, legacy)
    print("wrote", os.path.relpath(path, ROOT), "and", ", ".join(made.values()) or "no charts")
    # The README's links point into docs/benchmarks: only a report written there updates it.
    default_dir = os.path.realpath(os.path.join(ROOT, "docs", "benchmarks"))
    if not a.no_readme and os.path.exists(a.readme) and os.path.realpath(a.out_dir) == default_dir:
        block = readme_block(recs, meta, pieces, made)
        if block and update_readme(a.readme, block):
            print("updated the benchmarks block of", os.path.relpath(a.readme, ROOT))


if __name__ == "__main__":
    main()
