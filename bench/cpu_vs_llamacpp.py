#!/usr/bin/env python3
"""CPU decode speed and TTFT of `lite-llama generate` beside llama.cpp (llama-cpp-python) on the
same GGUF, same threads, same prompts, interleaved runs on the same machine. Not part of CI.

Set-up (builds llama.cpp from source with GGML_NATIVE):
    python3 -m venv /opt/llamacpp && CMAKE_ARGS="-DGGML_NATIVE=ON" /opt/llamacpp/bin/pip install llama-cpp-python
usage: /opt/llamacpp/bin/python bench/cpu_vs_llamacpp.py BUILD_BIN MODEL_GGUF [--threads 2] [--runs 5] [--tokens 128]
           [--no-int8]  (skip the LITE_LLAMA_CPU_Q8 row: K-quant weights always take the fp32 path)
"""
import argparse, json, os, statistics, subprocess, time

import llama_cpp

PROMPTS = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                      "fixtures", "seed_prompts.json")))["prompts"]


def ours(bin_, model, prompt, threads, n, env=None):
    r = subprocess.run([bin_, "generate", "-m", model, "-p", prompt, "-n", str(n), "--temp", "0",
                        "--ignore-eos", "--json", "-t", str(threads), "--device", "cpu", "--kv-tokens", "4096"],
                       capture_output=True, text=True, check=True, env=env)
    j = json.loads(r.stdout)
    return j["ttft_ms"], j["decode_tokens_per_s"]


def llamacpp(llm, prompt, n):
    # Llama.generate yields sampled tokens without stopping at end-of-generation ones, as
    # lite-llama's --ignore-eos (a random test model may otherwise stop after a few tokens).
    llm.reset()  # no KV prefix reuse between runs
    tokens = llm.tokenize(prompt.encode(), add_bos=False, special=False)
    t0 = time.perf_counter()
    first, count = None, 0
    for _ in llm.generate(tokens, temp=0.0, top_k=1, reset=True):
        count += 1
        if first is None:
            first = time.perf_counter()
        if count == n:
            break
    end = time.perf_counter()
    return (first - t0) * 1e3, (count - 1) / (end - first)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--no-int8", action="store_true")
    a = ap.parse_args()
    llm = llama_cpp.Llama(model_path=a.model, n_threads=a.threads, n_threads_batch=a.threads,
                          n_ctx=2048, n_batch=512, verbose=False, logits_all=False)
    q8_env = dict(os.environ, LITE_LLAMA_CPU_Q8="1")
    rows = {"lite-llama": [], "lite-llama (int8 activations)": [], "llama.cpp": []}
    for _ in range(a.runs):
        for p in PROMPTS:
            rows["lite-llama"].append(ours(a.bin, a.model, p, a.threads, a.tokens))
            if not a.no_int8:
                rows["lite-llama (int8 activations)"].append(ours(a.bin, a.model, p, a.threads, a.tokens, q8_env))
            rows["llama.cpp"].append(llamacpp(llm, p, a.tokens))
    rows = {k: v for k, v in rows.items() if v}
    out = {"model": os.path.basename(a.model), "threads": a.threads, "runs": a.runs, "tokens": a.tokens, "prompts": len(PROMPTS),
           "llama_cpp_python": llama_cpp.__version__, "cpu": open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": "),
           "results": {}}
    for k, v in rows.items():
        ttft = [x[0] for x in v]
        tps = [x[1] for x in v]
        out["results"][k] = {"ttft_ms_median": statistics.median(ttft), "decode_tps_median": statistics.median(tps),
                             "decode_tps_min": min(tps), "decode_tps_max": max(tps)}
    base = out["results"]["llama.cpp"]["decode_tps_median"]
    for k in out["results"]:
        out["results"][k]["decode_ratio_vs_llama_cpp"] = out["results"][k]["decode_tps_median"] / base
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
