"""The result files of bench/compare_hf.py: pieces (one per call), merging them, what --skip-done
leaves out, and the A/B table of lite-llama's tuning switches (`compare_hf.py ab`).

A piece is {"schema", "meta", "records"}; a merged file is {"schema", "merged", "pieces" (the
pieces' metas, each with its "file"), "records" (each with its "piece")}. A record is one
(model, engine, case): its measurements, or an "error".
"""
import datetime
import glob
import json
import os

SCHEMA = "lite-llama-compare-hf/1"


def record_key(r):
    return (r["model"], r["engine"], r["case"])


def read_docs(paths, what):
    """(file, document) of each compare-hf file in paths (a folder: its piece_*.json); any other
    file stops with an error naming `what` asked for it."""
    for path in paths:
        files = sorted(glob.glob(os.path.join(path, "piece_*.json"))) if os.path.isdir(path) else [path]
        for f in files:
            doc = json.load(open(f))
            if doc.get("schema") != SCHEMA:
                raise SystemExit(f"{what} {f}: not a {SCHEMA} file")
            yield f, doc


def done_keys(paths):
    """(model, engine, case) of the successful records in piece or merged files (or folders of
    pieces): what --skip-done leaves out."""
    return {record_key(r) for _, doc in read_docs(paths, "--skip-done") for r in doc["records"]
            if not r.get("error")}


def merge(inputs, out_path=None, log=print):
    """All piece files in inputs (folders or files) -> one document; the newest successful record
    of a case wins (an error only where no success exists)."""
    files = []
    for d in inputs:
        files += glob.glob(os.path.join(d, "piece_*.json")) if os.path.isdir(d) else [d]
    pieces = []
    for f in sorted(files):
        try:
            p = json.load(open(f))
        except (OSError, ValueError) as e:
            log(f"merge: skipping {f}: {e}")
            continue
        if p.get("schema") != SCHEMA:
            log(f"merge: skipping {f}: not a {SCHEMA} piece")
            continue
        p["_file"] = os.path.basename(f)
        pieces.append(p)
    pieces.sort(key=lambda p: p["meta"]["finished"])
    best = {}
    for p in pieces:
        for r in p["records"]:
            r = dict(r, piece=p["_file"])
            k = record_key(r)
            old = best.get(k)
            if old is None or not r.get("error") or old.get("error"):
                best[k] = r
    doc = {"schema": SCHEMA, "merged": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "pieces": [{"file": p["_file"], **p["meta"]} for p in pieces],
           "records": sorted(best.values(), key=lambda r: (r["model"], r["section"], r["case"], r["engine"]))}
    if out_path:
        tmp = out_path + ".tmp"
        json.dump(doc, open(tmp, "w"), indent=1)
        os.replace(tmp, out_path)
    return doc


def load_pieces(paths):
    """Piece documents (meta, records) from piece files, folders of them, or merged files (split
    back into their pieces by each record's `piece`; records without one keep an empty meta)."""
    out = []
    for _, doc in read_docs(paths, "ab:"):
        if "meta" in doc:
            out.append(doc)
            continue
        metas = {m["file"]: m for m in doc.get("pieces", [])}
        groups = {}
        for r in doc["records"]:
            groups.setdefault(r.get("piece"), []).append(r)
        out += [{"meta": metas.get(k, {}), "records": rs} for k, rs in groups.items()]
    return out


def ab_table(pieces, metric="tpot_ms"):
    """Markdown: the median `metric` of each lite-llama case under each setting of the LITE_LLAMA_*
    switches (the env its piece recorded), and the change against the run without switches."""
    cells, settings = {}, []
    for p in pieces:
        env = p["meta"].get("env") or {}
        setting = " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "default"
        if setting not in settings:
            settings.append(setting)
        for r in p["records"]:
            if r.get("error") or not r["engine"].startswith("lite-llama") or not r.get(metric):
                continue
            cells[(r["model"], r["engine"], r["case"], setting)] = r[metric]["median"]
    settings.sort(key=lambda x: x != "default")
    rows = sorted({k[:3] for k in cells}, key=lambda k: (k[0], k[1], int(k[2].rsplit(":b", 1)[1]), k[2]))
    head = ["model", "engine", "case"] + settings
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for m, e, c in rows:
        base = cells.get((m, e, c, "default"))
        row = [m, e, c]
        for st in settings:
            v = cells.get((m, e, c, st))
            if v is None:
                row.append("-")
            elif st == "default" or base is None:
                row.append(f"{v:.3f}")
            else:
                row.append(f"{v:.3f} ({100 * (v / base - 1):+.1f}%)")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
