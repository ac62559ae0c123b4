#!/usr/bin/env python3
"""lite-llama against HF transformers on the GPU: the one command behind every table and chart
of docs/benchmarks/report.md.

    python3 bench/compare_hf.py --bin build-gpu/bin/lite-llama --out bench-results

runs every model, section and engine below, writes one JSON file per piece into --out, merges
all pieces found there into --out/merged.json, and runs bench/report.py on it (tables and PNG
charts under docs/benchmarks/). Because a call on the workplace's GPU machine may last at most
10 minutes, the work is cut into pieces with --models, --sections and --engines; each piece
appends a file, and `merge` (also run after every piece) combines them, the newest result of a
case winning. `--skip-done DIR_OR_FILE` makes the command resumable: repeated with --out DIR
and --skip-done DIR, each call runs only what no earlier call finished, and an HF case that would
not finish before --time-limit-s is skipped rather than cut off. `compare_hf.py plan` prints it.

Models (tests/gpu/configs/*.json, real shapes, random weights): llama-3.2-1b, llama-3.2-3b,
qwen2.5-3b, qwen3-4b. transformers builds each with its own random init (torch.manual_seed(0),
bf16, on the GPU) and save_pretrained()s it as safetensors under --weights-dir; lite-llama loads
that directory and HF reloads it, so both engines run identical weights.

Engines:
  lite-llama  `lite-llama bench -m DIR --device cuda --batch B (--prompt-len L | --prompt-lens ..)
              --gen-len G --runs R --warmup W --json F`, one process per case so that the KV pool
              (sized to the run) and the peak memory belong to that batch size;
  hf_eager    model.generate() with the default dynamic cache and SDPA attention;
  hf_static   model.generate(cache_implementation="static"): transformers compiles the decode
              step with torch.compile (inductor, CUDA graphs) on CUDA devices.
  All greedy, EOS ignored (exactly G new tokens), bf16, batch of B requests submitted together.

Sections (case = batch size x prompt lengths x new tokens):
  batch    random prompts of 128 tokens, 256 new tokens, batch 1, 2, 4, 8, 16, 64;
  seed004  seed 004's Qwen3-4B table: batch 1, input 3 and 26 tokens, 50 and 100 new tokens;
  prompts  the seeds' prompt sets: seed 002's four prompts (tests/fixtures/seed_prompts.json,
           batch 4) and seed 000's eight long prompts (bench/prompts/seed000_long.json, batch 8),
           256 and 1024 new tokens;
  long     1024-token generations of 128-token random prompts, batch 1, 8, 64.
The text prompt sets are NOT tokenized at run time: the models have random weights and no
tokenizer, and `lite-llama bench` feeds random token ids. Each prompt is represented by its
token count under the model family's real tokenizer (bench/prompts/token_counts.json, made on
the CPU by `compare_hf.py count-tokens`); both engines get random ids of exactly those lengths
(lite-llama: `--prompt-lens`; HF: the same lengths, left-padded with an attention mask, as HF
batches real prompts of unequal length).

Every case: warm-up (--warmup, default 1) then --runs (default 5) timed runs; median, min, max.
Metrics: total time, throughput (B x new tokens / total time), TTFT (start to the first
generated token of the batch), TPOT (time per output token of one sequence = decode time /
(new tokens - 1); the seeds' "per token latency" is total time / generated tokens = 1 /
throughput, also derivable), decode tokens/s, prefill tokens/s, peak GPU memory:
  lite-llama  peak_device_bytes from its bench JSON (cudaMemGetInfo, total - free, sampled after
              every step: the whole device, so its own CUDA context included; this script's own
              process never touches CUDA, HF runs in child processes that have exited by then)
              and its own accounting (weight_bytes, kv_bytes, activation_bytes);
  HF          torch.cuda.max_memory_allocated() (tensors only) and max_memory_reserved(), plus the
              device-wide total - free after the runs (context and allocator cache included), the
              figure comparable with lite-llama's.
TTFT/TPOT for HF come from a streamer whose put() timestamps each step (generate() calls it with
the tokens already copied to the host, a synchronisation that the stop check makes anyway).

NOT EXECUTED WHERE THIS WAS WRITTEN (no GPU there): everything that needs CUDA, i.e. the
weight creation on the GPU, the three engines with --device cuda, torch.compile of the static
cache, the GPU memory readings. Executed there: argument parsing, `plan`, `count-tokens`, the
whole pipeline with --device cpu on a tiny checkpoint (lite-llama CPU backend, HF eager and
static cache without compilation, which transformers only enables on accelerators), `merge`, and
bench/report.py on the merged JSON. The marker "GPU-ONLY" flags the code paths that only a GPU
run exercises.

usage:
  compare_hf.py [run] --bin BIN --out DIR [--models m1,m2] [--sections s1,s2]
                [--engines lite-llama,hf_eager,hf_static] [--quick] [--runs 5] [--warmup 1]
                [--batches 1,8] [--time-limit-s 540] [--device cuda|cpu] [--no-report]
  compare_hf.py merge DIR [-o DIR/merged.json]
  compare_hf.py plan [--bin BIN] [--out DIR]
  compare_hf.py count-tokens          (CPU; needs models/tokenizers from scripts/fetch-tokenizers)
"""
import argparse
import datetime
import glob
import hashlib
import json
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIGS = os.path.join(ROOT, "tests", "gpu", "configs")
PROMPTS_DIR = os.path.join(HERE, "prompts")
TOKEN_COUNTS = os.path.join(PROMPTS_DIR, "token_counts.json")
MODELS = ["llama-3.2-1b", "llama-3.2-3b", "qwen2.5-3b", "qwen3-4b"]
SECTIONS = ["batch", "seed004", "prompts", "long"]
ENGINES = ["lite-llama", "hf_eager", "hf_static"]
# Also selectable with --engines (the quantization table, docs/benchmarks/quantization.md):
# lite-llama with `--quantize int8|int4|fp8`, and HF eager in fp16 (seed 004's HF baseline).
QUANT_ENGINES = ["lite-llama-int8", "lite-llama-int4", "lite-llama-fp8", "hf_eager_fp16"]
SCHEMA = "lite-llama-compare-hf/1"
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
    cmd = [sys.executable, os.path.abspath(__file__), "_make-weights", config_path(model), d,
           "--device", args.device]
    log(f"+ {shlex.join(cmd)}")
    r = subprocess.run(cmd, text=True, capture_output=True, timeout=args.time_left())
    if r.returncode != 0:
        raise RuntimeError("weight creation failed: " + r.stderr[-3000:])
    log(r.stdout.strip())
    return d


def _make_weights_main(argv):
    ap = argparse.ArgumentParser(prog="compare_hf.py _make-weights")
    ap.add_argument("config")
    ap.add_argument("dir")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args(argv)
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    t0 = time.time()
    torch.manual_seed(SEED)
    cfg = AutoConfig.from_pretrained(a.config)
    # GPU-ONLY with --device cuda: the init runs on the GPU (fast for 4B parameters).
    with torch.device(a.device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    os.makedirs(a.dir, exist_ok=True)
    model.save_pretrained(a.dir, safe_serialization=True)
    n = sum(p.numel() for p in model.parameters())
    open(os.path.join(a.dir, ".complete"), "w").write(json.dumps({"seed": SEED, "params": n}))
    print(f"weights: {a.dir} ({n / 1e9:.2f} B parameters, {time.time() - t0:.1f} s)")


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
    cmd = [sys.executable, os.path.abspath(__file__), "_hf-worker", wdir, engine, spec, jl,
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


def _hf_worker_main(argv):
    ap = argparse.ArgumentParser(prog="compare_hf.py _hf-worker")
    ap.add_argument("wdir")
    ap.add_argument("engine", choices=["hf_eager", "hf_static", "hf_eager_fp16"])
    ap.add_argument("cases")
    ap.add_argument("out_jsonl")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--deadline", type=float, default=None,
                    help="epoch seconds; a case that would not finish by then is skipped, not started")
    a = ap.parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.generation.streamers import BaseStreamer

    cuda = a.device == "cuda"
    if a.engine == "hf_static":
        # Every case has its own shapes (batch, cache length), so each compiles anew; keep dynamo
        # from falling back to eager after its default 8 recompilations.
        import torch._dynamo
        for k in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                  "accumulated_recompile_limit"):
            if hasattr(torch._dynamo.config, k):
                setattr(torch._dynamo.config, k, 256)
    dtype = torch.float16 if a.engine.endswith("_fp16") else torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(a.wdir, dtype=dtype,
                                                 attn_implementation="sdpa").to(a.device).eval()
    vocab = model.config.vocab_size

    class Clock(BaseStreamer):
        """Timestamps of generate()'s put() calls: the prompt first, then one per new token
        (already on the host, so the GPU has finished that step)."""

        def __init__(self):
            self.t = []

        def put(self, value):
            self.t.append(time.perf_counter())

        def end(self):
            pass

    def sync():
        if cuda:
            torch.cuda.synchronize()  # GPU-ONLY

    def emit(rec):  # progress line on stdout, the whole record to the JSONL file
        print(json.dumps({k: rec.get(k) for k in ("case_id", "throughput_tok_s", "ttft_ms", "tpot_ms", "error")
                          if k in rec}), flush=True)
        with open(a.out_jsonl, "a") as f:
            f.write(json.dumps(rec) + "\n")

    # Seconds per generated token: a guess from the slowest model (HF eager decodes 30-40 ms a
    # step on a 4B model), then what this worker's last case took.
    step_s = 0.04 if a.engine.startswith("hf_eager") else 0.01
    for case in json.load(open(a.cases)):
        B, G = case["batch"], case["gen_len"]
        lens = request_lens(case)
        L = max(lens)
        if a.deadline:
            # A case cut at the time limit is lost; one skipped here is left for a later call
            # (--skip-done). Compilation (static cache) is allowed a minute.
            est = 1.2 * (a.warmup + a.runs) * G * step_s + (60 if a.engine == "hf_static" else 0)
            if time.time() + est > a.deadline:
                emit({"case_id": case["id"], "error": f"skipped: needs ~{est:.0f} s, past the time limit (--time-limit-s)"})
                continue
        g = torch.Generator().manual_seed(1234)
        ids = torch.zeros((B, L), dtype=torch.long)
        mask = torch.zeros((B, L), dtype=torch.long)
        for b, n in enumerate(lens):  # left padding, as HF batches prompts of unequal length
            ids[b, L - n:] = torch.randint(0, min(vocab, 32000), (n,), generator=g)
            mask[b, L - n:] = 1
        ids, mask = ids.to(a.device), mask.to(a.device)
        kw = dict(attention_mask=mask, do_sample=False, max_new_tokens=G, min_new_tokens=G,
                  eos_token_id=None, pad_token_id=0)
        if a.engine == "hf_static":
            kw["cache_implementation"] = "static"  # GPU-ONLY: compiled by transformers on CUDA
            torch._dynamo.reset()
        if cuda:
            torch.cuda.empty_cache()

        def once():
            clk = Clock()
            sync()
            t0 = time.perf_counter()
            with torch.no_grad():
                out = model.generate(ids, streamer=clk, **kw)
            sync()
            t1 = time.perf_counter()
            n_new = out.shape[1] - L
            assert n_new == G, f"generated {n_new} tokens, expected {G}"
            # clk.t[0]: the prompt handed over; clk.t[1]: first token; clk.t[-1]: last token.
            assert len(clk.t) == G + 1, f"streamer saw {len(clk.t)} puts, expected {G + 1}"
            return {"total": t1 - t0, "ttft": clk.t[1] - t0,
                    "tpot": (clk.t[-1] - clk.t[1]) / max(G - 1, 1)}

        rec = {"case_id": case["id"]}
        try:
            t_case = time.time()
            w0 = time.time()
            for _ in range(a.warmup):
                once()
            rec["warmup_s"] = round(time.time() - w0, 2)  # includes torch.compile for hf_static
            if cuda:
                torch.cuda.reset_peak_memory_stats()  # GPU-ONLY
            runs, dev_used = [], 0
            for _ in range(a.runs):
                runs.append(once())
                if cuda:
                    free, total = torch.cuda.mem_get_info()  # GPU-ONLY
                    dev_used = max(dev_used, total - free)
            tot = stat([r["total"] for r in runs])
            tpot = stat([r["tpot"] * 1e3 for r in runs])
            ttft = stat([r["ttft"] * 1e3 for r in runs])
            rec.update({
                "runs": a.runs, "warmup": a.warmup,
                "total_s": tot,
                "ttft_ms": ttft,
                "tpot_ms": tpot,
                "throughput_tok_s": stat([B * G / r["total"] for r in runs]),
                "decode_tok_s": stat([B * (G - 1) / (r["total"] - r["ttft"]) for r in runs]),
                "prefill_tok_s": stat([sum(lens) / r["ttft"] for r in runs]),
                "memory": {
                    "max_allocated_bytes": torch.cuda.max_memory_allocated() if cuda else None,
                    "max_reserved_bytes": torch.cuda.max_memory_reserved() if cuda else None,
                    "device_used_bytes": dev_used if cuda else None,
                    "weight_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
                },
                "compiled": bool(getattr(model, "_compiled_call", None)) if a.engine == "hf_static" else False,
                "wall_s": round(time.time() - t_case, 2),
            })
            step_s = tot["median"] / G
        except Exception as e:  # one failing case (e.g. out of memory) must not lose the rest
            rec["error"] = f"{type(e).__name__}: {e}"[:2000]
            if cuda:
                torch.cuda.empty_cache()
        emit(rec)


# ----------------------------------------------------------------------------------------------
# Pieces, merging
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


def record_key(r):
    return (r["model"], r["engine"], r["case"])


def read_docs(paths, what):
    """(file, document) of each compare-hf file in paths (a folder: its piece_*.json); any other
    file stops with an error naming `what` asked for it."""
    for path in paths:
        files = sorted(glob.glob(os.path.join(path, "piece_*.json"))) if os.path.isdir(path) else [path]
        for f in files:
            doc = json.load(open(f))
            if doc.get("schema") != SCHEMA:
                raise SystemExit(f"{what} {f}: not a {SCHEMA} file")
            yield f, doc


def done_keys(paths):
    """(model, engine, case) of the successful records in piece or merged files (or folders of
    pieces): what --skip-done leaves out."""
    return {record_key(r) for _, doc in read_docs(paths, "--skip-done") for r in doc["records"]
            if not r.get("error")}


def merge(dirs, out_path=None):
    """All piece files under dirs -> one document; the newest successful record of a case wins
    (an error only where no success exists)."""
    files = []
    for d in dirs:
        files += [f for f in glob.glob(os.path.join(d, "piece_*.json"))] if os.path.isdir(d) else [d]
    pieces = []
    for f in sorted(files):
        try:
            p = json.load(open(f))
        except (OSError, ValueError) as e:
            log(f"merge: skipping {f}: {e}")
            continue
        if p.get("schema") != SCHEMA:
            log(f"merge: skipping {f}: not a {SCHEMA} piece")
            continue
        p["_file"] = os.path.basename(f)
        pieces.append(p)
    pieces.sort(key=lambda p: p["meta"]["finished"])
    best = {}
    for p in pieces:
        for r in p["records"]:
            r = dict(r, piece=p["_file"])
            k = record_key(r)
            old = best.get(k)
            if old is None or not r.get("error") or old.get("error"):
                best[k] = r
    doc = {"schema": SCHEMA, "merged": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "pieces": [{"file": p["_file"], **p["meta"]} for p in pieces],
           "records": sorted(best.values(), key=lambda r: (r["model"], r["section"], r["case"], r["engine"]))}
    if out_path:
        tmp = out_path + ".tmp"
        json.dump(doc, open(tmp, "w"), indent=1)
        os.replace(tmp, out_path)
    return doc


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
    ap.add_argument("--report-dir", default=None,
                    help="where bench/report.py writes (default docs/benchmarks; with --device cpu OUT/report, "
                         "so that a smoke test never overwrites the committed report)")
    ap.add_argument("--dry-run", action="store_true", help="print the cases and commands, run nothing")
    a = ap.parse_args(argv)
    a.models = csv(a.models)
    a.sections = csv(a.sections, SECTIONS, "section")
    a.engines = csv(a.engines, ENGINES + QUANT_ENGINES, "engine")
    a.batch_list = [int(x) for x in csv(a.batches)] if a.batches else None
    if a.runs is None:
        a.runs = 2 if a.quick else 5
    a.bin = os.path.abspath(a.bin)
    if a.report_dir is None:
        a.report_dir = os.path.join(ROOT, "docs", "benchmarks") if a.device == "cuda" else os.path.join(a.out, "report")
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
    merge([a.out], merged)
    log(f"merged -> {merged}")
    if not a.no_report:
        cmd = [sys.executable, os.path.join(HERE, "report.py"), "--compare", merged, "--out-dir", a.report_dir]
        if a.device == "cpu":
            cmd.append("--no-legacy")  # CPU smoke data next to H200 numbers would mislead
        log(f"+ {shlex.join(cmd)}")
        r = subprocess.run(cmd)
        if r.returncode != 0:
            log("report.py failed (matplotlib missing? `pip install matplotlib`); the data is in " + merged)


def merge_main(argv):
    ap = argparse.ArgumentParser(prog="compare_hf.py merge")
    ap.add_argument("inputs", nargs="+", help="directories holding piece_*.json, or piece files")
    ap.add_argument("-o", "--output", default=None)
    a = ap.parse_args(argv)
    out = a.output or os.path.join(a.inputs[0] if os.path.isdir(a.inputs[0]) else ".", "merged.json")
    doc = merge(a.inputs, out)
    n_err = sum(1 for r in doc["records"] if r.get("error"))
    log(f"{len(doc['pieces'])} pieces, {len(doc['records'])} records ({n_err} errors) -> {out}")


def load_pieces(paths):
    """Piece documents (meta, records) from piece files, folders of them, or merged files (split
    back into their pieces by each record's `piece`; records without one keep an empty meta)."""
    out = []
    for _, doc in read_docs(paths, "ab:"):
        if "meta" in doc:
            out.append(doc)
            continue
        metas = {m["file"]: m for m in doc.get("pieces", [])}
        groups = {}
        for r in doc["records"]:
            groups.setdefault(r.get("piece"), []).append(r)
        out += [{"meta": metas.get(k, {}), "records": rs} for k, rs in groups.items()]
    return out


def ab_table(pieces, metric="tpot_ms"):
    """Markdown: the median `metric` of each lite-llama case under each setting of the LITE_LLAMA_*
    switches (the env its piece recorded), and the change against the run without switches."""
    cells, settings = {}, []
    for p in pieces:
        env = p["meta"].get("env") or {}
        setting = " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "default"
        if setting not in settings:
            settings.append(setting)
        for r in p["records"]:
            if r.get("error") or not r["engine"].startswith("lite-llama") or not r.get(metric):
                continue
            cells[(r["model"], r["engine"], r["case"], setting)] = r[metric]["median"]
    settings.sort(key=lambda x: x != "default")
    rows = sorted({k[:3] for k in cells}, key=lambda k: (k[0], k[1], int(k[2].rsplit(":b", 1)[1]), k[2]))
    head = ["model", "engine", "case"] + settings
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for m, e, c in rows:
        base = cells.get((m, e, c, "default"))
        row = [m, e, c]
        for st in settings:
            v = cells.get((m, e, c, st))
            if v is None:
                row.append("-")
            elif st == "default" or base is None:
                row.append(f"{v:.3f}")
            else:
                row.append(f"{v:.3f} ({100 * (v / base - 1):+.1f}%)")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def ab_main(argv):
    """A/B of lite-llama's tuning switches: run the same cases once per setting (e.g.
    `LITE_LLAMA_DECODE_SPLIT_KEYS=16 python3 bench/compare_hf.py --engines lite-llama ...`), then
    `compare_hf.py ab DIR` prints one column per setting."""
    ap = argparse.ArgumentParser(prog="compare_hf.py ab")
    ap.add_argument("inputs", nargs="+", help="piece files, folders of them, or merged files")
    ap.add_argument("--metric", default="tpot_ms", help="a record field with a median (default tpot_ms)")
    a = ap.parse_args(argv)
    print(ab_table(load_pieces(a.inputs), a.metric))


def plan_main(argv):
    """The commands for the GPU machine's 10-minute calls: lite-llama for every model (repeated
    until done, about two calls), then one resumable HF command repeated until it reports 0 runs
    to do (about 20 calls from scratch, measured on the H100: HF eager decodes a step of a 1B
    model in 13-20 ms and of a 3-4B model in 25-42 ms, whatever the batch, and its warm-up is
    slower still; static-cache compilation takes 15-50 s per case). Every call writes its piece
    under --out (keep it on the machine, e.g. /tmp, where the weights are cached too) and copies
    the pieces to $OUT; pieces from earlier machines go to --skip-done as files."""
    ap = argparse.ArgumentParser(prog="compare_hf.py plan")
    ap.add_argument("--bin", default="build-gpu/bin/lite-llama")
    ap.add_argument("--out", default="/tmp/compare_hf")
    a = ap.parse_args(argv)
    base = f"mkdir -p {a.out}; python3 bench/compare_hf.py --bin {a.bin} --out {a.out} --no-report --skip-done {a.out}"
    copy = f"; cp {a.out}/piece_*.json \"$OUT\"/"
    lines = ["# lite-llama, every model and section (weights are created once per machine under",
             "# /tmp/lite-llama-compare-weights)",
             f"{base} --engines lite-llama --profile{copy}",
             "# HF eager then static cache, model by model: repeat until it logs '0 of N ... to do'",
             "# (on a fresh machine add the merged files of earlier calls on the same GPU kind:",
             "# --skip-done docs/benchmarks/data/compare_hf_h100_*.json)",
             f"{base} --engines hf_eager,hf_static --time-limit-s 540{copy}",
             "# then, anywhere with matplotlib (pieces from several calls or machines in one folder):",
             "python3 bench/compare_hf.py merge PIECES_DIR && "
             "python3 bench/report.py --compare PIECES_DIR/merged.json"]
    try:
        print("\n".join(lines))
    except BrokenPipeError:
        pass


def count_tokens_main(argv):
    """Token counts of the text prompt sets under the real tokenizers (CPU, tokenizers package;
    the files come from scripts/fetch-tokenizers). BOS counted where the tokenizer adds one."""
    ap = argparse.ArgumentParser(prog="compare_hf.py count-tokens")
    ap.add_argument("--tokenizers", default=os.path.join(ROOT, "models", "tokenizers"))
    a = ap.parse_args(argv)
    from tokenizers import Tokenizer
    sets = {
        "seed002": json.load(open(os.path.join(ROOT, "tests", "fixtures", "seed_prompts.json")))["prompts"],
        "seed000_long": json.load(open(os.path.join(PROMPTS_DIR, "seed000_long.json")))["prompts"],
    }
    fams = {"llama3.2": "llama3.2", "qwen": "qwen3"}
    doc = {"note": "token counts of the seeds' prompt sets, used as prompt lengths by "
                   "bench/compare_hf.py (written by `compare_hf.py count-tokens`)",
           "tokenizers": {}, "sets": {}}
    toks = {}
    for fam, folder in fams.items():
        p = os.path.join(a.tokenizers, folder, "tokenizer.json")
        toks[fam] = Tokenizer.from_file(p)
        doc["tokenizers"][fam] = {"file": os.path.relpath(p, ROOT),
                                  "sha256": hashlib.sha256(open(p, "rb").read()).hexdigest(),
                                  "models": [m for m in MODELS if tokenizer_family(m) == fam]}
    for name, prompts in sets.items():
        doc["sets"][name] = {fam: [len(t.encode(p).ids) for p in prompts] for fam, t in toks.items()}
    json.dump(doc, open(TOKEN_COUNTS, "w"), indent=1)
    print(json.dumps(doc["sets"]))


def main():
    argv = sys.argv[1:]
    sub = argv[0] if argv and not argv[0].startswith("-") else "run"
    rest = argv[1:] if argv and argv[0] == sub else argv
    table = {"run": run_main, "merge": merge_main, "plan": plan_main, "ab": ab_main,
             "count-tokens": count_tokens_main,
             "_make-weights": _make_weights_main, "_hf-worker": _hf_worker_main}
    if sub not in table:
        raise SystemExit(f"unknown subcommand '{sub}' (run, merge, plan, ab, count-tokens)")
    table[sub](rest)


if __name__ == "__main__":
    main()
