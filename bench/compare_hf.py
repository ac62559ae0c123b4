#!/usr/bin/env python3
"""lite-llama against HF transformers on the GPU: the suite behind docs/benchmarks/report.md.

    python3 bench/compare_hf.py --bin build-gpu/bin/lite-llama --out DIR

runs every model, section and engine below, writes one piece file (piece_*.json) per call into
DIR, merges every piece there into DIR/merged.json (`merge`, the newest result of a case
winning) and renders a report of it into DIR/report (bench/report.py). A call on the GPU machine
may last at most 10 minutes, so the work is cut with --models, --sections, --engines and
--cases, and made resumable: with --skip-done DIR (and the merged files of earlier calls on the
same GPU kind), a call runs only what no earlier call finished, and an HF case that would not
finish before --time-limit-s is skipped rather than cut off. Every case is saved to the piece
file as it finishes.

Models (tests/gpu/configs/*.json, real shapes, random weights): llama-3.2-1b, llama-3.2-3b,
qwen2.5-3b, qwen3-4b. transformers builds each with its own random init (seed 0, bf16) and saves
it as safetensors under --weights-dir; lite-llama loads that directory and HF reloads it, so
both engines run identical weights.

Engines:
  lite-llama  `lite-llama bench -m DIR --device cuda --batch B (--prompt-len L | --prompt-lens ..)
              --gen-len G --runs R --warmup W --json F`, one process per case so that the KV pool
              (sized to the run) and the peak memory belong to that batch size;
  hf_eager    model.generate() with the default dynamic cache and SDPA attention;
  hf_static   model.generate(cache_implementation="static"): transformers compiles the decode
              step with torch.compile (inductor, CUDA graphs) on CUDA devices.
  All greedy, EOS ignored (exactly G new tokens), bf16, batch of B requests submitted together.
  Also selectable (docs/benchmarks/quantization.md): lite-llama-int8|int4|fp8 (`--quantize`)
  and hf_eager_fp16.

Sections (case = batch size x prompt lengths x new tokens):
  batch    random prompts of 128 tokens, 256 new tokens, batch 1, 2, 4, 8, 16, 64;
  seed004  seed 004's Qwen3-4B table: batch 1, input 3 and 26 tokens, 50 and 100 new tokens;
  prompts  the seeds' prompt sets: seed 002's four prompts (tests/fixtures/seed_prompts.json,
           batch 4) and seed 000's eight long prompts (bench/prompts/seed000_long.json, batch 8),
           256 and 1024 new tokens;
  long     1024-token generations of 128-token random prompts, batch 1, 8, 64.
The models have random weights and no tokenizer, so a text prompt is fed as random token ids of
its length under the model family's real tokenizer (bench/prompts/token_counts.json); HF gets
them left-padded with an attention mask, lite-llama packed (`--prompt-lens`).

Every case: warm-up (--warmup, default 1) then --runs (default 5) timed runs; median, min, max.
Metrics: total time, throughput (B x new tokens / total time), TTFT (start to the first
generated token of the batch), TPOT (time per output token of one sequence = decode time /
(new tokens - 1)), decode and prefill tokens/s, peak GPU memory:
  lite-llama  peak_device_bytes from its bench JSON (cudaMemGetInfo, total - free, the whole
              device; this process never opens CUDA and HF runs in child processes that have
              exited by then) and its own accounting (weight, KV, activation bytes);
  HF          torch.cuda.max_memory_allocated() (tensors only) and max_memory_reserved(), plus the
              device-wide total - free after the runs, the figure comparable with lite-llama's.
HF's TTFT/TPOT come from a streamer whose put() timestamps each step (bench/hf_worker.py).

usage:
  compare_hf.py [run] --bin BIN --out DIR [--models m1,m2] [--sections s1,s2] [--engines e1,e2]
                [--cases REGEX] [--batches 1,8] [--quick] [--runs 5] [--warmup 1]
                [--skip-done PATH ...] [--time-limit-s 540] [--profile] [--device cuda|cpu]
                [--no-report] [--dry-run]
  compare_hf.py merge DIR_OR_PIECE ... [-o DIR/merged.json]
  compare_hf.py ab PATH ... [--metric tpot_ms]   (lite-llama cases per LITE_LLAMA_* setting)
"""
import argparse
import datetime
import json
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys
import time

from pieces import SCHEMA, ab_table, done_keys, load_pieces, merge

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIGS = os.path.join(ROOT, "tests", "gpu", "configs")
TOKEN_COUNTS = os.path.join(HERE, "prompts", "token_counts.json")
HF_WORKER = os.path.join(HERE, "hf_worker.py")
MODELS = ["llama-3.2-1b", "llama-3.2-3b", "qwen2.5-3b", "qwen3-4b"]
SECTIONS = ["batch", "seed004", "prompts", "long"]
ENGINES = ["lite-llama", "hf_eager", "hf_static"]
QUANT_ENGINES = ["lite-llama-int8", "lite-llama-int4", "lite-llama-fp8", "hf_eager_fp16"]
SEED = 0


# ----------------------------------------------------------------------------------------------
# Cases
# ----------------------------------------------------------------------------------------------

def tokenizer_family(model):
    """Which real tokenizer's counts stand for the text prompts of this model."""
    m = model_name(model).lower()
    return "qwen" if m.startswith("qwen") else "llama3.2"


def prompt_set_lengths(set_name, model):
    counts = json.load(open(TOKEN_COUNTS))["sets"][set_name]
    return counts[tokenizer_family(model)]


def cases_for(section, model, quick=False, batches=None):
    """The cases of a section: dicts with id, section, batch, prompt_lens (one per request, or
    one for all), gen_len, label."""
    out = []

    def add(label, B, lens, gen):
        out.append({"id": f"{section}:{label}:b{B}", "section": section, "label": label,
                    "batch": B, "prompt_lens": list(lens), "gen_len": gen})

    if section == "batch":
        bs = batches or ([1, 8] if quick else [1, 2, 4, 8, 16, 64])
        for B in bs:
            add("p128_g256", B, [128], 256)
    elif section == "seed004":
        for L in (3, 26):
            for G in (50, 100):
                add(f"p{L}_g{G}", 1, [L], G)
    elif section == "prompts":
        for G in ((256,) if quick else (256, 1024)):
            for name in ("seed002", "seed000_long"):
                lens = prompt_set_lengths(name, model)
                add(f"{name}_g{G}", len(lens), lens, G)
    elif section == "long":
        bs = batches or ([1] if quick else [1, 8, 64])
        for B in bs:
            add("p128_g1024", B, [128], 1024)
    else:
        raise SystemExit(f"unknown section '{section}' (known: {', '.join(SECTIONS)})")
    return out


def request_lens(case):
    """Prompt length of each request: the list cycled over the batch (as `bench --prompt-lens`)."""
    lens = case["prompt_lens"]
    return [lens[b % len(lens)] for b in range(case["batch"])]


# ----------------------------------------------------------------------------------------------
# Statistics helpers (shared with the HF worker)
# ----------------------------------------------------------------------------------------------

def stat(values):
    v = [x for x in values if x is not None]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def stat_map(s, f, flip=False):
    """Apply a monotone f to a {median,min,max} stat (flip when f is decreasing)."""
    if s is None:
        return None
    lo, hi = (f(s["max"]), f(s["min"])) if flip else (f(s["min"]), f(s["max"]))
    out = {"median": f(s["median"]), "min": lo, "max": hi}
    if "n" in s:
        out["n"] = s["n"]
    return out


# ----------------------------------------------------------------------------------------------
# Model weights (transformers random init, saved once, used by both engines)
# ----------------------------------------------------------------------------------------------

def config_path(model):
    if model.endswith(".json") or os.path.isdir(model):
        p = os.path.join(model, "config.json") if os.path.isdir(model) else model
        return os.path.abspath(p)
    p = os.path.join(CONFIGS, model + ".json")
    if not os.path.exists(p):
        raise SystemExit(f"unknown model '{model}': no {p} (give a name from tests/gpu/configs "
                         "or a path to a config.json)")
    return p


def model_name(model):
    if model.endswith(".json"):
        d = os.path.basename(os.path.dirname(os.path.abspath(model)))
        return d if os.path.basename(model) == "config.json" else os.path.basename(model)[:-5]
    return os.path.basename(model.rstrip("/"))


def weights_dir(args, model):
    return os.path.join(args.weights_dir, f"{model_name(model)}-seed{SEED}")


def make_weights(args, model):
    """Random-init weights saved as safetensors (child process: the parent never opens CUDA)."""
    d = weights_dir(args, model)
    done = os.path.join(d, ".complete")
    if os.path.exists(done):
        return d
    cmd = [sys.executable, HF_WORKER, "weights", config_path(model), d, "--device", args.device]
    log(f"+ {shlex.join(cmd)}")
    r = subprocess.run(cmd, text=True, capture_output=True, timeout=args.time_left())
    if r.returncode != 0:
        raise RuntimeError("weight creation failed: " + r.stderr[-3000:])
    log(r.stdout.strip())
    return d


# ----------------------------------------------------------------------------------------------
# lite-llama
# ----------------------------------------------------------------------------------------------

def gpu_used_bytes():
    """Device memory in use before a lite-llama run (other processes), via nvidia-smi."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                            "-i", "0"], text=True, capture_output=True, timeout=20)
        return int(r.stdout.strip().splitlines()[0]) << 20 if r.returncode == 0 else None
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        return None


def run_lite_llama(args, model, wdir, case, workdir, engine="lite-llama"):
    quant = engine[len("lite-llama-"):] if engine.startswith("lite-llama-") else None
    out = os.path.join(workdir, f"{engine}_{model_name(model)}_{case['id'].replace(':', '_')}.json")
    cmd = [args.bin, "bench", "-m", wdir, "--device", args.device, "-q",
           "--batch", str(case["batch"]), "--gen-len", str(case["gen_len"]),
           "--runs", str(args.runs), "--warmup", str(args.warmup), "--json", out]
    lens = case["prompt_lens"]
    cmd += ["--prompt-len", str(lens[0])] if len(lens) == 1 else ["--prompt-lens", ",".join(map(str, lens))]
    if args.device == "cpu":
        cmd += ["--threads", "0"]
    if quant:
        cmd += ["--quantize", quant]
    if args.profile and case["section"] == "batch":
        cmd.append("--profile")  # one extra eager run after the timed ones, every op timed
    base = gpu_used_bytes() if args.device == "cuda" else None
    log(f"+ {shlex.join(cmd)}")
    t0 = time.time()
    try:
        r = subprocess.run(cmd, text=True, capture_output=True, timeout=max(1, args.time_left()))
    except subprocess.TimeoutExpired:
        return {"error": "time limit reached (--time-limit-s)", "command": shlex.join(cmd)}
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout)[-2000:], "command": shlex.join(cmd)}
    log(r.stdout.rstrip())
    d = json.load(open(out))
    res = d["results"][0]
    B, G = case["batch"], case["gen_len"]
    total_s = stat_map(res["total_ms"], lambda x: x / 1e3)
    rec = {
        "command": shlex.join(cmd),
        "wall_s": round(time.time() - t0, 2),
        "runs": d["runs"], "warmup": d["warmup"], "cuda_graph": d.get("cuda_graph"),
        "backend": d.get("backend"),
        "total_s": total_s,
        "ttft_ms": res["ttft_ms"],
        # decode tok/s = B (G-1) / decode time, so the time per output token is B / decode tok/s.
        "tpot_ms": stat_map(res["decode_tokens_per_s"], lambda x: 1e3 * B / x, flip=True),
        "step_ms": res.get("step_ms"),
        "throughput_tok_s": stat_map(total_s, lambda x: B * G / x, flip=True),
        "decode_tok_s": res["decode_tokens_per_s"],
        "prefill_tok_s": res.get("prefill_tokens_per_s"),
        "memory": {
            "peak_device_bytes": res.get("peak_device_bytes"),
            "device_used_before_bytes": base,
            "weight_bytes": d.get("weight_bytes"), "kv_bytes": d.get("kv_bytes"),
            "activation_bytes": d.get("activation_bytes"),
        },
        "load_ms": d.get("load_ms"),
    }
    if res.get("profile"):
        rec["profile"] = res["profile"]
    acc = [rec["memory"][k] for k in ("weight_bytes", "kv_bytes", "activation_bytes")]
    rec["memory"]["accounted_bytes"] = sum(acc) if all(x is not None for x in acc) else None
    return rec


# ----------------------------------------------------------------------------------------------
# HF transformers (child process per model and engine)
# ----------------------------------------------------------------------------------------------

def run_hf(args, model, wdir, engine, cases, workdir, on_record):
    """Runs the cases in a child process and hands each finished case to on_record(case id,
    record) as it streams in (JSONL), so a parent killed with the machine keeps the cases done;
    cases the child never finished get an error record at the end."""
    jl = os.path.join(workdir, f"hf_{model_name(model)}_{engine}_{int(time.time())}.jsonl")
    spec = os.path.join(workdir, f"hf_{model_name(model)}_{engine}_cases.json")
    # By batch size, longest first: HF eager's warm-up (its first pass over each batch size and
    # KV length) runs 2.5-6x slower per token than its timed runs on the H100, so a longer case
    # first leaves the warm-ups of the shorter ones with that batch size at the timed speed.
    order = sorted(cases, key=lambda c: (c["batch"], -(max(c["prompt_lens"]) + c["gen_len"])))
    json.dump(order, open(spec, "w"))
    cmd = [sys.executable, HF_WORKER, "run", wdir, engine, spec, jl,
           "--runs", str(args.runs), "--warmup", str(args.warmup), "--device", args.device,
           "--deadline", f"{time.time() + args.time_left():.0f}"]
    command = shlex.join(cmd)
    log(f"+ {command}")
    seen, err, n_read = set(), None, 0

    def read_new():
        nonlocal n_read
        if not os.path.exists(jl):
            return
        with open(jl) as f:
            lines = f.read().splitlines()
        for line in lines[n_read:]:
            if not line.endswith("}"):
                break  # a line the child is still writing
            n_read += 1
            d = json.loads(line)
            cid = d.pop("case_id")
            seen.add(cid)
            on_record(cid, {**d, "command": command})

    # Output goes straight to our stdout (progress of long runs stays visible).
    p = subprocess.Popen(cmd)
    while p.poll() is None:
        if args.time_left() <= 0:
            p.kill()
            p.wait()
            err = "time limit reached (--time-limit-s)"
            break
        read_new()
        time.sleep(2)
    read_new()
    if err is None and p.returncode != 0:
        err = f"HF worker exited with {p.returncode}"
    for c in cases:
        if c["id"] not in seen:
            on_record(c["id"], {"error": err or "not run", "command": command})


# ----------------------------------------------------------------------------------------------
# Provenance of a piece
# ----------------------------------------------------------------------------------------------

def git_commit():
    # The GPU machine's copy of the tree may carry a stale .git (only the working tree is synced):
    # LITE_LLAMA_COMMIT names the commit that was sent.
    if os.environ.get("LITE_LLAMA_COMMIT"):
        return os.environ["LITE_LLAMA_COMMIT"]
    try:
        c = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], text=True,
                           capture_output=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               text=True, capture_output=True).stdout.strip()
        return c + ("-dirty" if dirty else "") if c else None
    except OSError:
        return None


def environment(args):
    """Device and library versions, read in a child so that this process never opens CUDA."""
    code = ("import json,torch,transformers;"
            "d={'torch':torch.__version__,'transformers':transformers.__version__};"
            f"d['device']=torch.cuda.get_device_name(0) if '{args.device}'=='cuda' else 'cpu';"
            f"d['device_total_bytes']=torch.cuda.mem_get_info()[1] if '{args.device}'=='cuda' else None;"
            "print(json.dumps(d))")
    r = subprocess.run([sys.executable, "-c", code], text=True, capture_output=True)
    env = json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr[-500:]}
    if args.device == "cpu":
        try:
            env["device"] = "cpu: " + open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t")
        except (OSError, IndexError):
            pass
    return env


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------

def log(msg):
    print(msg, flush=True)


def csv(s, known=None, what=""):
    v = [x.strip() for x in s.split(",") if x.strip()]
    if known is not None:
        bad = [x for x in v if x not in known]
        if bad:
            raise SystemExit(f"unknown {what}: {', '.join(bad)} (known: {', '.join(known)})")
    return v


def parse_run_args(argv):
    ap = argparse.ArgumentParser(prog="compare_hf.py [run]",
                                 description="lite-llama vs HF transformers (see the module docstring)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-gpu", "bin", "lite-llama"),
                    help="lite-llama binary (default: build-gpu/bin/lite-llama)")
    ap.add_argument("--out", default=os.path.join(ROOT, "gpu-results", "compare_hf"),
                    help="directory for the piece files and merged.json")
    ap.add_argument("--models", default=",".join(MODELS),
                    help="names from tests/gpu/configs, or paths to config.json files")
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--batches", default=None, help="override the batch sizes of 'batch' and 'long'")
    ap.add_argument("--cases", default=None, metavar="REGEX",
                    help="only the cases whose id matches (re.search), e.g. 'g1024'")
    ap.add_argument("--quick", action="store_true",
                    help="fewer cases (batch 1,8; 256 new tokens for the prompt sets; long at batch 1) and 2 runs")
    ap.add_argument("--runs", type=int, default=None, help="timed runs per case (default 5; --quick 2)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--weights-dir", default="/tmp/lite-llama-compare-weights")
    ap.add_argument("--time-limit-s", type=float, default=540,
                    help="stop starting work after this many seconds; running children are killed "
                         "at the limit, finished cases are kept (the GPU machine allows 600 s a call)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: smoke test of the whole pipeline on a tiny checkpoint (no GPU numbers)")
    ap.add_argument("--no-report", action="store_true", help="do not run bench/report.py afterwards")
    ap.add_argument("--profile", action="store_true",
                    help="lite-llama's batch-section cases also run `bench --profile` (GPU time per op "
                         "family, for the report's profile tables)")
    ap.add_argument("--skip-done", action="extend", nargs="+", default=[], metavar="PATH",
                    help="skip the (model, engine, case) triples that have a successful record in these "
                         "piece or merged files, or in the pieces of these folders (same device only: "
                         "pass files of this machine's kind); several paths or repeated")
    ap.add_argument("--dry-run", action="store_true", help="print the cases and commands, run nothing")
    a = ap.parse_args(argv)
    a.models = csv(a.models)
    a.sections = csv(a.sections, SECTIONS, "section")
    a.engines = csv(a.engines, ENGINES + QUANT_ENGINES, "engine")
    a.batch_list = [int(x) for x in csv(a.batches)] if a.batches else None
    if a.runs is None:
        a.runs = 2 if a.quick else 5
    a.bin = os.path.abspath(a.bin)
    return a


def run_main(argv):
    a = parse_run_args(argv)
    start = time.time()
    a.time_left = lambda: a.time_limit_s - (time.time() - start)
    os.makedirs(a.out, exist_ok=True)
    workdir = os.path.join(a.out, "work")
    os.makedirs(workdir, exist_ok=True)
    plan = [(m, s, c) for m in a.models for s in a.sections
            for c in cases_for(s, m, a.quick, a.batch_list if s in ("batch", "long") else None)
            if not a.cases or re.search(a.cases, c["id"])]
    if a.dry_run:
        for m, s, c in plan:
            lens = c["prompt_lens"]
            log(f"{model_name(m):14s} {c['id']:32s} engines={','.join(a.engines)} "
                f"prompt_lens={lens if len(lens) > 1 else lens[0]} gen={c['gen_len']}")
        log(f"{len(plan)} cases x {len(a.engines)} engines, runs={a.runs} warmup={a.warmup}")
        return
    if any(e.startswith("lite-llama") for e in a.engines) and not os.access(a.bin, os.X_OK):
        raise SystemExit(f"--bin {a.bin}: not an executable (build it first)")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    piece_path = os.path.join(a.out, f"piece_{stamp}_{os.getpid()}.json")
    meta = {
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(["python3", os.path.relpath(os.path.abspath(__file__), ROOT)] + list(argv)),
        "commit": git_commit(), "host": socket.gethostname(),
        "models": [model_name(m) for m in a.models], "sections": a.sections, "engines": a.engines,
        "quick": a.quick, "runs": a.runs, "warmup": a.warmup, "weight_seed": SEED,
        **environment(a),
    }
    tuning = {k: v for k, v in os.environ.items() if k.startswith("LITE_LLAMA_") and k != "LITE_LLAMA_COMMIT"}
    if tuning:  # switches that change lite-llama's kernels (e.g. LITE_LLAMA_GEMV_MAX)
        meta["env"] = tuning
    records = []

    def save(final=False):
        meta["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        meta["complete"] = final
        tmp = piece_path + ".tmp"
        json.dump({"schema": SCHEMA, "meta": meta, "records": records}, open(tmp, "w"), indent=1)
        os.replace(tmp, piece_path)

    def add(model, case, engine, rec):
        r = {"model": model_name(model), "section": case["section"], "case": case["id"],
             "label": case["label"], "engine": engine, "batch": case["batch"],
             "prompt_lens": case["prompt_lens"], "gen_len": case["gen_len"], **rec}
        records.append(r)
        save()

    done = done_keys(a.skip_done)

    def todo(m, eng, cases):
        return [c for c in cases if (model_name(m), eng, c["id"]) not in done]

    n_todo = sum(len(todo(m, e, [c])) for m, s, c in plan for e in a.engines)
    log(f"{n_todo} of {len(plan) * len(a.engines)} (model, engine, case) runs to do"
        + (f" ({len(plan) * len(a.engines) - n_todo} done in --skip-done files)" if a.skip_done else ""))
    for m in a.models:
        cases = [c for mm, s, c in plan if mm == m]
        if not any(todo(m, e, cases) for e in a.engines):
            continue
        try:
            lite_left = any(todo(m, e, cases) for e in a.engines if e.startswith("lite-llama"))
            # An HF worker is not started with 90 s or less left (below): no weights for nothing.
            if a.time_left() <= (0 if lite_left else 90):
                raise TimeoutError("time limit reached (--time-limit-s)")
            wdir = make_weights(a, m)
        except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as e:
            for eng in a.engines:  # only what is still to do: a done case keeps its record
                for c in todo(m, eng, cases):
                    add(m, c, eng, {"error": str(e)[-2000:]})
            continue
        # lite-llama first: no other process holds GPU memory while it measures its peak.
        for eng in [e for e in a.engines if e.startswith("lite-llama")]:
            for c in todo(m, eng, cases):
                if a.time_left() <= 0:
                    add(m, c, eng, {"error": "time limit reached (--time-limit-s)"})
                    continue
                add(m, c, eng, run_lite_llama(a, m, wdir, c, workdir, eng))
        for eng in ("hf_eager", "hf_static", "hf_eager_fp16"):
            left = todo(m, eng, cases)
            if eng not in a.engines or not left:
                continue
            if a.time_left() <= 90:  # loading (and compiling) alone would take most of that
                for c in left:
                    add(m, c, eng, {"error": "time limit reached (--time-limit-s)"})
            else:
                by_id = {c["id"]: c for c in left}
                run_hf(a, m, wdir, eng, left, workdir, lambda cid, rec: add(m, by_id[cid], eng, rec))
    save(final=True)
    log(f"wrote {piece_path} ({len(records)} records, "
        f"{sum(1 for r in records if r.get('error'))} errors, {time.time() - start:.0f} s)")
    merged = os.path.join(a.out, "merged.json")
    merge([a.out], merged, log)
    log(f"merged -> {merged}")
    if not a.no_report:
        # A report of this run alone; docs/benchmarks/report.md renders the files that
        # docs/benchmarks/data/report_inputs.json names.
        cmd = [sys.executable, os.path.join(HERE, "report.py"), "--compare", merged,
               "--out-dir", os.path.join(a.out, "report")]
        log(f"+ {shlex.join(cmd)}")
        if subprocess.run(cmd).returncode != 0:
            log("report.py failed; the data is in " + merged)


def merge_main(argv):
    ap = argparse.ArgumentParser(prog="compare_hf.py merge")
    ap.add_argument("inputs", nargs="+", help="directories holding piece_*.json, or piece files")
    ap.add_argument("-o", "--output", default=None)
    a = ap.parse_args(argv)
    out = a.output or os.path.join(a.inputs[0] if os.path.isdir(a.inputs[0]) else ".", "merged.json")
    doc = merge(a.inputs, out, log)
    n_err = sum(1 for r in doc["records"] if r.get("error"))
    log(f"{len(doc['pieces'])} pieces, {len(doc['records'])} records ({n_err} errors) -> {out}")


def ab_main(argv):
    """A/B of lite-llama's tuning switches: run the same cases once per setting (e.g.
    `LITE_LLAMA_DECODE_SPLIT_KEYS=16 python3 bench/compare_hf.py --engines lite-llama ...`), then
    `compare_hf.py ab DIR` prints one column per setting."""
    ap = argparse.ArgumentParser(prog="compare_hf.py ab")
    ap.add_argument("inputs", nargs="+", help="piece files, folders of them, or merged files")
    ap.add_argument("--metric", default="tpot_ms", help="a record field with a median (default tpot_ms)")
    a = ap.parse_args(argv)
    print(ab_table(load_pieces(a.inputs), a.metric))


def main():
    argv = sys.argv[1:]
    sub = argv[0] if argv and not argv[0].startswith("-") else "run"
    rest = argv[1:] if argv and argv[0] == sub else argv
    table = {"run": run_main, "merge": merge_main, "ab": ab_main}
    if sub not in table:
        raise SystemExit(f"unknown subcommand '{sub}' (run, merge, ab)")
    table[sub](rest)


if __name__ == "__main__":
    main()
