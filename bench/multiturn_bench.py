#!/usr/bin/env python3
"""Multi-turn chat load against `lite-llama serve` (or any OpenAI-compatible server): N
conversations run side by side, each T turns in order; every conversation starts with one shared
system prompt, each turn adds a user message and the previous answer comes back as history. So
turn t's prompt repeats everything of turns < t: with prefix caching only the new user message
(and what re-tokenising the answer changes) is computed.

    python3 bench/multiturn_bench.py --url http://127.0.0.1:8080 --conversations 64 --turns 8 \
        --system-words 1200 --answer-len 64 256 --out result.json

Reports TTFT p50/p99 over all turns and per turn index, output tokens/s over the wall time,
prompt tokens and the server's cached prompt tokens (usage.prompt_tokens_details.cached_tokens).
Requests are greedy with `ignore_eos`, so every answer has its drawn length. Standard library
only (the GPU machine has no PyPI).
"""
import argparse
import http.client
import json
import os
import random
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_bench import WORDS, sse_chunks, summary_ms  # noqa: E402


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def chat_turn(args, model, messages, max_tokens):
    """One streamed chat completion: (answer text, ttft s, end s, usage) or an error string."""
    u = urllib.parse.urlsplit(args.url)
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=args.timeout)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        return f"HTTP {resp.status}: {resp.read()[:300].decode(errors='replace')}"
    text, first, usage = [], None, None
    for chunk in sse_chunks(resp):
        if "error" in chunk:
            return chunk["error"].get("message", "stream error")
        for c in chunk.get("choices") or []:
            delta = c.get("delta") or {}
            if "role" in delta:  # the opening chunk, sent before any token
                continue
            if first is None:
                first = time.perf_counter()
            text.append(delta.get("content") or "")
        if chunk.get("usage"):
            usage = chunk["usage"]
    conn.close()
    if first is None:
        return "no tokens streamed"
    return "".join(text), first - t0, time.perf_counter(), usage


def conversation(args, model, system, seed, out):
    rng = random.Random(seed)
    messages = [{"role": "system", "content": system}]
    for t in range(args.turns):
        messages.append({"role": "user", "content": words(rng, rng.randint(20, 60)) + "?"})
        n = rng.randint(*args.answer_len)
        try:
            r = chat_turn(args, model, messages, n)
        except (OSError, http.client.HTTPException, ValueError) as e:
            r = f"{type(e).__name__}: {e}"
        if isinstance(r, str):
            out.append({"turn": t, "ok": False, "error": r})
            return
        text, ttft, end, usage = r
        usage = usage or {}
        out.append({"turn": t, "ok": True, "ttft": ttft, "end": end,
                    "prompt_tokens": usage.get("prompt_tokens", 0),
                    "completion_tokens": usage.get("completion_tokens", 0),
                    "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)})
        messages.append({"role": "assistant", "content": text})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--conversations", type=int, default=64)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--system-words", type=int, default=1200, help="shared system prompt length")
    ap.add_argument("--answer-len", type=int, nargs=2, default=[64, 256], metavar=("MIN", "MAX"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--sequential", action="store_true",
                    help="one conversation at a time (TTFT without queueing: the long-context probe)")
    ap.add_argument("--label", default="")
    ap.add_argument("--out")
    args = ap.parse_args()
    u = urllib.parse.urlsplit(args.url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=30)
    conn.request("GET", "/v1/models")
    model = json.loads(conn.getresponse().read())["data"][0]["id"]
    system = "You are a helpful assistant. " + words(random.Random(args.seed + 7), args.system_words)
    results = [[] for _ in range(args.conversations)]
    t_start = time.perf_counter()
    threads = [threading.Thread(target=conversation, args=(args, model, system, args.seed * 1000 + i, results[i]))
               for i in range(args.conversations)]
    for t in threads:
        t.start()
        if args.sequential:
            t.join()
    for t in threads:
        t.join()
    turns = [r for conv in results for r in conv]
    ok = [r for r in turns if r["ok"]]
    wall = max([r["end"] for r in ok], default=t_start) - t_start
    per_turn = {}
    for t in range(args.turns):
        rs = [r for r in ok if r["turn"] == t]
        per_turn[t] = {"n": len(rs), "ttft_ms": summary_ms([r["ttft"] for r in rs]),
                       "prompt_tokens_mean": round(sum(r["prompt_tokens"] for r in rs) / max(1, len(rs)), 1),
                       "cached_tokens_mean": round(sum(r["cached_tokens"] for r in rs) / max(1, len(rs)), 1)}
    rep = {"label": args.label, "url": args.url, "model": model, "conversations": args.conversations,
           "sequential": args.sequential,
           "turns": args.turns, "system_words": args.system_words, "answer_len": args.answer_len,
           "requests": len(turns), "completed": len(ok), "failed": len(turns) - len(ok),
           "lost_turns": args.conversations * args.turns - len(ok),
           "errors": sorted({r["error"] for r in turns if not r["ok"]})[:5],
           "duration_s": round(wall, 3),
           "output_tokens_per_s": round(sum(r["completion_tokens"] for r in ok) / max(wall, 1e-9), 1),
           "prompt_tokens": sum(r["prompt_tokens"] for r in ok),
           "cached_tokens": sum(r["cached_tokens"] for r in ok),
           "ttft_ms": summary_ms([r["ttft"] for r in ok]),
           "ttft_ms_first_turn": per_turn[0]["ttft_ms"],
           "ttft_ms_later_turns": summary_ms([r["ttft"] for r in ok if r["turn"] > 0]),
           "per_turn": per_turn}
    print(json.dumps(rep, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rep, f, indent=1)
    return 0 if not rep["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
