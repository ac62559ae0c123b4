#!/usr/bin/env python3
"""Where a decode attention call's time goes: reads `attention-bench --timeline` output (a build
with -DLITE_LLAMA_DECODE_TIMELINE=ON), groups the blocks into calls and prints, per call and as
the median of the middle calls, microseconds from the call's first block start:

  start_last  the last split block's start (later than 0: it waited for a free SM)
  prologue    per block, start -> slot ids landed and the first K/V tiles issued (median)
  wait_at     the PDL wait's release (median block; with plain launches the end of the prologue)
  q           the wait -> the queries in shared memory (median)
  tiles       the queries -> every tile done (median)
  combine     the tiles -> the warps combined and the partials written (median)
  end_med / end_last  split blocks' end, median / last
  m_start / m_wait / m_end  the merge's first block start, its wait's release, its last block end
  period      this call's first block start -> the next call's

usage: decode_timeline.py FILE ...
"""
import statistics as st
import sys
from collections import defaultdict


def load(path):
    head, recs = None, []
    for line in open(path):
        if line.startswith("timeline"):
            head = line.strip()
        elif line.startswith("TL"):
            f = line.split()
            recs.append((int(f[1]), int(f[5]), [int(x) for x in f[6:13]]))
    return head, recs


def runs(recs, gap_ns=4000):
    """Records of one pool split into calls: a gap in block starts over gap_ns begins a new call."""
    out, cur = [], []
    for r in sorted(recs, key=lambda r: r[2][0]):
        if cur and r[2][0] - cur[-1][2][0] > gap_ns:
            out.append(cur)
            cur = []
        cur.append(r)
    return out + [cur] if cur else out


def calls_of(head, recs):
    """Calls in the order they started: the i-th run of a pool's split blocks and of its merge
    blocks are one call (pools are numbered as first seen, not by call)."""
    pools = int(head.split("pools ")[1])
    calls = defaultdict(lambda: {"split": [], "merge": []})
    for p in range(pools):
        for kind, sel in (("split", lambda k: k != 2), ("merge", lambda k: k == 2)):
            for i, c in enumerate(runs([r for r in recs if r[1] == p and sel(r[0])])):
                calls[(p, i)][kind] = c
    found = [c for c in calls.values() if c["split"]]
    return sorted(found, key=lambda c: min(r[2][0] for r in c["split"]))


def phases(call):
    d, m = call["split"], call["merge"]
    c0 = min(r[2][0] for r in d)
    us = lambda ns: (ns - c0) / 1e3
    med = lambda xs: st.median(xs) / 1e3
    row = {"c0": c0, "start_last": us(max(r[2][0] for r in d)),
           "prologue": med([r[2][1] - r[2][0] for r in d]), "wait_at": us(st.median([r[2][2] for r in d])),
           "q": med([r[2][3] - r[2][2] for r in d]), "tiles": med([r[2][5] - r[2][3] for r in d]),
           "combine": med([r[2][6] - r[2][5] for r in d]), "end_med": us(st.median([r[2][6] for r in d])),
           "end_last": us(max(r[2][6] for r in d))}
    if m:
        row.update(m_start=us(min(r[2][0] for r in m)), m_wait=us(max(r[2][1] for r in m)),
                   m_end=us(max(r[2][2] for r in m)))
    return row


KEYS = ["start_last", "prologue", "wait_at", "q", "tiles", "combine", "end_med", "end_last", "m_start", "m_wait",
        "m_end", "period"]


def main(path):
    head, recs = load(path)
    rows = [phases(c) for c in calls_of(head, recs)]
    for a, b in zip(rows, rows[1:]):
        a["period"] = (b["c0"] - a["c0"]) / 1e3
    print(head)
    print("call " + " ".join(f"{k:>10}" for k in KEYS))
    for i, r in enumerate(rows):
        print(f"{i:4d} " + " ".join(f"{r[k]:10.2f}" if k in r else f"{'-':>10}" for k in KEYS))
    mid = rows[2:-2] or rows
    print("median " + ", ".join(f"{k} {st.median(r[k] for r in mid if k in r):.2f}" for k in KEYS
                                if any(k in r for r in mid)))


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
        print()
