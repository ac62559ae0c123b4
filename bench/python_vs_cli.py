#!/usr/bin/env python3
"""The Python API's overhead: LLM.generate against `lite-llama bench` on the same workload.

    PYTHONPATH=build/python python3 bench/python_vs_cli.py build/bin/lite-llama MODEL \
        [--load-format dummy] [--device cuda] [--batch 1,8,64] [--runs 5] [--out result.json]

Both sides load one engine sized as `bench` sizes it (max_num_seqs = the largest batch, ctx =
prompt + gen + 8, kv_tokens = batch x ctx, step budget = the largest batch's prompt tokens), run
random prompts greedily with EOS ignored, one warm-up then timed runs per batch size, and report
throughput = batch x gen_len / total time (median). Python's time is the whole generate() call
(prompt parsing, the C++ loop, building the RequestOutputs).
"""
import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time


def cli_bench(a, batches):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [a.bin, "bench", "-m", a.model, "--load-format", a.load_format, "--device", a.device,
               "--batch", ",".join(map(str, batches)), "--prompt-len", str(a.prompt_len),
               "--gen-len", str(a.gen_len), "--runs", str(a.runs), "--warmup", "1", "--json", f.name]
        subprocess.run(cmd, check=True, stdout=sys.stderr)
        res = json.load(open(f.name))["results"]
    return {r["batch"]: r["total_ms"]["median"] for r in res}


def python_bench(a, batches):
    from lite_llama import LLM, SamplingParams
    max_b = max(batches)
    ctx = a.prompt_len + a.gen_len + 8
    llm = LLM(a.model, device=a.device, load_format=a.load_format, max_num_seqs=max_b, ctx=ctx,
              kv_tokens=max_b * ctx,
              max_num_batched_tokens=min(max(max_b * a.prompt_len, max_b), 65536))
    vocab = min(llm.model_info["vocab_size"], 32000)
    rng = random.Random(1)
    sp = SamplingParams(temperature=0, max_tokens=a.gen_len, ignore_eos=True)
    out = {}
    for b in batches:
        times = []
        for r in range(1 + a.runs):
            prompts = [{"prompt_token_ids": [rng.randrange(vocab) for _ in range(a.prompt_len)]}
                       for _ in range(b)]
            t0 = time.perf_counter()
            res = llm.generate(prompts, sp, use_tqdm=False)
            t = (time.perf_counter() - t0) * 1000
            assert all(len(o.outputs[0].token_ids) == a.gen_len for o in res)
            if r:
                times.append(t)
        out[b] = statistics.median(times)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bin")
    p.add_argument("model")
    p.add_argument("--load-format", default="auto")
    p.add_argument("--device", default="auto")
    p.add_argument("--batch", default="1,8,64")
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--gen-len", type=int, default=256)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--out")
    a = p.parse_args()
    batches = [int(x) for x in a.batch.split(",")]
    cli = cli_bench(a, batches)
    py = python_bench(a, batches)
    rows = []
    print(f"{'batch':>5} {'bench tok/s':>12} {'python tok/s':>13} {'python/bench':>13}")
    for b in batches:
        c, q = b * a.gen_len * 1000 / cli[b], b * a.gen_len * 1000 / py[b]
        rows.append({"batch": b, "bench_ms": cli[b], "python_ms": py[b], "bench_tok_s": c,
                     "python_tok_s": q, "ratio": q / c})
        print(f"{b:>5} {c:>12.0f} {q:>13.0f} {q / c:>13.3f}")
    if a.out:
        json.dump({"args": vars(a), "results": rows}, open(a.out, "w"), indent=2)


if __name__ == "__main__":
    main()
