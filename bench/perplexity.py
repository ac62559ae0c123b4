#!/usr/bin/env python3
"""Perplexity of the default model on bench/texts/english.txt: lite-llama against HF transformers
on the same GGUF and the same tokens; writes docs/benchmarks/accuracy.md and a JSON record.

  lite-llama  `lite-llama score -m MODEL --text FILE --device cpu --full` with
              LITE_LLAMA_CPU_INT16=0 (fp32 activations, weights dequantised in registers), as it is
              (the default: int16 activation codes, exact integer sums), and with
              LITE_LLAMA_CPU_Q8=1 (int8 activations, the llama.cpp-style fast path);
  HF          AutoModelForCausalLM.from_pretrained(dir, gguf_file=..., dtype=float32) (transformers
              dequantises the GGUF to fp32), one forward over the whole text.
Tokens: lite-llama's own tokenization of the file (`lite-llama tokenize`) is compared with HF's
(AutoTokenizer from the same GGUF); when they differ, both engines score lite-llama's ids
(`score --tokens`), so the perplexities always cover identical token sequences.
Perplexity = exp(mean negative log-likelihood of tokens 2..N given their prefixes).

Runs on the CPU (a few minutes on 2 cores). --cuda also scores on the GPU (bf16): GPU-ONLY,
not executed where this script was written.

usage: python bench/perplexity.py [--bin build/bin/lite-llama] [--model models/SmolLM2-135M-Instruct.Q4_1.gguf]
                                  [--text bench/texts/english.txt] [--cuda] [--out docs/benchmarks/accuracy.md]
Needs torch, transformers and gguf (not in CI).
"""
import argparse
import datetime
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sh(cmd, env=None):
    t0 = time.time()
    r = subprocess.run(cmd, text=True, capture_output=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return r.stdout, time.time() - t0


def ours_tokens(a):
    out, _ = sh([a.bin, "tokenize", "-m", a.model, "--json", "-q", open(a.text).read()])
    return json.loads(out)["tokens"]


def rel(p):
    p = os.path.abspath(p)
    return os.path.relpath(p, ROOT) if p.startswith(ROOT + os.sep) else p


def ours_score(a, tok_file, device="cpu", env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    cmd = [a.bin, "score", "-m", a.model, "--tokens", tok_file, "--device", device, "--full", "-q",
           "--ctx", "8192"]
    out, secs = sh(cmd, env)
    shown = [rel(a.bin), "score", "-m", rel(a.model), "--tokens", "IDS.json"] + cmd[6:]
    d = json.loads(out)
    s = d["sequences"][0]
    return {"ppl": d["ppl"], "nll": d["nll"], "scored_tokens": d["scored_tokens"],
            "logprobs": s["logprobs"], "argmax": s["argmax"], "seconds": round(secs, 1),
            "command": " ".join(f"{k}={v}" for k, v in (env_extra or {}).items()) + (" " if env_extra else "")
                       + shlex.join(shown)}


def ours_score_text(a):
    """The plain CLI path: `score --text` tokenizes the file itself."""
    cmd = [a.bin, "score", "-m", a.model, "--text", a.text, "--device", "cpu", "-q"]
    out, secs = sh(cmd)
    d = json.loads(out)
    return {"ppl": d["ppl"], "nll": d["nll"], "scored_tokens": d["scored_tokens"], "seconds": round(secs, 1),
            "command": shlex.join([rel(a.bin), "score", "-m", rel(a.model), "--text", rel(a.text), "--device", "cpu"])}


def hf_score(a, ids):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    d, f = os.path.dirname(os.path.abspath(a.model)), os.path.basename(a.model)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    hf_ids = tok(open(a.text).read()).input_ids
    t0 = time.time()
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    torch.set_num_threads(os.cpu_count() or 1)
    with torch.no_grad():
        x = torch.tensor([ids])
        logits = model(x).logits[0, :-1].float()
        lp = torch.log_softmax(logits, -1)
        tgt = torch.tensor(ids[1:])
        tok_lp = lp.gather(1, tgt[:, None])[:, 0]
        argmax = logits.argmax(-1)
    nll = float(-tok_lp.mean())
    import transformers
    return {"ppl": math.exp(nll), "nll": nll, "scored_tokens": len(ids) - 1,
            "logprobs": tok_lp.tolist(), "argmax": argmax.tolist(), "seconds": round(time.time() - t0, 1),
            "hf_ids": hf_ids, "versions": f"transformers {transformers.__version__}, torch {torch.__version__}"}


def compare(ref, got):
    n = min(len(ref["logprobs"]), len(got["logprobs"]))
    diffs = [abs(ref["logprobs"][i] - got["logprobs"][i]) for i in range(n)]
    agree = sum(ref["argmax"][i] == got["argmax"][i] for i in range(n)) / n
    return {"max_abs_logprob_diff": max(diffs), "mean_abs_logprob_diff": sum(diffs) / n,
            "argmax_agreement": agree, "ppl_rel_diff": got["ppl"] / ref["ppl"] - 1}


# The 4-model run of tests/gpu/model_parity.py shown (its results carry HF's bf16 control per model).
PARITY_RUN = "gpu_parity_h100_90799ea.json"


def gpu_parity_table():
    """The 4-model GPU parity table of docs/benchmarks/gpu.md, from its JSON: (doc, file name,
    table, control sentence)."""
    path = os.path.join(ROOT, "docs", "benchmarks", "data", PARITY_RUN)
    if not os.path.exists(path):
        return None
    d = json.load(open(path))
    # Runs since the per-setting parity (model_parity.py's SETTINGS) carry one entry per setting:
    # the table shows the default's.
    res = [{**r, **next(x for x in r["settings"] if x["setting"] == "default")} if "settings" in r else r
           for r in d["results"]]
    names = {"llama-3.2-1b": "Llama-3.2-1B", "llama-3.2-3b": "Llama-3.2-3B", "qwen2.5-3b": "Qwen2.5-3B",
             "qwen3-4b": "Qwen3-4B"}
    rows = ["| model | top-1 agreement | on decode steps | max abs logit err | mean abs err | rel. L2 err | "
            "logit std | HF bf16 control: top-1 / rel. L2 |", "|" + " --- |" * 8]
    for r in res:
        rows.append(f"| {names.get(r['model'], r['model'])} | {100 * r['top1_agreement']:.1f}% | "
                    f"{100 * r['top1_agreement_decode_tail']:.1f}% | {r['max_abs_err']:.3f} | {r['mean_abs_err']:.3f} | "
                    f"{100 * r['rel_l2_err']:.1f}% | {r['ref_logit_std']:.2f} | "
                    f"{100 * r['control_hf_bf16_top1_agreement']:.1f}% / {100 * r['control_hf_bf16_rel_l2_err']:.1f}% |")
    l2_better = sum(r["rel_l2_err"] <= r["control_hf_bf16_rel_l2_err"] for r in res)
    dtop = [100 * (r["top1_agreement"] - r["control_hf_bf16_top1_agreement"]) for r in res]
    ctl = ("Control column, same script: HF's own bf16 forward against its fp32 forward on the same "
           f"weights. lite-llama's rel. L2 error is at or below it on {l2_better} of {len(res)} models, "
           f"its top-1 agreement {min(dtop):+.1f} to {max(dtop):+.1f} points from it: lite-llama's "
           "bf16 error is of the size of bf16 arithmetic's own.")
    return d, PARITY_RUN, "\n".join(rows), ctl


def render(doc, json_path, out):
    """accuracy.md from a run's JSON record."""
    jname = os.path.basename(json_path)
    ours = next(v for k, v in doc["results"].items() if k.startswith("lite-llama, CPU (default"))
    tok_note = ("the same ids from lite-llama and from HF" if doc["tokenizations_equal"] else
                "lite-llama's ids; HF's tokenizer differs, both engines score lite-llama's ids")
    L = []
    w = L.append
    w("# Accuracy")
    w("")
    w("## Perplexity of the default model: lite-llama against HF transformers (CPU)")
    w("")
    w(f"Text: [`{doc['text']}`](../../{doc['text']}), {doc['words']:,} words of English prose, "
      f"{doc['tokens']:,} tokens ({tok_note}"
      f"; source in [`bench/texts/README.md`](../../bench/texts/README.md)). Model: the default "
      f"SmolLM2-135M-Instruct `Q4_1` GGUF (`{doc['model']}`), the whole text as one sequence, "
      f"teacher-forced; perplexity = exp(mean negative log-likelihood) over {doc['tokens'] - 1:,} predicted tokens.")
    w("")
    w(f"Machine: {doc['machine']}. Date {doc['date']}, commit `{doc['commit']}`, {doc['hf']}. Command: "
      f"`{doc['command'].strip()}`; raw data: [`data/{jname}`](data/{jname}).")
    w("")
    w("| engine | perplexity | mean NLL (nats) | vs HF | max abs logprob diff | mean abs logprob diff | argmax agreement | wall s |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for k, v in doc["results"].items():
        c = doc["vs_hf"].get(k)
        w(f"| {k} | **{v['ppl']:.4f}** | {v['nll']:.6f} | "
          + (f"{100 * c['ppl_rel_diff']:+.4f}% | {c['max_abs_logprob_diff']:.2e} | {c['mean_abs_logprob_diff']:.2e} | "
             f"{100 * c['argmax_agreement']:.2f}% |" if c else "reference | - | - | - |")
          + f" {v['seconds']} |")
    w("")
    w(f"The plain command `{doc['score_text']['command']}` (the CLI tokenizes the file itself) gives perplexity "
      f"{doc['score_text']['ppl']:.6f} over {doc['score_text']['scored_tokens']:,} tokens, the same as the table's row "
      f"({ours['ppl']:.6f}), which scored the ids handed to both engines "
      f"(`{ours['command']}`).")
    w("")
    w("Wall times are of a shared 2-core machine under other load: not a speed measurement (CPU "
      "speed: [cpu.md](cpu.md)).")
    w("")
    w("Per-token log-probabilities are compared position by position (logprob of the actual next "
      "token; argmax = the engine's top-1 prediction at that position). HF runs the model dequantised "
      "to fp32; lite-llama's fp32-activation CPU path dequantises the Q4_1/Q8_0 blocks in registers, "
      "so the two compute the same function up to summation order; its default rounds each "
      "activation to an int16 code per block of 32 (at most amax / 65534) before exact integer sums. The int8 "
      "activation path (llama.cpp's approach, faster on the CPU: [cpu.md](cpu.md)) quantises every "
      "activation vector to 8 bits before each projection, which is what its column shows.")
    w("")
    w("Rerun: `python bench/perplexity.py` (needs torch, transformers and gguf; a few minutes "
      "on 2 cores; `--render data/perplexity_DATE.json` rewrites this page from a saved run). On a GPU machine, `--cuda` adds lite-llama's bf16 CUDA path as a row (not run yet).")
    w("")
    pt = gpu_parity_table()
    if pt:
        d, name, table, ctl = pt
        w("## GPU: logits against HF transformers (from [gpu.md](gpu.md#correctness-against-hf-transformers))")
        w("")
        w(f"Copied from [gpu.md](gpu.md#real-shapes-random-weights-testsgpumodel_paritypy) ({d['device']}, "
          f"torch {d['torch']}, transformers {d['transformers']}; data `data/{name}`): "
          "`tests/gpu/model_parity.py` builds each model from its real config with transformers' "
          "random init (bf16 safetensors), HF computes fp32 logits, lite-llama scores the same 4 "
          "sequences (23, 77, 128, 200 tokens; the last 16 of each through decode steps) on the GPU "
          "in bf16; 424 positions per model.")
        w("")
        w(table)
        w("")
        if ctl:
            w(ctl + " Random models of these depths have nearly flat next-token distributions "
                    "(logit std ~0.9 over 128-152k tokens), so top-1 often flips on bf16 rounding; see "
                    "gpu.md for the discussion and for the default model's GPU greedy near-ties.")
            w("")
    open(out, "w").write("\n".join(L))
    print("wrote", os.path.relpath(out, ROOT))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "lite-llama"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--text", default=os.path.join(ROOT, "bench", "texts", "english.txt"))
    ap.add_argument("--cuda", action="store_true", help="also score on the GPU (bf16) [GPU-ONLY]")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks", "accuracy.md"))
    ap.add_argument("--json", default=None, help="raw results (default docs/benchmarks/data/perplexity_DATE.json)")
    ap.add_argument("--render", default=None, metavar="JSON", help="only rewrite --out from a saved run's JSON")
    a = ap.parse_args()
    if a.render:
        render(json.load(open(a.render)), a.render, a.out)
        return
    today = datetime.date.today().isoformat()
    a.json = a.json or os.path.join(ROOT, "docs", "benchmarks", "data", f"perplexity_{today}.json")

    ids = ours_tokens(a)
    tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump([ids], tmp)
    tmp.close()
    print(f"text: {len(open(a.text).read().split())} words, {len(ids)} tokens (lite-llama)", flush=True)
    hf = hf_score(a, ids)
    same_tokens = hf.pop("hf_ids") == ids
    print(f"HF fp32: ppl {hf['ppl']:.4f} ({hf['seconds']} s); tokenizations equal: {same_tokens}", flush=True)
    rows = {"HF transformers (fp32, GGUF dequantised)": hf}
    ours = ours_score(a, tmp.name, env_extra={"LITE_LLAMA_CPU_INT16": "0"})
    print(f"lite-llama cpu fp32: ppl {ours['ppl']:.4f} ({ours['seconds']} s)", flush=True)
    rows["lite-llama, CPU, fp32 activations (`LITE_LLAMA_CPU_INT16=0`)"] = ours
    i16 = ours_score(a, tmp.name)
    print(f"lite-llama cpu (default, int16 codes): ppl {i16['ppl']:.4f} ({i16['seconds']} s)", flush=True)
    rows["lite-llama, CPU (default: int16 activation codes)"] = i16
    q8 = ours_score(a, tmp.name, env_extra={"LITE_LLAMA_CPU_Q8": "1"})
    print(f"lite-llama cpu q8: ppl {q8['ppl']:.4f} ({q8['seconds']} s)", flush=True)
    rows["lite-llama, CPU, `LITE_LLAMA_CPU_Q8=1` (int8 activations)"] = q8
    plain = ours_score_text(a)
    print(f"lite-llama score --text: ppl {plain['ppl']:.6f}", flush=True)
    if a.cuda:  # GPU-ONLY
        g = ours_score(a, tmp.name, device="cuda")
        rows["lite-llama, CUDA (bf16)"] = g
    os.unlink(tmp.name)

    cmp = {k: compare(hf, v) for k, v in rows.items() if v is not hf}
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], text=True,
                            capture_output=True).stdout.strip()
    cpu = "cpu"
    try:
        cpu = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t")
    except (OSError, IndexError):
        pass
    doc = {"date": today, "commit": commit, "machine": f"{cpu}, {os.cpu_count()} cores", "text": os.path.relpath(a.text, ROOT),
           "model": os.path.relpath(a.model, ROOT), "tokens": len(ids), "tokenizations_equal": same_tokens,
           "hf": hf["versions"], "command": " ".join(["python", rel(__file__)] + sys.argv[1:]),
           "score_text": plain,
           "results": {k: {kk: vv for kk, vv in v.items() if kk not in ("logprobs", "argmax")} for k, v in rows.items()},
           "vs_hf": cmp}
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    doc["words"] = len(open(a.text).read().split())
    json.dump(doc, open(a.json, "w"), indent=1)
    render(doc, a.json, a.out)
    print("wrote", os.path.relpath(a.json, ROOT))


if __name__ == "__main__":
    main()
