#!/usr/bin/env python3
"""lite-llama's Python API beside HF transformers from the same Python process, same weights.

    PYTHONPATH=build/python python3 bench/python_vs_hf.py CONFIG TOKENIZER_DIR \
        [--batch 1,16,64] [--prompt-len 128] [--gen-len 128] [--runs 3] [--out result.json]

transformers builds CONFIG with its own random init (seeded, bf16, on the GPU) and saves it with
the tokenizer files of TOKENIZER_DIR; then, per batch size, random prompts of the same token ids
go through `model.generate` (greedy, exactly gen-len new tokens; `pipeline("text-generation")`
calls this same generate after tokenizing) and through `LLM(dir).generate` (greedy, EOS ignored).
Throughput = batch x gen-len / wall time of the call (median of the timed runs after a warm-up).
"""
import argparse
import gc
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time


def make_weights(config, tok_dir, out_dir):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = json.load(open(config))
    tok = json.load(open(os.path.join(tok_dir, "tokenizer.json")))
    n_tok = max(t["id"] for t in tok.get("added_tokens", [])) + 1
    cfg["vocab_size"] = max(cfg["vocab_size"], n_tok)  # every tokenizer id has an embedding row
    json.dump(cfg, open(os.path.join(out_dir, "config.json"), "w"))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok_dir, f), out_dir)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(out_dir), dtype=torch.bfloat16)
    model.save_pretrained(out_dir, safe_serialization=True)
    return model


def prompts_for(b, prompt_len, vocab, seed):
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(prompt_len)] for _ in range(b)]


def hf_side(model, a, batches, vocab):
    import torch
    model.eval()
    out = {}
    for b in batches:
        times = []
        for r in range(1 + a.runs):
            ids = torch.tensor(prompts_for(b, a.prompt_len, vocab, r), device="cuda")
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.no_grad():
                res = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=a.gen_len,
                                     min_new_tokens=a.gen_len, do_sample=False, pad_token_id=0)
            torch.cuda.synchronize()
            assert res.shape[1] == a.prompt_len + a.gen_len
            if r:
                times.append(time.perf_counter() - t0)
        out[b] = b * a.gen_len / statistics.median(times)
        print(f"hf generate batch {b}: {out[b]:.0f} tok/s", file=sys.stderr)
    return out


def lite_side(wdir, a, batches, vocab):
    from lite_llama import LLM, SamplingParams
    max_b = max(batches)
    ctx = a.prompt_len + a.gen_len + 8
    llm = LLM(wdir, device="cuda", max_num_seqs=max_b, ctx=ctx, kv_tokens=max_b * ctx)
    sp = SamplingParams(temperature=0, max_tokens=a.gen_len, ignore_eos=True)
    out = {}
    for b in batches:
        times = []
        for r in range(1 + a.runs):
            prompts = [{"prompt_token_ids": p} for p in prompts_for(b, a.prompt_len, vocab, r)]
            t0 = time.perf_counter()
            res = llm.generate(prompts, sp, use_tqdm=False)
            assert all(len(o.outputs[0].token_ids) == a.gen_len for o in res)
            if r:
                times.append(time.perf_counter() - t0)
        out[b] = b * a.gen_len / statistics.median(times)
        print(f"lite-llama LLM.generate batch {b}: {out[b]:.0f} tok/s", file=sys.stderr)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config")
    p.add_argument("tokenizer_dir")
    p.add_argument("--batch", default="1,16,64")
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--gen-len", type=int, default=128)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out")
    a = p.parse_args()
    batches = [int(x) for x in a.batch.split(",")]
    import torch
    with tempfile.TemporaryDirectory() as wdir:
        model = make_weights(a.config, a.tokenizer_dir, wdir)
        vocab = min(model.config.vocab_size, 32000)
        hf = hf_side(model, a, batches, vocab)
        del model
        gc.collect()
        torch.cuda.empty_cache()
        lite = lite_side(wdir, a, batches, vocab)
    rows = [{"batch": b, "hf_generate_tok_s": hf[b], "lite_llama_generate_tok_s": lite[b],
             "ratio": lite[b] / hf[b]} for b in batches]
    res = {"config": a.config, "prompt_len": a.prompt_len, "gen_len": a.gen_len, "runs": a.runs,
           "torch": torch.__version__, "transformers": __import__("transformers").__version__, "rows": rows}
    if a.out:
        json.dump(res, open(a.out, "w"), indent=1)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
