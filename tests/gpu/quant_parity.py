#!/usr/bin/env python3
"""Quality of each --quantize scheme against lite-llama's own bf16 (teacher-forced), GPU.

For each model the same token sequences are scored with `--quantize none` (bf16, the reference)
and with each scheme; every position's logits are dumped and compared: top-1 agreement (all
positions, and the decode-tail positions alone), relative L2 error, max / mean absolute error,
and the mean KL divergence KL(bf16 || scheme) of the next-token distributions.

Models: the real shapes of Llama-3.2-1B/3B, Qwen2.5-3B and Qwen3-4B with random weights
(`--load-format dummy`: the same seeded weights for every scheme, quantised at load), and with
--default-model FILE the default model scoring bench/texts/english.txt (perplexity too).
Schemes: int8, int4, fp8 (W8A8 from 32 tokens: the prefill chunks) and fp8 with
LITE_LLAMA_FP8_GEMM=0 (W8A16 everywhere), and for the default model `auto` (its own Q4_1).

usage: quant_parity.py BIN OUT_JSON [--default-model FILE] [MODEL ...]
"""
import json, os, subprocess, sys, tempfile, time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LENGTHS = [23, 77, 128, 200]
DECODE_TAIL = 16
SCHEMES = [("int8", {}), ("int4", {}), ("fp8", {}), ("fp8_w8a16", {"LITE_LLAMA_FP8_GEMM": "0"})]


def score(bin_, model_args, quant, env, dump, decode_tail, inputs):
    cmd = [bin_, "score", *model_args, *inputs, "--decode-tail", str(decode_tail), "--dump-logits", dump,
           "--device", "cuda", "--quantize", quant, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if r.returncode != 0:
        raise RuntimeError(f"{quant}: {r.stderr.strip()[-1500:]}")
    return json.loads(r.stdout)


def log_softmax(x):
    m = x.max(1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(1, keepdims=True))


def compare(ref, got, tail_idx):
    diff = np.abs(got - ref)
    lp, lq = log_softmax(ref.astype(np.float64)), log_softmax(got.astype(np.float64))
    kl = (np.exp(lp) * (lp - lq)).sum(1)
    return {
        "top1_agreement": float((got.argmax(1) == ref.argmax(1)).mean()),
        "top1_agreement_decode_tail": float((got[tail_idx].argmax(1) == ref[tail_idx].argmax(1)).mean()),
        "rel_l2_err": float(np.linalg.norm(got - ref) / np.linalg.norm(ref)),
        "max_abs_err": float(diff.max()), "mean_abs_err": float(diff.mean()),
        "mean_kl": float(kl.mean()), "ref_logit_std": float(ref.std()),
    }


def run_model(bin_, name, work, schemes, model_args, inputs, V, lengths, decode_tail):
    t0 = time.time()
    ref_dump = os.path.join(work, "ref.f32")
    res = {"model": name, "schemes": {}}
    res["bf16"] = {k: v for k, v in score(bin_, model_args, "none", {}, ref_dump, decode_tail, inputs).items()
                   if not isinstance(v, (list, dict))}
    ref = np.fromfile(ref_dump, dtype="<f4").reshape(-1, V)
    lengths = lengths or [ref.shape[0] + 1]  # one text: its scored positions + 1
    # decode-tail rows: the last `decode_tail` positions of each sequence (dump order: by sequence)
    ends = np.cumsum([n - 1 for n in lengths])
    tail_idx = np.concatenate([np.arange(e - decode_tail, e) for e in ends])
    for q, env in schemes:
        d = os.path.join(work, q + ".f32")
        try:
            s = score(bin_, model_args, q.split("_")[0], env, d, decode_tail, inputs)
        except RuntimeError as e:
            res["schemes"][q] = {"error": str(e)}
            continue
        got = np.fromfile(d, dtype="<f4").reshape(-1, V)
        os.remove(d)
        r = compare(ref, got, tail_idx)
        r.update({k: v for k, v in s.items() if not isinstance(v, (list, dict))})
        res["schemes"][q] = r
        print(name, q, json.dumps({k: (round(v, 5) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
    os.remove(ref_dump)
    res["positions"] = int(ref.shape[0])
    res["seconds"] = round(time.time() - t0, 1)
    return res


def main():
    args = sys.argv[1:]
    bin_, out = args[0], args[1]
    rest = args[2:]
    default_model = None
    if "--default-model" in rest:
        i = rest.index("--default-model")
        default_model = rest[i + 1]
        rest = rest[:i] + rest[i + 2:]
    models = rest or ["llama-3.2-1b", "llama-3.2-3b", "qwen2.5-3b", "qwen3-4b"]
    results = []
    with tempfile.TemporaryDirectory(dir="/tmp") as w:
        if default_model:
            text = os.path.join(ROOT, "bench", "texts", "english.txt")
            V = int(json.loads(subprocess.run([bin_, "info", "-m", default_model, "--json"], capture_output=True,
                                              text=True, check=True).stdout)["vocab_size"])
            results.append(run_model(bin_, "default (" + os.path.basename(default_model) + ")", w,
                                     [("auto", {})] + SCHEMES, ["-m", default_model], ["--text", text], V,
                                     None, 512))
        for name in models:
            cfg_path = os.path.join(HERE, "configs", name + ".json")
            V = json.load(open(cfg_path))["vocab_size"]
            rng = np.random.default_rng(1)
            seqs = [rng.integers(0, V, n).tolist() for n in LENGTHS]
            tok_file = os.path.join(w, name + ".tokens.json")
            json.dump(seqs, open(tok_file, "w"))
            margs = ["-m", cfg_path, "--load-format", "dummy", "--max-num-seqs", "64", "--ctx", "512"]
            results.append(run_model(bin_, name, w, SCHEMES, margs, ["--tokens", tok_file], V, LENGTHS,
                                     DECODE_TAIL))
    doc = {"lengths": LENGTHS, "decode_tail": DECODE_TAIL, "results": results}
    try:
        doc["device"] = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                       capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    json.dump(doc, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
