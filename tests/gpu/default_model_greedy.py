#!/usr/bin/env python3
"""The default model on the GPU (GGUF dequantised to bf16) against the CPU path: greedy
64-token continuations of the four seed prompts. The CPU path equals HF transformers fp32 token
for token (tests/e2e), so the reference ids and per-step top-2 margins come from the HF fixture;
each divergence is reported with HF's margin at that step (a near-tie when small).
Runs with and without CUDA graphs (they must agree with each other exactly).

usage: default_model_greedy.py BUILD_BIN MODEL_GGUF [OUT_JSON]
"""
import json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN, MODEL = sys.argv[1], sys.argv[2]
OUT = sys.argv[3] if len(sys.argv) > 3 else None
fx = json.load(open(os.path.join(ROOT, "tests", "fixtures", "greedy", "greedy.json")))


def generate(extra):
    cmd = [BIN, "generate", "-m", MODEL, "--device", "cuda", "-n", "64", "--temp", "0",
           "--ignore-eos", "--json", "--ctx", "512"] + extra
    for c in fx["cases"]:
        cmd += ["-p", c["prompt"]]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("generate failed: " + r.stderr[-2000:])
    return [x["token_ids"] for x in json.loads(r.stdout)["results"]]


def compare(got):
    rows = []
    for c, ids in zip(fx["cases"], got):
        ref = c["greedy_ids"]
        k = next((i for i in range(min(len(ref), len(ids))) if ref[i] != ids[i]), None)
        rows.append({"prompt": c["prompt"][:40], "equal": ids == ref, "first_divergence": k,
                     "hf_margin_at_divergence": None if k is None else c["step_margins"][k],
                     "min_hf_margin_before": None if not k else min(c["step_margins"][:k])})
    return rows


def score(device, path):
    """Teacher-forced logits of prompt + HF greedy ids on one device."""
    seqs = [c["prompt_ids"] + c["greedy_ids"] for c in fx["cases"]]
    tok = path + ".tokens.json"
    json.dump(seqs, open(tok, "w"))
    r = subprocess.run([BIN, "score", "-m", MODEL, "--tokens", tok, "--dump-logits", path,
                        "--device", device, "--ctx", "512", "--decode-tail", "64"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("score failed: " + r.stderr[-2000:])
    import numpy as np
    return np.fromfile(path, dtype="<f4").reshape(-1, 49152), seqs


def logit_error():
    """bf16 (GPU) against fp32 (CPU = HF) logits on the reference path: how large a top-2
    margin bf16 rounding can overturn."""
    import numpy as np
    g, seqs = score("cuda", "/tmp/greedy_gpu.f32")
    c, _ = score("cpu", "/tmp/greedy_cpu.f32")
    d = np.abs(g - c)
    # Per generated step: the change in (top1 - top2) margin of the CPU's ranking.
    out, row = [], 0
    for case, s in zip(fx["cases"], seqs):
        n0 = len(case["prompt_ids"]) - 1
        for k in range(len(case["greedy_ids"])):
            r = row + n0 + k
            top = np.argsort(-c[r])[:2]
            out.append(float(abs((g[r, top[0]] - g[r, top[1]]) - (c[r, top[0]] - c[r, top[1]]))))
        row += len(s) - 1
    return {"max_abs_logit_diff": float(d.max()), "mean_abs_logit_diff": float(d.mean()),
            "max_margin_change": max(out), "p99_margin_change": float(np.percentile(out, 99))}


graph = generate([])
eager = generate(["--no-cuda-graph"])
doc = {"with_graphs": compare(graph), "without_graphs": compare(eager),
       "graphs_equal_eager": graph == eager, "bf16_vs_fp32": logit_error()}
print(json.dumps(doc, indent=1))
if OUT:
    json.dump(doc, open(OUT, "w"), indent=1)
