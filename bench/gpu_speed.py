#!/usr/bin/env python3
"""GPU speed suite (issue: CUDA backend, part 8): one script, one run, same machine.

  1. the bandwidth reference: a large device-to-device copy (bytes read + written / time);
  2. `lite-llama bench` on Llama-3.2-1B shapes (random weights, bf16): batch 1/8/64, prompt 128,
     256 new tokens, with and without CUDA graphs, plus a per-op profile; prefill of 8 x 512;
     TTFT of one 128-token prompt; Qwen3-4B shapes at batch 1;
  3. HF transformers on the same shapes and weights' dtype: eager (sdpa) and static cache
     (which transformers compiles with torch.compile).
Writes speed.json and speed.md into OUT_DIR. Sections: --sections bw,ours,hf (default all).

usage: gpu_speed.py BUILD_BIN OUT_DIR [--sections ...] [--hf-batches 1,8,64]
"""
import argparse, json, os, statistics, subprocess, sys, time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(os.path.dirname(HERE), "tests", "gpu", "configs")


def copy_bandwidth(nbytes=4 << 30, iters=20):
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    a.random_(0, 255)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    t = statistics.median(times)
    del a, b
    torch.cuda.empty_cache()
    return {"bytes_moved": 2 * nbytes, "seconds": t, "GBps": 2 * nbytes / t / 1e9}


def ours(bin_, cfg, out, args, name):
    cmd = [bin_, "bench", "-m", os.path.join(CONFIGS, cfg), "--load-format", "dummy",
           "--json", out] + args
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, text=True, capture_output=True)
    print(r.stdout, r.stderr[-3000:] if r.returncode else "", flush=True)
    if r.returncode != 0:
        return {"name": name, "error": r.stderr[-2000:]}
    d = json.load(open(out))
    d["name"] = name
    d["command"] = " ".join(cmd)
    return d


def hf_bench(cfg_name, batches, prompt_len, gen_len, compiled, runs=2):
    from transformers import AutoConfig, AutoModelForCausalLM
    torch.manual_seed(0)
    cfg = AutoConfig.from_pretrained(os.path.join(CONFIGS, cfg_name))
    with torch.device("cuda"):  # random init on the GPU: a 30B model's CPU init takes minutes
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    res = []
    for B in batches:
        ids = torch.randint(0, min(cfg.vocab_size, 32000), (B, prompt_len), device="cuda")
        kw = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
        if compiled:
            kw["cache_implementation"] = "static"

        def gen(n):
            torch.cuda.synchronize()
            t = time.perf_counter()
            with torch.no_grad():
                model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)
            torch.cuda.synchronize()
            return time.perf_counter() - t

        torch.cuda.reset_peak_memory_stats()
        gen(gen_len)  # warm-up (compiles when static)
        totals, prefills = [], []
        for _ in range(runs):
            prefills.append(gen(1))
            totals.append(gen(gen_len))
        t, p = statistics.median(totals), statistics.median(prefills)
        res.append({"batch": B, "total_s": t, "ttft_s": p,
                    "decode_tokens_per_s": B * (gen_len - 1) / max(t - p, 1e-9),
                    "tokens_per_s": B * gen_len / t,
                    "peak_bytes": torch.cuda.max_memory_allocated()})
        print(("compiled" if compiled else "eager"), res[-1], flush=True)
    del model
    torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("out_dir")
    ap.add_argument("--sections", default="bw,ours,hf")
    ap.add_argument("--hf-batches", default="1,8,64")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    secs = set(a.sections.split(","))
    path = os.path.join(a.out_dir, "speed.json")
    doc = json.load(open(path)) if os.path.exists(path) else {}
    doc["device"] = torch.cuda.get_device_name(0)
    doc["torch"] = torch.__version__
    if "bw" in secs:
        doc["copy_bandwidth"] = copy_bandwidth()
        print("copy bandwidth", doc["copy_bandwidth"], flush=True)
    if "ours" in secs:
        o, r = a.out_dir, str(a.runs)
        doc["ours"] = [
            ours(a.bin, "llama-3.2-1b.json", f"{o}/o1.json", ["--batch", "1,8,64", "--prompt-len", "128",
                 "--gen-len", "256", "--runs", r, "--warmup", "1", "--profile"], "llama-1b graphs"),
            ours(a.bin, "llama-3.2-1b.json", f"{o}/o2.json", ["--batch", "1,8,64", "--prompt-len", "128",
                 "--gen-len", "256", "--runs", "2", "--warmup", "1", "--no-cuda-graph"], "llama-1b no graphs"),
            ours(a.bin, "llama-3.2-1b.json", f"{o}/o3.json", ["--batch", "8", "--prompt-len", "512",
                 "--gen-len", "2", "--runs", r, "--warmup", "1"], "llama-1b prefill 8x512"),
            ours(a.bin, "llama-3.2-1b.json", f"{o}/o4.json", ["--batch", "1", "--prompt-len", "128",
                 "--gen-len", "2", "--runs", r, "--warmup", "2"], "llama-1b ttft 1x128"),
            ours(a.bin, "qwen3-4b.json", f"{o}/o5.json", ["--batch", "1", "--prompt-len", "128",
                 "--gen-len", "256", "--runs", "3", "--warmup", "1", "--profile"], "qwen3-4b batch 1"),
        ]
    if "hf" in secs:
        hb = [int(x) for x in a.hf_batches.split(",")]
        doc["hf_eager"] = hf_bench("llama-3.2-1b.json", hb, 128, 256, compiled=False)
        doc["hf_compiled"] = hf_bench("llama-3.2-1b.json", hb, 128, 256, compiled=True)
    json.dump(doc, open(path, "w"), indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
