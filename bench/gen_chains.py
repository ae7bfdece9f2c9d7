#!/usr/bin/env python3
"""Writes a policy made of one long chain (issue 14, items 21-23, 11).

Kinds:
  lets     let l0 = "x"; let l1 = l0; ... (and a promise reading the last)
  bodies   body b0 { mode = 0o644; } body b1 { use b0; } ...
  classes  class c0; class c1 = c0 || sys.hostname == "h1"; ... with an
           outcome class at the bottom and a promise guarded by the top
  calls    bundle b0 calls b1 calls b2 ... (stops at the call depth limit)
  guard    one promise under the || of N classes, one under their &&

Usage: python3 bench/gen_chains.py KIND N [-o FILE]
"""

import argparse
import sys


def lets(n):
    out = ['let l0 = "x";']
    out += [f"let l{i} = l{i - 1};" for i in range(1, n)]
    out.append(f'bundle b {{ file "/etc/x" {{ content = l{n - 1}; }} }}')
    out.append("policy { b(); }")
    return out


def bodies(n):
    out = ["body b0 { mode = 0o644; }"]
    out += [f"body b{i} {{ use b{i - 1}; }}" for i in range(1, n)]
    out.append(f'bundle x {{ file "/etc/x" {{ content = "x"; use b{n - 1}; }} }}')
    out.append("policy { x(); }")
    return out


def classes(n):
    out = ["class c0;"]
    out += [f'class c{i} = c{i - 1} || sys.hostname == "h{i}";' for i in range(1, n)]
    out.append("bundle b {")
    out.append(f'  when c{n - 1} {{ file "/etc/y" {{ content = "y"; }} }}')
    out.append('  file "/etc/x" { content = "x"; on_repaired = c0; }')
    out.append("}")
    out.append("policy { b(); }")
    return out


def calls(n):
    out = [
        f'bundle b{i} {{ file "/etc/x{i}" {{ content = "x"; }} b{i + 1}(); }}'
        for i in range(n - 1)
    ]
    out.append(f"bundle b{n - 1} {{ }}")
    out.append("policy { b0(); }")
    return out


def guard(n):
    out = [f"class c{i};" for i in range(n)]
    names = [f"c{i}" for i in range(n)]
    out.append("bundle b {")
    out.append(f'  when {" || ".join(names)} {{ file "/etc/x" {{ content = "a"; }} }}')
    out.append(f'  when {" && ".join(names)} {{ file "/etc/x" {{ content = "b"; }} }}')
    out.append("}")
    out.append("policy { b(); }")
    return out


KINDS = {"lets": lets, "bodies": bodies, "classes": classes, "calls": calls, "guard": guard}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("n", type=int)
    parser.add_argument("-o", "--output")
    args = parser.parse_args()
    text = "\n".join(KINDS[args.kind](args.n)) + "\n"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
