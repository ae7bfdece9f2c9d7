#!/usr/bin/env python3
"""A tree of N files for the `watch` benchmark (issue 19): sizes drawn from
the sizes of the files under /usr on this machine (capped at CAP bytes, so
one huge file does not decide the run), 100 files per directory, two levels
deep, content pseudo-random (distinct per file).

Usage: gen_watch_tree.py DIR [FILES] [CAP] [SEED]
"""
import os
import random
import sys


def usr_sizes():
    sizes = []
    for top, _, names in os.walk("/usr"):
        for n in names:
            try:
                st = os.lstat(os.path.join(top, n))
            except OSError:
                continue
            if st.st_mode & 0o170000 == 0o100000:
                sizes.append(st.st_size)
    return sizes or [4096]


def main():
    out = sys.argv[1]
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    cap = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 20
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 19)
    sizes = usr_sizes()
    block = rng.randbytes(cap + 64)
    total = 0
    for i in range(files):
        d = f"{out}/d{i // 10000:02}/s{i // 100 % 100:02}"
        if i % 100 == 0:
            os.makedirs(d, exist_ok=True)
        size = min(rng.choice(sizes), cap)
        start = rng.randrange(64)
        with open(f"{d}/f{i}", "wb") as f:
            f.write(block[start:start + size])
        total += size
    print(f"{files} files, {total / 1e6:.1f} MB (sizes as /usr's, capped at {cap} bytes)")


main()
