#!/usr/bin/env python3
"""An explicit --kv-tokens on a GPU: a pool past the free memory is refused in one line (exit 2),
and one just inside the bound the engine computes runs; neither may end in a CUDA allocation
error. Random Llama-3.2-1B weights, one short generation each.

The bound is the pool plus what is allocated after it (the request table, the graphs' reserve),
against the free memory the first refusal reports; a pool 2% inside it must generate, and one
2% past the pool alone must be refused.

usage: kv_tokens_limit.py BUILD_BIN [OUT_JSON]
"""
import json, os, re, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = sys.argv[1]
OUT = sys.argv[2] if len(sys.argv) > 2 else None
CONFIG = os.path.join(HERE, "configs", "llama-3.2-1b.json")
GIB = 1024.0 ** 3


def run(kv_tokens):
    cmd = [BIN, "generate", "--load-format", "dummy", "-m", CONFIG, "--device", "cuda", "--ctx", "4096",
           "--kv-tokens", str(kv_tokens), "-p", "1 2 3", "-n", "2", "--temp", "0", "--ignore-eos"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stderr.strip().splitlines()


results, ok = {}, True
HUGE = 2_000_000_000
rc, err = run(HUGE)
msg = [l for l in err if "--kv-tokens" in l]
m = re.search(r"needs ([\d.]+) GiB, more than the ([\d.]+) GiB of GPU memory free", msg[0]) if msg else None
results["huge"] = {"rc": rc, "stderr": err[-3:]}
if rc != 2 or not m:
    ok = False
    print("FAIL: --kv-tokens 2e9 was not refused in one line:", rc, err[-3:])
else:
    KV_BYTES = float(m.group(1)) * GIB / HUGE  # a token's K/V over all layers, as the engine counts it
    free = float(m.group(2)) * GIB
    inside = int(0.98 * free / KV_BYTES)
    past = int(1.02 * free / KV_BYTES)
    for name, n, want in (("inside", inside, 0), ("past", past, 2)):
        rc, err = run(n)
        results[name] = {"kv_tokens": n, "pool_gib": n * KV_BYTES / GIB, "rc": rc, "stderr": err[-3:]}
        good = rc == want and (want == 0 or any("--kv-tokens" in l and "GiB" in l for l in err))
        ok &= good
        print(("ok  " if good else "FAIL"), name, n, "tokens,", round(n * KV_BYTES / GIB, 1), "GiB: rc", rc,
              err[-1] if err else "")
    results["free_gib"], results["kv_bytes_per_token"] = free / GIB, KV_BYTES
if OUT:
    json.dump({"ok": ok, **results}, open(OUT, "w"), indent=1)
print("kv_tokens_limit:", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
