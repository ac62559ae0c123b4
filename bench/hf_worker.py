"""The child processes of bench/compare_hf.py that use torch, so that the parent never opens CUDA
(lite-llama's peak-memory reading covers the whole device):

  hf_worker.py weights CONFIG DIR [--device cuda]
      transformers' random init of CONFIG (torch.manual_seed(SEED), bf16), saved as safetensors
      in DIR, which both engines then load;
  hf_worker.py run WDIR ENGINE CASES_JSON OUT_JSONL [--runs 5] [--warmup 1] [--device cuda]
                   [--deadline EPOCH_S]
      HF transformers' generate() over the cases (hf_eager, hf_static, hf_eager_fp16), one JSONL
      line per case as it finishes.
"""
import argparse
import json
import os
import sys
import time

from compare_hf import SEED, request_lens, stat


def weights_main(argv):
    ap = argparse.ArgumentParser(prog="hf_worker.py weights")
    ap.add_argument("config")
    ap.add_argument("dir")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args(argv)
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    t0 = time.time()
    torch.manual_seed(SEED)
    cfg = AutoConfig.from_pretrained(a.config)
    # With --device cuda the init runs on the GPU (fast for 4B parameters).
    with torch.device(a.device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    os.makedirs(a.dir, exist_ok=True)
    model.save_pretrained(a.dir, safe_serialization=True)
    n = sum(p.numel() for p in model.parameters())
    open(os.path.join(a.dir, ".complete"), "w").write(json.dumps({"seed": SEED, "params": n}))
    print(f"weights: {a.dir} ({n / 1e9:.2f} B parameters, {time.time() - t0:.1f} s)")


def run_main(argv):
    ap = argparse.ArgumentParser(prog="hf_worker.py run")
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
            torch.cuda.synchronize()

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
            kw["cache_implementation"] = "static"  # compiled by transformers on CUDA only
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
                torch.cuda.reset_peak_memory_stats()
            runs, dev_used = [], 0
            for _ in range(a.runs):
                runs.append(once())
                if cuda:
                    free, total = torch.cuda.mem_get_info()
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


def main():
    sub = sys.argv[1] if len(sys.argv) > 1 else ""
    table = {"weights": weights_main, "run": run_main}
    if sub not in table:
        raise SystemExit(f"usage: hf_worker.py weights|run ... (got '{sub}')")
    table[sub](sys.argv[2:])


if __name__ == "__main__":
    main()
