#!/usr/bin/env python3
"""Renders docs/benchmarks/report.md, its PNG charts and the README's benchmarks block.

Data: the merged bench/compare_hf.py files that the manifest docs/benchmarks/data/report_inputs.json
lists (a later file wins for the same model, engine and case) and the other inputs it names.
Text: the blocks of bench/templates/report.md.tmpl. This file only computes tables and values.

usage: python3 bench/report.py [--inputs MANIFEST] [--compare MERGED.json ...] [--out-dir DIR]
                               [--no-charts] [--no-readme] [--check]
  --compare  render these merged files instead of the manifest's list (one run's report)
  --check    write nothing; exit 1 where report.md or the README block differ from the rendering
Charts need matplotlib; without it (or with --no-charts) the PNGs already in --out-dir are kept.
"""
import argparse
import json
import os
import re
import string
import sys

import charts
from pieces import SCHEMA

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DOCS = os.path.join(ROOT, "docs", "benchmarks")
MANIFEST = os.path.join(DOCS, "data", "report_inputs.json")
TEMPLATE = os.path.join(HERE, "templates", "report.md.tmpl")
README = os.path.join(ROOT, "README.md")
README_START = "<!-- benchmarks:start (written by bench/report.py) -->"
README_END = "<!-- benchmarks:end -->"
SECTIONS = {"batch": "batch sweep (p128, 256 new)", "seed004": "seed 004 lengths",
            "prompts": "seed prompt sets", "long": "1024 new tokens"}
DEFAULT_RUNS = 5  # compare_hf.py's --runs: fewer is listed
HEADLINE_MODEL = "llama-3.2-1b"  # the README's table
PROFILE_FAMILIES = [("gemm", "GEMM (GEMV at 1 token, cuBLASLt above)"),
                    ("attention decode", "attention decode"), ("norm", "RMSNorm / add+RMSNorm"),
                    ("rope+kv write", "RoPE + KV write"), ("activation", "SwiGLU"),
                    (("embedding", "copies", "sampling"), "embedding, copies, argmax")]
GIB = float(1 << 30)


class Template:
    """The named blocks of the template file, filled with string.Template.substitute (a value
    the block names but the caller does not give is an error)."""

    def __init__(self, path):
        blocks, name = {}, None
        for line in open(path).read().splitlines(keepends=True):
            m = re.fullmatch(r"<!-- block (\w+) -->\n?", line)
            if m:
                name = m.group(1)
                blocks[name] = ""
            elif name:
                blocks[name] += line
        self.blocks = {k: string.Template(v.strip("\n")) for k, v in blocks.items()}

    def fill(self, name, **values):
        return self.blocks[name].substitute(values)


def load_records(paths, engines):
    """The records of the given engines from merged files, the later file winning a (model,
    engine, case) unless its record is an error and the earlier one is not; the same for the
    records that carry a --profile breakdown, so that a later sweep without one keeps the last
    profile (each tagged with its file's index); and the pieces' metas by file name."""
    best, profiled, metas = {}, {}, {}
    for i, p in enumerate(paths):
        d = json.load(open(p))
        if d.get("schema") != SCHEMA or "pieces" not in d:
            raise SystemExit(f"{p}: not a merged {SCHEMA} file")
        for m in d["pieces"]:
            metas.setdefault(m.get("file"), m)
        for r in d["records"]:
            k = (r["model"], r["engine"], r["case"])
            if r["engine"] not in engines or (r.get("error") and k in best and not best[k].get("error")):
                continue
            best[k] = dict(r, source=os.path.relpath(os.path.abspath(p), ROOT))
            if r.get("profile") and not r.get("error"):
                profiled[k] = dict(best[k], file_index=i)
    return list(best.values()), list(profiled.values()), metas


# ----------------------------------------------------------------------------------------------
# Formatting
# ----------------------------------------------------------------------------------------------

def fnum(x, nd=0):
    return "-" if x is None else f"{x:,.{nd}f}"


def fstat(s, nd=0):
    if not s:
        return "-"
    m = fnum(s["median"], nd)
    if s.get("min") is not None and s.get("max") is not None and s["min"] != s["max"]:
        return f"{m} ({fnum(s['min'], nd)}-{fnum(s['max'], nd)})"
    return m


def ok(r):
    return r is not None and not r.get("error")


def med(r, key):
    s = r.get(key) if ok(r) else None
    return s["median"] if s else None


def ratio(a, b):
    if not (a and b):
        return "-"
    v = a / b
    return f"{v:.1f}x" if v >= 10 else f"{v:.2f}x"


def span(values, fmt, unit=""):
    """'lo-hi' of the values ('-' for none)."""
    v = sorted(values)
    return f"{fmt.format(v[0])}-{fmt.format(v[-1])}{unit}" if v else "-"


def memory_gib(r, hf_key):
    """lite-llama's device-wide cudaMemGetInfo peak, or HF's figure under `hf_key`, in GiB."""
    if not ok(r):
        return None
    m = r.get("memory") or {}
    v = m.get("peak_device_bytes") if r["engine"] == "lite-llama" else m.get(hf_key)
    return v / GIB if v else None


def peak_gib(r):  # the tables' figure: HF's tensors (max_memory_allocated)
    return memory_gib(r, "max_allocated_bytes")


def device_gib(r):  # the goals' figure: HF's total - free after its runs
    return memory_gib(r, "device_used_bytes")


def table(head, rows):
    return "\n".join(["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
                     + ["| " + " | ".join(row) + " |" for row in rows])


def case_name(r):
    lens = r["prompt_lens"]
    what = f"input {lens[0]}" if len(lens) == 1 else f"inputs {','.join(map(str, lens))}"
    if r["label"].startswith("seed002"):
        what = f"seed 002's 4 prompts ({','.join(map(str, lens))} tokens)"
    elif r["label"].startswith("seed000_long"):
        what = f"seed 000's 8 prompts ({','.join(map(str, lens))} tokens)"
    return f"B={r['batch']}, {what}, {r['gen_len']} new"


def first(case):
    return next(iter(case.values()))


# ----------------------------------------------------------------------------------------------
# The report
# ----------------------------------------------------------------------------------------------

class Report:
    def __init__(self, manifest, tpl, compare=None):
        self.man, self.tpl = manifest, tpl
        data_dir = os.path.dirname(os.path.abspath(manifest["_path"]))
        paths = compare or [os.path.join(data_dir, f) for f in manifest["compare"]]
        self.engines = list(manifest["engines"])
        self.recs, self.profiled, self.metas = load_records(paths, self.engines)
        if not self.recs:
            raise SystemExit("no records to render")
        names = manifest["models"]
        self.models = list(names) + sorted({r["model"] for r in self.recs} - set(names))
        self.perplexity = manifest.get("perplexity") and os.path.join(data_dir, manifest["perplexity"])

    def title(self, engine):
        return self.man["engines"][engine][0]

    def short(self, engine):
        return self.man["engines"][engine][1]

    def model_title(self, m):
        return self.man["models"].get(m, m)

    def meta(self, r):
        return self.metas.get(r.get("piece"), {})

    def cases(self, model, section):
        """{case id: {engine: record}}, in the order of the tables' rows."""
        cases = {}
        for r in self.recs:
            if r["model"] == model and r["section"] == section:
                cases.setdefault(r["case"], {})[r["engine"]] = r
        if section == "seed004":
            key = lambda c: (first(c)["prompt_lens"][0], first(c)["gen_len"])
        else:
            key = lambda c: (first(c)["label"], first(c)["batch"])
        return dict(sorted(cases.items(), key=lambda kv: key(kv[1])))

    def present(self, cases):
        return [e for e in self.engines if any(e in c for c in cases.values())]

    def measured(self, recs):
        """Device, and per engine the commits and dates of the runs behind these records."""
        parts = []
        for e in self.engines:
            metas = [self.meta(r) for r in recs if ok(r) and r["engine"] == e]
            if not metas:
                continue
            start = {}
            for m in metas:
                c = m.get("commit") or "?"
                start[c] = min(start.get(c, "~"), m.get("started") or "")
            parts.append(self.tpl.fill(
                "measured_engine", engine=self.title(e),
                commits=", ".join(f"`{c}`" for c in sorted(start, key=start.get)),
                dates=", ".join(sorted({(m.get("started") or "?")[:10] for m in metas}))))
        devices = sorted({self.meta(r).get("device") or r.get("backend") or "?" for r in recs if ok(r)})
        return self.tpl.fill("measured", devices=", ".join(devices), engines="; ".join(parts))

    # Tables ---------------------------------------------------------------------------------

    def coverage(self):
        rows = []
        for m in self.models:
            row = [self.model_title(m)]
            for s in SECTIONS:
                recs = [r for r in self.recs if r["model"] == m and r["section"] == s]
                n = len({r["case"] for r in recs})
                got = [f"{self.short(e)} {len({r['case'] for r in recs if r['engine'] == e and ok(r)})}/{n}"
                       for e in self.engines]
                row.append(", ".join(got) if any(ok(r) for r in recs) else "not measured")
            rows.append(row)
        return table(["model"] + list(SECTIONS.values()), rows)

    def throughput(self, cases, batch_rows):
        engs = self.present(cases)
        hf = [e for e in engs if e != "lite-llama"]
        head = ([("batch" if batch_rows else "case")] + [self.title(e) + " tok/s" for e in engs]
                + [f"lite-llama vs {self.title(e).split(' (')[0]}" for e in hf])
        rows = []
        for c in cases.values():
            r0 = first(c)
            row = [str(r0["batch"]) if batch_rows else case_name(r0)]
            for e in engs:
                r = c.get(e)
                cell = fstat(r.get("throughput_tok_s")) if ok(r) else (error_cell(r) if r else "-")
                row.append(f"**{cell}**" if e == "lite-llama" and ok(r) else cell)
            ll = med(c.get("lite-llama"), "throughput_tok_s")
            row += [ratio(ll, med(c.get(e), "throughput_tok_s")) for e in hf]
            rows.append(row)
        return table(head, rows)

    def latency(self, cases, batch_rows):
        engs = self.present(cases)
        order = " / ".join("ours" if e == "lite-llama" else self.short(e) for e in engs)
        head = ["batch" if batch_rows else "case", f"TTFT ms ({order})", f"TPOT ms ({order})",
                f"total s ({order})", f"peak memory GiB ({order})"]
        rows = []
        for c in cases.values():
            r0 = first(c)
            row = [str(r0["batch"]) if batch_rows else case_name(r0)]
            for key, nd in (("ttft_ms", 2), ("tpot_ms", 3), ("total_s", 3)):
                row.append(" / ".join(fnum(med(c.get(e), key), nd) if ok(c.get(e)) else "-" for e in engs))
            row.append(" / ".join(fnum(peak_gib(c.get(e)), 2) for e in engs))
            rows.append(row)
        return table(head, rows)

    def seed004(self, cases):
        """Seed 004's layout: latency, throughput and peak memory per engine, per configuration."""
        engs = self.present(cases)
        hf = [e for e in engs if e != "lite-llama"] if "lite-llama" in engs else []
        head = ["configuration"] + sum(([f"{self.title(e)}: latency s", "tok/s", "peak GiB"] for e in engs), [])
        head += [("lite-llama vs " if i == 0 else "vs ") + self.short(e) for i, e in enumerate(hf)]
        rows = []
        for c in cases.values():
            r0 = first(c)
            row = [f"input {r0['prompt_lens'][0]}, {r0['gen_len']} new"]
            for e in engs:
                r = c.get(e)
                row += [fnum(med(r, "total_s"), 3), fnum(med(r, "throughput_tok_s"), 1), fnum(peak_gib(r), 2)]
            ll = med(c.get("lite-llama"), "throughput_tok_s")
            row += [ratio(ll, med(c.get(e), "throughput_tok_s")) for e in hf]
            rows.append(row)
        return table(head, rows)

    def memory_notes(self, m):
        ll = [r for r in self.recs if ok(r) and r["model"] == m and r["engine"] == "lite-llama"
              and (r.get("memory") or {}).get("accounted_bytes") and r["memory"].get("peak_device_bytes")]
        hf = sorted((r for r in self.recs if ok(r) and r["model"] == m and r["engine"] != "lite-llama"
                     and r["section"] == "batch" and (r.get("memory") or {}).get("device_used_bytes")),
                    key=lambda r: (r["engine"], r["batch"]))
        out = []
        if ll:
            r = max(ll, key=lambda r: (r["batch"], r["section"] == "batch"))
            g = {k: f"{r['memory'][k + '_bytes'] / GIB:.2f}" for k in ("weight", "kv", "activation", "accounted", "peak_device")}
            out.append(self.tpl.fill("memory_lite", case=r["case"], weights=g["weight"], kv=g["kv"],
                                     activations=g["activation"], total=g["accounted"], peak=g["peak_device"]))
        if hf:
            out.append(self.tpl.fill("memory_hf", list=", ".join(
                f"{self.title(r['engine']).split(' (')[0]} b{r['batch']} {r['memory']['device_used_bytes'] / GIB:.2f}"
                for r in hf)))
        return " ".join(out)

    def model_section(self, m):
        secs = []
        for s in SECTIONS:
            cases = self.cases(m, s)
            recs = [r for c in cases.values() for r in c.values()]
            if not any(ok(r) for r in recs):
                continue
            batch_rows = s != "prompts"
            secs.append(self.tpl.fill(
                "section_" + s, measured=self.measured(recs), seed004=self.seed004(cases) if s == "seed004" else "",
                throughput=self.throughput(cases, batch_rows), latency=self.latency(cases, batch_rows)))
        if not secs:
            return ""
        return self.tpl.fill("model", title=self.model_title(m), sections="\n\n".join(secs),
                             memory=self.memory_notes(m))

    # Goals ----------------------------------------------------------------------------------

    def copy_rate(self, r):
        """(TB/s, entry) of the copy bandwidth of the record's GPU kind, from the manifest."""
        dev = f"{r.get('backend') or ''} {self.meta(r).get('device') or ''}"
        e = next((e for e in self.man.get("copy_bandwidth", []) if e["device"] in dev), None)
        return (e["tb_s"], e) if e else (None, None)

    def goals(self):
        """Issue 6's goals from the batch sweeps: speed-ups over HF, the weight streaming rate
        that each speed goal would need (a decode step reads every weight once), peak memory."""
        g = self.man["goals"]
        rows, needs, mine, hf_rates, eager_ms, rates_used, shares = [], [], [], [], [], [], []
        verdict = lambda x, goal: "-" if x is None else f"{x:.2f}x: " + ("met" if x >= goal else "**missed**")
        for m in self.models:
            for c in self.cases(m, "batch").values():
                ll, he, hs = c.get("lite-llama"), c.get("hf_eager"), c.get("hf_static")
                if not ok(ll) or ll["batch"] not in g["batches"]:
                    continue
                t = med(ll, "throughput_tok_s")
                wb = (ll.get("memory") or {}).get("weight_bytes")
                cp, entry = self.copy_rate(ll)
                if entry and entry not in rates_used:
                    rates_used.append(entry)
                rate = lambda tpot_ms: wb / (tpot_ms * 1e-3) / 1e12  # TB/s of weights at that step time
                fmt = lambda tbs: f"{tbs:.2f}" + (f" ({100 * tbs / cp:.0f}%)" if cp else "")
                if ok(he):
                    eager_ms.append(med(he, "tpot_ms"))
                if ok(hs) and wb:
                    hf_rates.append(rate(med(hs, "tpot_ms")))
                cells = []
                for r, goal in ((hs, g["vs_hf_static"]), (he, g["vs_hf_eager"])):
                    if ok(r) and wb:
                        needs.append((rate(med(r, "tpot_ms") / goal), cp))
                        cells.append(fmt(needs[-1][0]))
                    else:
                        cells.append("-")
                if wb and cp:
                    mine.append(100 * rate(med(ll, "tpot_ms")) / cp)
                hf_dev = [device_gib(r) for r in (he, hs) if device_gib(r)]
                ours = device_gib(ll)
                mem = (f"{ours:.2f} / {min(hf_dev):.2f} GiB: " + ("met" if ours <= min(hf_dev) else "**missed**")
                       if ours and hf_dev else "-")
                rows.append([self.model_title(m), str(ll["batch"]),
                             verdict(t / med(hs, "throughput_tok_s") if ok(hs) else None, g["vs_hf_static"]),
                             verdict(t / med(he, "throughput_tok_s") if ok(he) else None, g["vs_hf_eager"]),
                             f"{cells[0]} / {cells[1]}", fmt(rate(med(ll, "tpot_ms"))) if wb else "-", mem])
            shares += self.profile_shares(m)
        if not rows:
            return ""
        head = ["model", "batch", f">= {g['vs_hf_static']}x {self.title('hf_static')}", f">= {g['vs_hf_eager']}x HF eager",
                f"needs for {g['vs_hf_static']}x compiled / {g['vs_hf_eager']}x eager, TB/s",
                "lite-llama streams, TB/s", "peak memory <= HF's (device-wide: ours / HF)"]
        over = [n for n, cp in needs if cp and n > cp]
        within = [100 * n / cp for n, cp in needs if cp and n <= cp]
        return self.tpl.fill(
            "goals", batches=" and ".join(map(str, g["batches"])), vs_static=g["vs_hf_static"],
            vs_eager=g["vs_hf_eager"], table=table(head, rows),
            copy_rates="; ".join(self.tpl.fill("copy_rate", device=e["device"], tb_s=f"{e['tb_s']:.2f}",
                                               source=e["source"]) for e in rates_used),
            n_over=len(over), n_goals=len(needs), n_within=len(within), within=span(within, "{:.0f}", "%"),
            streams=span(mine, "{:.0f}", "%"), shares="; ".join(shares) or "-",
            eager_ms=span(eager_ms, "{:.0f}"), hf_rates=span(hf_rates, "{:.2f}"))

    # Profiles -------------------------------------------------------------------------------

    def profile_recs(self, model):
        """The model's profiled batch records from the last file that has any: one run's table."""
        recs = [r for r in self.profiled
                if r["engine"] == "lite-llama" and r["model"] == model and r["section"] == "batch"]
        last = max((r["file_index"] for r in recs), default=None)
        return sorted((r for r in recs if r["file_index"] == last), key=lambda r: r["batch"])

    def profile_shares(self, model):
        """GEMM's and decode attention's share of the profiled batch-1 step, attention per layer."""
        r = next((r for r in self.profile_recs(model) if r["batch"] == 1), None)
        fams = {f["family"]: f for f in r["profile"]["families"]} if r else {}
        if "gemm" not in fams or "attention decode" not in fams:
            return []
        wall, att = r["profile"]["wall_ms_per_step"], fams["attention decode"]
        return [self.tpl.fill("profile_share", model=self.model_title(model),
                              gemm=f"{100 * fams['gemm']['ms_per_step'] / wall:.0f}",
                              attention=f"{100 * att['ms_per_step'] / wall:.0f}",
                              us_per_layer=f"{1000 * att['ms_per_step'] / att['calls_per_step']:.0f}")]

    def profile_table(self, model):
        """GPU ms per decode step by op family, one column per batch size; below, the CUDA-graph
        step of the same records' timed runs."""
        recs = self.profile_recs(model)
        if not recs:
            return None
        head = ["op family"] + [f"{self.model_title(model)} b{r['batch']} ms/step" for r in recs]
        rows = []
        for fam, label in PROFILE_FAMILIES:
            row = [label]
            for r in recs:
                fams = {f["family"]: f for f in r["profile"]["families"]}
                keys = [k for k in (fam if isinstance(fam, tuple) else (fam,)) if k in fams]
                ms = sum(fams[k]["ms_per_step"] for k in keys)
                calls = sum(fams[k]["calls_per_step"] for k in keys)
                row.append(f"{ms:.3f}" + (f" ({calls:.0f} calls)" if fam == "gemm" else ""))
            rows.append(row)
        rows.append(["idle / gaps"] + [f"{r['profile']['gaps_ms_per_step']:.3f}" for r in recs])
        rows.append(["eager step (profiled run)"] + [f"{r['profile']['wall_ms_per_step']:.3f}" for r in recs])
        rows.append(["CUDA-graph step (timed runs)"]
                    + [f"{r['step_ms']['median']:.3f}" if r.get("step_ms") else "-" for r in recs])
        return table(head, rows)

    def profiles(self):
        parts = []
        for m in self.models:
            t = self.profile_table(m)
            if not t:
                continue
            recs = self.profile_recs(m)
            metas = [self.meta(r) for r in recs]
            parts.append(self.tpl.fill(
                "profile_table", model=self.model_title(m), table=t,
                backend=", ".join(sorted({r.get("backend") or "?" for r in recs})),
                commit=", ".join(sorted({m.get("commit") or "?" for m in metas})),
                date=", ".join(sorted({(m.get("started") or "?")[:10] for m in metas})),
                piece=", ".join(sorted({r.get("piece") or "?" for r in recs}))))
        return self.tpl.fill("profiles", tables="\n\n".join(parts)) if parts else ""

    # Lists ----------------------------------------------------------------------------------

    def failed(self):
        rows = [[r["model"], r["case"], r["engine"], str(r["error"]).splitlines()[0][:160]]
                for r in self.recs if r.get("error")]
        return self.tpl.fill("failed", table=table(["model", "case", "engine", "error"], rows)) if rows else ""

    def few_runs(self):
        few = sorted({(r["model"], r["engine"], r["case"], str(r["runs"])) for r in self.recs
                      if ok(r) and isinstance(r.get("runs"), int) and r["runs"] < DEFAULT_RUNS})
        if not few:
            return ""
        return self.tpl.fill("few_runs", runs=DEFAULT_RUNS,
                             table=table(["model", "engine", "case", "timed runs"], few))

    def runs(self):
        files = {r.get("piece") for r in self.recs + self.profiled}
        metas = sorted((m for f, m in self.metas.items() if f in files), key=lambda m: m.get("started") or "")
        return "\n".join(self.tpl.fill(
            "run", file=m.get("file"), device=m.get("device"), torch=m.get("torch"),
            transformers=m.get("transformers"), commit=m.get("commit"), started=m.get("started"),
            finished=m.get("finished"), incomplete="" if m.get("complete") else " (incomplete)",
            env="".join(f"`{k}={v}` " for k, v in sorted((m.get("env") or {}).items())),
            command=m.get("command")) for m in metas)

    # Charts -------------------------------------------------------------------------------

    def chart_series(self):
        """{chart key: {model: {engine: [(x, y), ...]}}} for bench/charts.py: throughput and TPOT
        against batch size (batch sweep), TPOT against new tokens at batch 1 (every section but
        seed 004's 3-token prompts, so one point per length) where a model has two lengths."""
        out = {}
        for key in ("throughput_tok_s", "tpot_ms"):
            for m in self.models:
                for e in self.engines:
                    pts = [(r["batch"], med(r, key)) for r in self.recs if r["model"] == m and r["engine"] == e
                           and r["section"] == "batch" and med(r, key)]
                    if pts:
                        out.setdefault(key, {}).setdefault(m, {})[e] = pts
        for m in self.models:
            lines = {}
            for e in self.engines:
                pts = {r["gen_len"]: med(r, "tpot_ms") for r in self.recs if r["model"] == m and r["engine"] == e
                       and r["batch"] == 1 and r["prompt_lens"][0] != 3 and med(r, "tpot_ms")}
                if pts:
                    lines[e] = sorted(pts.items())
            if any(len(v) >= 2 for v in lines.values()):
                out.setdefault("genlen", {})[m] = lines
        return out

    # Documents ------------------------------------------------------------------------------

    def render(self, charts):
        images = "\n\n".join(f"![{alt}]({fname})" for _, fname, alt in charts)
        text = self.tpl.fill(
            "report", coverage=self.coverage(), models="\n\n".join(self.model_section(m) for m in self.models),
            goals=self.goals(), charts=self.tpl.fill("charts", images=images) if charts else "",
            profiles=self.profiles(), failed=self.failed(), few_runs=self.few_runs(), runs=self.runs())
        return re.sub(r"\n{3,}", "\n\n", text) + "\n"

    def readme_block(self, charts):
        """The headline: the README model's batch sweep, lite-llama against HF eager / compiled."""
        rows, shown = [], []
        for c in self.cases(HEADLINE_MODEL, "batch").values():
            ll, he, hs = c.get("lite-llama"), c.get("hf_eager"), c.get("hf_static")
            if not (ok(ll) and (ok(he) or ok(hs))):
                continue
            shown += [r for r in (ll, he, hs) if ok(r)]
            t = lambda r: med(r, "throughput_tok_s")
            p = lambda r: fnum(med(r, "tpot_ms"), 2) if ok(r) else "-"
            rows.append([str(ll["batch"]), f"**{fnum(t(ll))}**", fnum(t(he)), fnum(t(hs)),
                         f"**{ratio(t(ll), t(he))}**", f"**{ratio(t(ll), t(hs))}**", f"{p(ll)} / {p(he)} / {p(hs)}"])
        if not rows:
            return None
        head = ["batch", "lite-llama tok/s", "HF eager tok/s", f"{self.title('hf_static')} tok/s", "vs eager",
                "vs compiled", "TPOT ms (lite-llama / eager / compiled)"]
        chart = next((f"![throughput vs batch size](docs/benchmarks/{f})" for k, f, _ in charts
                      if k == "throughput_tok_s"), "")
        text = self.tpl.fill("readme", model=self.model_title(HEADLINE_MODEL), measured=self.measured(shown),
                             table=table(head, rows), chart=chart, accuracy=self.accuracy())
        return re.sub(r"\n{3,}", "\n\n", text)

    def accuracy(self):
        if not self.perplexity:
            return ""
        d = json.load(open(self.perplexity))
        res = d["results"]
        hf = next((v for k, v in res.items() if k.startswith("HF")), None)
        ours = next((v for k, v in res.items() if k.startswith("lite-llama, CPU (default")), None)
        if not (hf and ours):
            return ""
        return self.tpl.fill("readme_accuracy", tokens=f"{d['tokens']:,}", text=d["text"], date=d["date"],
                             commit=d["commit"], ours=f"{ours['ppl']:.4f}", hf=f"{hf['ppl']:.4f}",
                             diff=f"{100 * (ours['ppl'] / hf['ppl'] - 1):+.4f}%")


def error_cell(r):
    """A failed case's cell: cases cut or skipped by a call's time limit were not run."""
    e = str(r.get("error") or "")
    return "not run (time limit)" if e.startswith(("time limit", "skipped")) else "error"


def load_manifest(path):
    d = json.load(open(path))
    d["_path"] = path
    return d


def replace_block(text, block):
    if README_START not in text or README_END not in text:
        return None
    a, b = text.index(README_START), text.index(README_END) + len(README_END)
    return text[:a] + block + text[b:]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", default=MANIFEST, help="the data manifest (default %(default)s)")
    ap.add_argument("--compare", action="append", default=[], help="a merged compare_hf.py file (repeatable)")
    ap.add_argument("--out-dir", default=DOCS)
    ap.add_argument("--no-charts", action="store_true")
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    rep = Report(load_manifest(a.inputs), Template(TEMPLATE), [os.path.abspath(p) for p in a.compare] or None)
    series = rep.chart_series()
    plan = charts.files(series)
    text = rep.render(plan)
    path = os.path.join(a.out_dir, "report.md")
    # The README's block describes the committed report: only a manifest render into docs/benchmarks.
    readme = None
    if not (a.no_readme or a.compare) and os.path.realpath(a.out_dir) == os.path.realpath(DOCS):
        block = rep.readme_block(plan)
        readme = block and replace_block(open(README).read(), block)
    if a.check:
        stale = [p for p, want in ((path, text), (README, readme))
                 if want is not None and (not os.path.exists(p) or open(p).read() != want)]
        for p in stale:
            print(f"{os.path.relpath(p, ROOT)}: differs from `python3 bench/report.py`'s rendering")
        sys.exit(1 if stale else 0)
    os.makedirs(a.out_dir, exist_ok=True)
    open(path, "w").write(text)
    print("wrote", os.path.relpath(path, ROOT))
    if not a.no_charts:
        devices = sorted({rep.meta(r).get("device") or "?" for r in rep.recs if ok(r)})
        print(charts.draw(series, a.out_dir, ", ".join(devices) + "; bf16, random weights; bench/compare_hf.py",
                          rep.model_title, rep.title))
    if readme is not None:
        open(README, "w").write(readme)
        print("updated the benchmarks block of", os.path.relpath(README, ROOT))


if __name__ == "__main__":
    main()
