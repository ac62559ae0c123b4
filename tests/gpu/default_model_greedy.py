#!/usr/bin/env python3
"""GPU numerics of the default model against the fp32 reference, for each CUDA setting.

The CPU path equals HF transformers fp32 token for token (tests/e2e), so the reference greedy ids
and per-step top-2 margins come from the HF fixture (tests/fixtures/greedy: four seed prompts, 64
greedy tokens each). For each setting (the default, and --dtype / --quantize / the residual and
GEMV switches one at a time) this reports:
  - greedy agreement: tokens equal to HF's before the first divergence, over all prompts, and
    each divergence with HF's top-2 margin there (the prompts as one batch; for the default
    setting also each prompt alone, whose decode steps take the one-token paths);
  - teacher-forced logits of prompt + HF's greedy ids (prefill, then a 64-token decode tail)
    against the CPU's fp32 logits: top-1 agreement, max |logit error|, and the largest change of
    a top-2 margin (the rounding noise: a divergence where HF's margin is below it is a near-tie);
  - perplexity of bench/texts/english.txt (prefill + a 512-token decode tail) against the CPU's.
The default setting is also run without CUDA graphs (graphs must equal eager token for token).

usage: default_model_greedy.py BUILD_BIN MODEL_GGUF [OUT_JSON] [--quick] [--wide]
(--quick: the default and the fp16 / fp32-residual settings of each decode path only, each also
with the prompts one at a time. --wide: the twenty prompts of tests/fixtures/greedy/greedy_wide.json
instead of the four seed prompts: 1,280 greedy tokens, so that one near-tie is not a fifth of the
sample.)
"""
import json, os, subprocess, sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
QUICK = "--quick" in sys.argv
WIDE = "--wide" in sys.argv
ARGS = [a for a in sys.argv[1:] if a not in ("--quick", "--wide")]
BIN, MODEL = ARGS[0], ARGS[1]
OUT = ARGS[2] if len(ARGS) > 2 else None
TEXT = os.path.join(ROOT, "bench", "texts", "english.txt")
fx = json.load(open(os.path.join(ROOT, "tests", "fixtures", "greedy", "greedy_wide.json" if WIDE else "greedy.json")))

# (name, extra flags, extra environment): the default, then every combination spelled out:
# activation type, residual stream, the quantised decode path (the integer GEMV on int16 or int8
# activation codes, 16-bit activations on the tensor-core GEMM, or in an fp32 GEMV).
PATHS = {"int16": {"LITE_LLAMA_GQ_DP4A_MAX": "8", "LITE_LLAMA_GQ_FP32": "0", "LITE_LLAMA_GQ_INT8_ACT": "0"},
         "int8 dp4a": {"LITE_LLAMA_GQ_DP4A_MAX": "8", "LITE_LLAMA_GQ_FP32": "0", "LITE_LLAMA_GQ_INT8_ACT": "1"},
         "mma": {"LITE_LLAMA_GQ_DP4A_MAX": "0", "LITE_LLAMA_GQ_FP32": "0"},
         "fp32 GEMV": {"LITE_LLAMA_GQ_DP4A_MAX": "8", "LITE_LLAMA_GQ_FP32": "1"}}


def setting(dtype, residual, path, quantize="auto"):
    env = {"LITE_LLAMA_FP32_RESIDUAL": "1" if residual == "fp32" else "0", **PATHS[path]}
    flags = ["--dtype", dtype] + (["--quantize", quantize] if quantize != "auto" else [])
    name = f"{dtype}, {residual} residual, " + (f"decode {path}" if quantize == "auto" else f"--quantize {quantize}")
    return name, flags, env


SETTINGS = [("default", [], {})] + [setting(d, r, p) for d in ("fp16", "bf16") for r in ("fp32", "16-bit")
                                    for p in PATHS] + \
           [setting(d, r, "int16", "none") for d in ("fp16", "bf16") for r in ("fp32", "16-bit")]
if QUICK:
    SETTINGS = [("default", [], {})] + [setting("fp16", "fp32", p) for p in PATHS]


def run(cmd, env):
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if r.returncode != 0:
        raise SystemExit(" ".join(cmd) + " failed: " + r.stderr[-2000:])
    return r.stdout


def generate(extra, env, one_at_a_time=False):
    """The prompts as one batch (decode steps of 4 tokens), or each alone (steps of 1 token)."""
    cmd = [BIN, "generate", "-m", MODEL, "--device", "cuda", "-n", "64", "--temp", "0",
           "--ignore-eos", "--json", "--ctx", "512"] + extra
    groups = [[c] for c in fx["cases"]] if one_at_a_time else [fx["cases"]]
    ids = []
    for g in groups:
        d = json.loads(run(cmd + [a for c in g for a in ("-p", c["prompt"])], env))
        ids += [x["token_ids"] for x in (d["results"] if "results" in d else [d])]  # one prompt: one object
    return ids


def compare(got, noise):
    rows, equal_before, total = [], 0, 0
    for c, ids in zip(fx["cases"], got):
        ref = c["greedy_ids"]
        k = next((i for i in range(min(len(ref), len(ids))) if ref[i] != ids[i]), None)
        equal_before += len(ref) if k is None else k
        total += len(ref)
        margin = None if k is None else c["step_margins"][k]
        rows.append({"prompt": c["prompt"][:40], "first_divergence": k, "hf_margin_at_divergence": margin,
                     "near_tie": None if k is None else bool(margin < noise)})
    return {"greedy_tokens_equal_before_divergence": equal_before, "greedy_tokens": total,
            "greedy_agreement": equal_before / total, "prompts": rows}


def score_logits(device, extra, env, path):
    """Teacher-forced logits of prompt + HF greedy ids (prefill, then a decode tail)."""
    seqs = [c["prompt_ids"] + c["greedy_ids"] for c in fx["cases"]]
    tok = path + ".tokens.json"
    json.dump(seqs, open(tok, "w"))
    run([BIN, "score", "-m", MODEL, "--tokens", tok, "--dump-logits", path, "--device", device,
         "--ctx", "512", "--decode-tail", "64"] + extra, env)
    return np.fromfile(path, dtype="<f4").reshape(-1, 49152), seqs


def perplexity(device, extra, env):
    out = run([BIN, "score", "-m", MODEL, "--text", TEXT, "--device", device, "--decode-tail", "512",
               "-q"] + extra, env)
    return json.loads(out)["ppl"]


def logit_error(g, c, seqs):
    d = np.abs(g - c)
    changes = []  # per generated step: the change of the CPU's top-2 margin
    row = 0
    for case, s in zip(fx["cases"], seqs):
        n0 = len(case["prompt_ids"]) - 1
        for k in range(len(case["greedy_ids"])):
            r = row + n0 + k
            top = np.argsort(-c[r])[:2]
            changes.append(float(abs((g[r, top[0]] - g[r, top[1]]) - (c[r, top[0]] - c[r, top[1]]))))
        row += len(s) - 1
    return {"teacher_forced_top1_agreement": float((g.argmax(1) == c.argmax(1)).mean()),
            "max_abs_logit_error": float(d.max()), "mean_abs_logit_error": float(d.mean()),
            "max_margin_change": max(changes), "p99_margin_change": float(np.percentile(changes, 99))}


def main():
    fp32 = {"LITE_LLAMA_CPU_INT16": "0"}  # the CPU's fp32-activation path: HF fp32's twin
    cpu_logits, seqs = score_logits("cpu", [], fp32, "/tmp/greedy_cpu.f32")
    cpu_ppl = perplexity("cpu", [], fp32)
    log = subprocess.run([BIN, "generate", "-m", MODEL, "--device", "cuda", "-n", "1", "-v", "-p", "Hi"],
                         capture_output=True, text=True).stderr
    doc = {"reference": fx["reference"], "cpu_perplexity": cpu_ppl, "settings": [],
           "default_dtype_choice": [l for l in log.splitlines() if "activations:" in l]}
    print(doc["default_dtype_choice"], flush=True)
    for name, extra, env in SETTINGS:
        g, _ = score_logits("cuda", extra, env, "/tmp/greedy_gpu.f32")
        err = logit_error(g, cpu_logits, seqs)
        res = {"setting": name, **compare(generate(extra, env), err["max_margin_change"]), **err}
        ppl = perplexity("cuda", extra, env)
        res["perplexity"] = ppl
        res["perplexity_vs_cpu"] = ppl / cpu_ppl - 1
        if name == "default":
            res["graphs_equal_eager"] = generate(extra, env) == generate(extra + ["--no-cuda-graph"], env)
        if name == "default" or QUICK:
            res["one_at_a_time"] = compare(generate(extra, env, True), err["max_margin_change"])
        print(json.dumps({k: v for k, v in res.items() if k != "prompts"}), flush=True)
        doc["settings"].append(res)
    if OUT:
        json.dump(doc, open(OUT, "w"), indent=1)


if __name__ == "__main__":
    main()
