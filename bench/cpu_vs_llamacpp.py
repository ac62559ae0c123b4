#!/usr/bin/env python3
"""lite-llama's CPU backend beside llama.cpp on the same GGUF, threads and machine, the cases of
docs/benchmarks/cpu.md, the engines alternated run by run; medians. Not part of CI.

llama.cpp is built from the source vendored in the llama-cpp-python sdist (its llama-bench and
llama-batched-bench, GGML_NATIVE=ON), not used through the Python bindings:
    python3 bench/cpu_vs_llamacpp.py --build-llama-cpp /tmp/llamacpp       # once: pip download + cmake
    python3 bench/cpu_vs_llamacpp.py build/bin/lite-llama models/SmolLM2-135M-Instruct.Q4_1.gguf \
        --llama-cpp /tmp/llamacpp --threads 2 --runs 5 --json docs/benchmarks/data/cpu_....json
Options: --cases decode1,prefill512,decode8,decode_long,rss (default all); --long 2048 (the
long-context prompt); --env NAME=VALUE adds a lite-llama variant run with that variable
(e.g. LITE_LLAMA_CPU_Q8=1), repeatable.
"""
import argparse, glob, json, os, re, statistics, subprocess, sys, tarfile, time

CASES = ["decode1", "prefill512", "decode8", "decode_long", "rss"]


def build_llama_cpp(dest):
    """pip download the llama-cpp-python sdist, cmake its vendor/llama.cpp; returns the bin dir."""
    os.makedirs(dest, exist_ok=True)
    if not glob.glob(os.path.join(dest, "llama_cpp_python-*.tar.gz")):
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                        "llama-cpp-python", "-d", dest], check=True)
    sdist = sorted(glob.glob(os.path.join(dest, "llama_cpp_python-*.tar.gz")))[-1]
    src = sdist[:-len(".tar.gz")]
    if not os.path.isdir(src):
        with tarfile.open(sdist) as t:
            t.extractall(dest)
    root = os.path.join(src, "vendor", "llama.cpp")
    build = os.path.join(root, "build")
    subprocess.run(["cmake", "-S", root, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON",
                    "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_SERVER=OFF"], check=True)
    subprocess.run(["cmake", "--build", build, "-j", str(os.cpu_count() or 2), "--target", "llama-bench",
                    "llama-batched-bench"], check=True)
    return os.path.join(build, "bin")


def run_rss(cmd, env=None, with_stderr=False):
    """Runs cmd; returns its output and peak RSS (MiB, from wait4)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env,
                         stderr=subprocess.STDOUT if with_stderr else subprocess.DEVNULL)
    out = p.stdout.read().decode()
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (status {status})")
    return out, usage.ru_maxrss / 1024.0


# ---- lite-llama -------------------------------------------------------------------------------

def ours_bench(a, env, batch, prompt, gen):
    cmd = [a.bin, "bench", "-m", a.model, "--device", "cpu", "-t", str(a.threads), "--batch", str(batch),
           "--prompt-len", str(prompt), "--gen-len", str(gen), "--runs", "1", "--warmup", "0", "-q",
           "--ctx", str(max(512, prompt + gen + 16)), "--json", "/dev/stdout"]
    out, _ = run_rss(cmd, env)
    j = json.loads(out[out.index("{"):])
    r = j["results"][0]
    return r["prefill_tokens_per_s"]["median"], r["decode_tokens_per_s"]["median"]


def ours(a, env, case):
    if case == "decode1":
        return {"decode1": ours_bench(a, env, 1, 16, 128)[1]}
    if case == "prefill512":
        return {"prefill512": ours_bench(a, env, 1, 512, 2)[0]}
    if case == "decode8":
        return {"decode8": ours_bench(a, env, 8, 16, 128)[1]}
    if case == "decode_long":
        pp, tg = ours_bench(a, env, 1, a.long, 128)
        return {"decode_long": tg, "prefill_long": pp}
    if case == "rss":
        _, rss = run_rss([a.bin, "generate", "-m", a.model, "--device", "cpu", "-t", str(a.threads), "--ctx", "512",
                          "-p", "Once upon a time", "-n", "128", "--temp", "0", "--ignore-eos", "-q"], env)
        return {"rss_mib": rss}
    raise ValueError(case)


# ---- llama.cpp --------------------------------------------------------------------------------

def llama_bench(a, prompt, gen, depth=0):
    cmd = [os.path.join(a.llama_cpp, "llama-bench"), "-m", a.model, "-t", str(a.threads), "-p", str(prompt),
           "-n", str(gen), "-r", "1", "-o", "json"]
    if depth:
        cmd += ["-d", str(depth)]
    out, _ = run_rss(cmd)
    rows = json.loads(out)
    return {("pp" if r["n_prompt"] else "tg"): r["avg_ts"] for r in rows}


def batched_bench(a, npl, npp, ntg, ctx):
    cmd = [os.path.join(a.llama_cpp, "llama-batched-bench"), "-m", a.model, "-t", str(a.threads), "-c", str(ctx),
           "-npp", str(npp), "-ntg", str(ntg), "-npl", str(npl)]
    out, rss = run_rss(cmd, with_stderr=True)  # its table goes to the log (stderr or stdout)
    return parse_batched_bench(out, npp, npl), rss


def parse_batched_bench(out, npp, npl):
    """S_TG t/s (all sequences' generated tokens per second) of the row for (npp, npl) in
    llama-batched-bench's table: |  PP |  TG |  B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | ..."""
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 8 and cells[0] == str(npp) and cells[2] == str(npl):
            return float(cells[7])
    raise RuntimeError("llama-batched-bench: no result row in:\n" + out[-2000:])


def theirs(a, case):
    if case == "decode1":
        return {"decode1": llama_bench(a, 0, 128)["tg"]}
    if case == "prefill512":
        return {"prefill512": llama_bench(a, 512, 0)["pp"]}
    if case == "decode8":
        return {"decode8": batched_bench(a, 8, 16, 128, 8 * 160)[0]}
    if case == "decode_long":
        pp = llama_bench(a, a.long, 0)["pp"]
        return {"decode_long": llama_bench(a, 0, 128, depth=a.long)["tg"], "prefill_long": pp}
    if case == "rss":
        return {"rss_mib": batched_bench(a, 1, 1, 128, 512)[1]}
    raise ValueError(case)


def cpu_info():
    model, flags = "unknown", []
    try:
        text = open("/proc/cpuinfo").read()
        model = re.search(r"model name\s*:\s*(.*)", text).group(1).strip()
        have = set(re.search(r"flags\s*:\s*(.*)", text).group(1).split())
        flags = [f for f in ["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_tile"]
                 if f in have]
    except (OSError, AttributeError):
        pass
    return {"model": model, "features": flags, "cpus": os.cpu_count()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bin", nargs="?")
    ap.add_argument("model", nargs="?")
    ap.add_argument("--build-llama-cpp", metavar="DIR", help="download and build llama.cpp into DIR, then exit")
    ap.add_argument("--llama-cpp", metavar="BIN_DIR", help="directory holding llama-bench and llama-batched-bench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--long", type=int, default=2048)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE: an extra lite-llama variant")
    ap.add_argument("--json", help="write the results here too")
    a = ap.parse_args()
    if a.build_llama_cpp:
        print(build_llama_cpp(a.build_llama_cpp))
        return
    if not (a.bin and a.model and a.llama_cpp):
        ap.error("BIN, MODEL and --llama-cpp are needed (or --build-llama-cpp DIR)")
    cases = a.cases.split(",")
    for c in cases:
        if c not in CASES:
            ap.error(f"--cases: unknown case '{c}' (known: {', '.join(CASES)})")
    variants = {"lite-llama": dict(os.environ)}
    for e in a.env:
        k, _, v = e.partition("=")
        variants[f"lite-llama {e}"] = dict(os.environ, **{k: v})
    samples = {name: {} for name in list(variants) + ["llama.cpp"]}
    loads = []
    for r in range(a.runs):
        for case in cases:
            engines = list(variants) + ["llama.cpp"]
            if r % 2:
                engines.reverse()  # alternate who goes first
            for name in engines:
                loads.append(os.getloadavg()[0])
                res = theirs(a, case) if name == "llama.cpp" else ours(a, variants[name], case)
                for k, v in res.items():
                    samples[name].setdefault(k, []).append(v)
                print(f"run {r} {case:12s} {name:28s} {res}", file=sys.stderr, flush=True)
    out = {"cpu": cpu_info(), "threads": a.threads, "runs": a.runs, "model": os.path.basename(a.model),
           "long_prompt": a.long, "date": time.strftime("%Y-%m-%d"), "load_avg_1min": {
               "median": statistics.median(loads), "min": min(loads), "max": max(loads)},
           "results": {}}
    base = {k: statistics.median(v) for k, v in samples["llama.cpp"].items()}
    for name, s in samples.items():
        out["results"][name] = {}
        for k, v in s.items():
            med = statistics.median(v)
            ratio = med / base[k] if base.get(k) else None  # rss_mib: lower is better
            out["results"][name][k] = {"median": med, "min": min(v), "max": max(v), "vs_llama_cpp": ratio}
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
