#!/usr/bin/env python3
"""Which global loads of each PDL kernel come before its griddepcontrol.wait in the SASS (ACQBULK).

ptxas schedules ACQBULK freely against read-only loads (LDG...CONSTANT: ld.global.nc, const
__restrict__ pointers): it may move a load of the previous kernel's output above the wait (wrong
results; the decode merge did so once its addresses were known before the wait) or put the wait
before the weight loads a kernel means to issue early (no overlap; the one-token GEMV with
read-only loads). Ordinary loads keep their side. This lists, per kernel that waits, the load
instructions before the first ACQBULK in program order (a kernel with a branch before its wait,
such as norm_kernel's generic path, lists the branch's first block only).

usage: sass_pdl_loads.py OBJECT_OR_BUILD_DIR [FILTER] [--cuobjdump PATH]
  cuobjdump: the CUDA toolkit's, or the one in the PyPI wheel nvidia-cuda-cuobjdump
  (pip download --no-deps nvidia-cuda-cuobjdump; unzip; nvidia/cu13/bin/cuobjdump).
"""
import collections
import os
import re
import shutil
import subprocess
import sys


def objects(path):
    if os.path.isfile(path):
        return [path]
    found = []
    for root, _, files in os.walk(path):
        found += [os.path.join(root, f) for f in files if f.endswith(".cu.o")]
    return sorted(found)


def functions(sass):
    name, body = None, []
    for line in sass.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name:
                yield name, body
            name, body = m.group(1), []
        elif name:
            m = re.search(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
            if m:
                body.append(m.group(1))
    if name:
        yield name, body


def main():
    args = sys.argv[1:]
    tool = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    if "--cuobjdump" in args:
        i = args.index("--cuobjdump")
        tool = args[i + 1]
        del args[i:i + 2]
    if not args:
        sys.exit(__doc__)
    flt = args[1] if len(args) > 1 else ""
    for obj in objects(args[0]):
        sass = subprocess.run([tool, "-sass", obj], capture_output=True, text=True, check=True).stdout
        for name, ops in functions(sass):
            if "ACQBULK" not in ops or flt not in name:
                continue
            before = collections.Counter(o for o in ops[:ops.index("ACQBULK")] if o.startswith("LDG"))
            print(f"{os.path.basename(obj)}  {name}\n    before the wait: {dict(before) or 'no global load'}")


if __name__ == "__main__":
    main()
