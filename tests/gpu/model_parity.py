#!/usr/bin/env python3
"""GPU accuracy of lite-llama (16-bit activations) against HF transformers (fp32) on the real shapes of
Llama-3.2-1B, Llama-3.2-3B, Qwen2.5-3B and Qwen3-4B with random weights.

For each config: transformers builds the model with its own random init (seeded) in bf16 and
saves it as safetensors; HF computes fp32 logits of a batch of mixed-length token sequences
(teacher-forced, weights upcast from the same bf16 values); lite-llama scores the same
sequences on the GPU (`lite-llama score`, prefill chunks + a decode tail, so both attention
kernels run) and dumps its logits, once per setting (the default, --dtype bf16 / fp16, the
16-bit residual stream). Reported per model and setting: top-1 agreement over all positions,
max/mean absolute logit error, relative L2 error, and greedy agreement: each sequence's last
DECODE_TAIL tokens are HF fp32's greedy continuation, so the decode tail's argmax gives the tokens
equal before the first divergence and HF's top-2 margin there. Writes JSON to argv[2] (default stdout).

As a control, HF's own bf16 forward is compared with its fp32 forward in the same way: random
models of these depths are sensitive to rounding, and the control says how much agreement bf16
arithmetic itself allows.

usage: [PARITY_TP=2,4 | PARITY_QUANTIZE=int8] [PARITY_MAX_SEQS=N (prefill chunk, default 64)] model_parity.py BUILD_BIN [OUT_JSON] [MODEL ...]
"""
import gc, json, os, subprocess, sys, tempfile, time

import numpy as np
import torch
from transformers import AutoConfig, AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = sys.argv[1]
OUT = sys.argv[2] if len(sys.argv) > 2 else None
MODELS = sys.argv[3:] or ["llama-3.2-1b", "llama-3.2-3b", "qwen2.5-3b", "qwen3-4b"]
LENGTHS = [23, 77, 128, 200]
# (name, extra flags, extra environment): the default (--dtype auto) and each choice it makes.
SETTINGS = [
    ("default", [], {}),
    ("--dtype bf16", ["--dtype", "bf16"], {}),
    ("--dtype fp16", ["--dtype", "fp16"], {}),
    ("--dtype bf16, 16-bit residual", ["--dtype", "bf16"], {"LITE_LLAMA_FP32_RESIDUAL": "0"}),
]
# PARITY_TP=2,4: tensor parallelism instead (issue 27): tp 1 and each listed size, bf16 and the
# default, so that each tp's agreement with HF fp32 sits beside tp 1's.
if os.environ.get("PARITY_TP"):
    SETTINGS = [(f"tp {n}{name}", (["--tp", str(n)] if n > 1 else []) + flags, {})
                for name, flags in (("", []), (", --dtype bf16", ["--dtype", "bf16"]))
                for n in [1] + [int(t) for t in os.environ["PARITY_TP"].split(",")]]
# PARITY_QUANTIZE=int8: the default and that --quantize mode only (quantised weights, MoE experts
# included).
if os.environ.get("PARITY_QUANTIZE"):
    q = os.environ["PARITY_QUANTIZE"]
    SETTINGS = [("default", [], {}), (f"--quantize {q}", ["--quantize", q], {})]
DECODE_TAIL = 16


def greedy(ours, ref, seqs, tail_idx):
    """Greedy agreement on the decode tails (HF fp32's greedy tokens): tokens equal before each
    sequence's first divergence, HF's top-2 margin there, and the largest change of HF's top-2
    margin over the tail rows (the rounding noise a near-tie is measured against)."""
    equal, divs, changes = 0, [], []
    for i, s in enumerate(seqs):
        rows = tail_idx[i * DECODE_TAIL:(i + 1) * DECODE_TAIL]
        targets = s[len(s) - DECODE_TAIL:]
        k = next((j for j, r in enumerate(rows) if ours[r].argmax() != targets[j]), None)
        equal += DECODE_TAIL if k is None else k
        for r in rows:
            top = np.argsort(-ref[r])[:2]
            changes.append(float(abs((ours[r, top[0]] - ours[r, top[1]]) - (ref[r, top[0]] - ref[r, top[1]]))))
        if k is not None:
            top = np.sort(ref[rows[k]])[-2:]
            divs.append({"sequence": i, "step": k, "hf_margin": float(top[1] - top[0])})
    return {"greedy_equal_before_divergence": equal, "greedy_tokens": DECODE_TAIL * len(seqs),
            "greedy_divergences": divs, "max_margin_change_tail": max(changes)}


def run_one(name, workdir):
    torch.manual_seed(0)
    cfg = AutoConfig.from_pretrained(os.path.join(HERE, "configs", name + ".json"))
    t0 = time.time()
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).cuda().eval()
    d = os.path.join(workdir, name)
    model.save_pretrained(d, safe_serialization=True)
    rng = np.random.default_rng(1)
    seqs = [rng.integers(0, cfg.vocab_size, n).tolist() for n in LENGTHS]
    # Each sequence ends in HF fp32's greedy continuation of its first tokens (DECODE_TAIL steps),
    # so the teacher-forced decode tail is also a greedy check: our argmax there equals HF's next
    # token until our greedy text would first diverge. (The fp32 model is not cast back to bf16:
    # that would round its fp32 rotary buffers.)
    model = model.float()
    refs = []
    with torch.no_grad():
        for i, s in enumerate(seqs):
            ids = torch.tensor([s[:len(s) - DECODE_TAIL]], device="cuda")
            for _ in range(DECODE_TAIL):
                ids = torch.cat([ids, model(ids).logits[0, -1].argmax().view(1, 1)], 1)
            seqs[i] = ids[0].tolist()
            refs.append(model(ids).logits[0, :-1].float().cpu().numpy())
    del model
    gc.collect()
    torch.cuda.empty_cache()
    # The control: HF's own bf16 forward of the saved weights.
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16).cuda().eval()
    hf_bf16 = []
    with torch.no_grad():
        for s in seqs:
            hf_bf16.append(model(torch.tensor([s], device="cuda")).logits[0, :-1].float().cpu().numpy())
    del model
    gc.collect()
    torch.cuda.empty_cache()
    tok_file = os.path.join(workdir, name + ".tokens.json")
    dump = os.path.join(workdir, name + ".ours.f32")
    json.dump(seqs, open(tok_file, "w"))
    V = cfg.vocab_size
    ref = np.concatenate(refs, 0)
    # Agreement on the decode-tail positions alone (the flash-decoding path).
    tail_idx = np.concatenate([np.arange(sum(LENGTHS[:i]) - i + LENGTHS[i] - 1 - DECODE_TAIL,
                                         sum(LENGTHS[:i]) - i + LENGTHS[i] - 1) for i in range(len(LENGTHS))])
    res = {"model": name, "positions": int(ref.shape[0]), "ref_logit_std": float(ref.std()), "settings": []}
    for setting, extra, env in SETTINGS:
        cmd = [BIN, "score", "-m", d, "--tokens", tok_file, "--decode-tail", str(DECODE_TAIL),
               "--dump-logits", dump, "--device", "cuda", "--max-num-seqs", os.environ.get("PARITY_MAX_SEQS", "64"), "--ctx", "512",
               "--gpu-memory-utilization", "0.5"] + extra
        r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
        if r.returncode != 0:
            res["settings"].append({"setting": setting, "error": r.stderr.strip()[-2000:]})
            continue
        ours = np.fromfile(dump, dtype="<f4").reshape(-1, V)
        assert ours.shape == ref.shape, (ours.shape, ref.shape)
        diff = np.abs(ours - ref)
        res["settings"].append({
            "setting": setting, **greedy(ours, ref, seqs, tail_idx),
            "top1_agreement": float((ours.argmax(1) == ref.argmax(1)).mean()),
            "top1_agreement_decode_tail": float((ours[tail_idx].argmax(1) == ref[tail_idx].argmax(1)).mean()),
            "max_abs_err": float(diff.max()), "mean_abs_err": float(diff.mean()),
            "rel_l2_err": float(np.linalg.norm(ours - ref) / np.linalg.norm(ref))})
        os.remove(dump)
    res["seconds"] = round(time.time() - t0, 1)
    hb = np.concatenate(hf_bf16, 0)
    res["control_hf_bf16_top1_agreement"] = float((hb.argmax(1) == ref.argmax(1)).mean())
    res["control_hf_bf16_rel_l2_err"] = float(np.linalg.norm(hb - ref) / np.linalg.norm(ref))
    res["control_hf_bf16_max_abs_err"] = float(np.abs(hb - ref).max())
    return res


def main():
    results = []
    doc = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "transformers": __import__("transformers").__version__, "lengths": LENGTHS,
           "decode_tail": DECODE_TAIL, "results": results}
    with tempfile.TemporaryDirectory(dir="/tmp") as w:
        for m in MODELS:
            r = run_one(m, w)
            print(json.dumps(r), flush=True)
            results.append(r)
            if OUT:  # after each model: a time limit keeps what finished
                json.dump(doc, open(OUT, "w"), indent=1)
            subprocess.run(["rm", "-rf", os.path.join(w, m)])


if __name__ == "__main__":
    main()
