#!/usr/bin/env python3
"""Load generator for `lite-llama serve` (or any OpenAI-compatible server): streams completions
and reports request throughput, output tokens/s, TTFT and inter-token latency percentiles as JSON.

    # open loop: Poisson arrivals at 4 requests/s, 200 requests
    python3 bench/serve_bench.py --url http://127.0.0.1:8080 --rate 4 --num-requests 200
    # closed loop: 16 clients, each sends its next request when the last one ends
    python3 bench/serve_bench.py --concurrency 16 --num-requests 200 --out result.json

Prompts are random token ids (or random words with --text) whose lengths, like the output
lengths, are drawn uniformly from the given ranges with a fixed seed, so two runs send the same
requests. Requests set `ignore_eos` (vLLM's extension, which lite-llama accepts) so that every
request generates exactly its max_tokens. Standard library only: the GPU machine has no PyPI.

Metrics (per request, then pooled): TTFT = first streamed token - send; ITL = gaps between
token chunks; TPOT = (end - first token) / (output tokens - 1); E2E = end - send. Throughput is
over the wall time from the first send to the last response.
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse

WORDS = ("time person year way day thing man world life hand part child eye woman place work week "
         "case point government company number group problem fact river light music garden "
         "window story city table mountain engine paper letter").split()


def percentile(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary_ms(xs):
    if not xs:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    return {"mean": round(statistics.fmean(xs) * 1000, 3),
            "p50": round(percentile(xs, 50) * 1000, 3),
            "p90": round(percentile(xs, 90) * 1000, 3),
            "p99": round(percentile(xs, 99) * 1000, 3)}


def make_requests(args, vocab):
    rng = random.Random(args.seed)
    reqs = []
    for _ in range(args.num_requests):
        n_in = rng.randint(*args.prompt_len)
        n_out = rng.randint(*args.output_len)
        if args.text:
            prompt = " ".join(rng.choice(WORDS) for _ in range(n_in))
        else:
            # Ids above 1000 avoid the special tokens at the start of most vocabularies.
            prompt = [rng.randrange(1000, vocab) for _ in range(n_in)]
        reqs.append({"prompt": prompt, "max_tokens": n_out, "n_in": n_in})
    return reqs


def sse_chunks(resp):
    """The JSON chunks of a server-sent-events response, up to `data: [DONE]`."""
    while True:
        line = resp.readline()
        if not line:
            return
        if not line.startswith(b"data: "):
            continue
        data = line[6:].strip()
        if data == b"[DONE]":
            return
        yield json.loads(data)


def send(url, model, req, args):
    """One streaming request; returns its timings (or an error)."""
    u = urllib.parse.urlsplit(url)
    body = {"model": model, "prompt": req["prompt"], "max_tokens": req["max_tokens"],
            "temperature": args.temperature, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    out = {"ok": False, "n_in": req["n_in"], "max_tokens": req["max_tokens"]}
    t0 = time.perf_counter()
    out["start"] = t0
    try:
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=args.timeout)
        conn.request("POST", "/v1/completions", json.dumps(body), headers)
        resp = conn.getresponse()
        if resp.status != 200:
            out["error"] = f"HTTP {resp.status}: {resp.read()[:300].decode(errors='replace')}"
            return out
        times, usage = [], None
        for chunk in sse_chunks(resp):
            if "error" in chunk:
                out["error"] = chunk["error"].get("message", "stream error")
                return out
            if chunk.get("choices"):
                times.append(time.perf_counter())
            if chunk.get("usage"):
                usage = chunk["usage"]
        conn.close()
    except (OSError, http.client.HTTPException, ValueError) as e:
        out["error"] = f"{type(e).__name__}: {e}"
        return out
    end = time.perf_counter()
    if not times:
        out["error"] = "no tokens streamed"
        return out
    n_out = usage["completion_tokens"] if usage else len(times)
    out.update(ok=True, end=end, ttft=times[0] - t0, e2e=end - t0, n_out=n_out,
               itl=[b - a for a, b in zip(times, times[1:])],
               prompt_tokens=usage["prompt_tokens"] if usage else req["n_in"])
    if n_out > 1:
        out["tpot"] = (times[-1] - times[0]) / (n_out - 1)
    return out


def run(args, model, reqs):
    results = [None] * len(reqs)

    def work(i):
        results[i] = send(args.url, model, reqs[i], args)

    threads = []
    t_start = time.perf_counter()
    if args.concurrency:
        lock = threading.Lock()
        next_i = [0]

        def client():
            while True:
                with lock:
                    i = next_i[0]
                    next_i[0] += 1
                if i >= len(reqs):
                    return
                work(i)

        threads = [threading.Thread(target=client) for _ in range(args.concurrency)]
        for t in threads:
            t.start()
    else:
        # Open loop: arrivals follow a Poisson process whatever the server's pace.
        rng = random.Random(args.seed + 1)
        t_next = t_start
        for i in range(len(reqs)):
            if args.rate != float("inf"):
                t_next += rng.expovariate(args.rate)
                delay = t_next - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            t = threading.Thread(target=work, args=(i,))
            t.start()
            threads.append(t)
    for t in threads:
        t.join()
    return results, t_start


def report(args, model, results, t_start):
    ok = [r for r in results if r and r["ok"]]
    failed = [r for r in results if not r or not r["ok"]]
    t_end = max((r["end"] for r in ok), default=t_start)
    wall = max(t_end - t_start, 1e-9)
    out_tokens = sum(r["n_out"] for r in ok)
    in_tokens = sum(r["prompt_tokens"] for r in ok)
    itl = [x for r in ok for x in r["itl"]]
    return {
        "url": args.url, "model": model,
        "mode": f"concurrency {args.concurrency}" if args.concurrency else f"rate {args.rate}/s (Poisson)",
        "num_requests": len(results), "completed": len(ok), "failed": len(failed),
        "errors": sorted({r["error"] for r in failed if r})[:5],
        "prompt_len": args.prompt_len, "output_len": args.output_len, "seed": args.seed,
        "duration_s": round(wall, 3),
        "request_throughput": round(len(ok) / wall, 4),
        "output_tokens": out_tokens, "prompt_tokens": in_tokens,
        "output_tokens_per_s": round(out_tokens / wall, 2),
        "total_tokens_per_s": round((in_tokens + out_tokens) / wall, 2),
        "ttft_ms": summary_ms([r["ttft"] for r in ok]),
        "itl_ms": summary_ms(itl),
        "tpot_ms": summary_ms([r["tpot"] for r in ok if "tpot" in r]),
        "e2e_ms": summary_ms([r["e2e"] for r in ok]),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--model", help="model id (default: the server's first model)")
    ap.add_argument("--api-key")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--rate", type=float, default=float("inf"), help="requests/s, Poisson (default inf: all at once)")
    mode.add_argument("--concurrency", type=int, help="closed loop with this many clients")
    ap.add_argument("--num-requests", type=int, default=100)
    ap.add_argument("--prompt-len", type=int, nargs=2, default=[64, 512], metavar=("MIN", "MAX"))
    ap.add_argument("--output-len", type=int, nargs=2, default=[32, 256], metavar=("MIN", "MAX"))
    ap.add_argument("--vocab", type=int, default=32000, help="prompt token ids are drawn below this")
    ap.add_argument("--text", action="store_true", help="random words instead of token ids")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=1, help="requests sent (and dropped) first")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", help="write the JSON here too")
    args = ap.parse_args()
    for lo, hi in (args.prompt_len, args.output_len):
        if not 1 <= lo <= hi:
            ap.error("length ranges need 1 <= MIN <= MAX")

    u = urllib.parse.urlsplit(args.url)
    model = args.model
    if not model:
        conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
        headers = {"Authorization": "Bearer " + args.api_key} if args.api_key else {}
        conn.request("GET", "/v1/models", headers=headers)
        model = json.loads(conn.getresponse().read())["data"][0]["id"]
    reqs = make_requests(args, args.vocab)
    for r in make_requests(argparse.Namespace(**{**vars(args), "num_requests": args.warmup, "seed": args.seed + 99}),
                           args.vocab):
        w = send(args.url, model, r, args)
        if not w["ok"]:
            sys.exit(f"serve_bench: warm-up request failed: {w.get('error')}")
    results, t_start = run(args, model, reqs)
    rep = report(args, model, results, t_start)
    text = json.dumps(rep, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(f"serve_bench: {rep['completed']}/{rep['num_requests']} ok in {rep['duration_s']} s, "
          f"{rep['request_throughput']} req/s, {rep['output_tokens_per_s']} output tok/s, "
          f"TTFT p50 {rep['ttft_ms']['p50']} ms p99 {rep['ttft_ms']['p99']} ms, "
          f"ITL p50 {rep['itl_ms']['p50']} ms p99 {rep['itl_ms']['p99']} ms", file=sys.stderr)
    return 0 if not rep["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
