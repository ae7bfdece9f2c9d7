#!/usr/bin/env python3
"""Writes policies that stress the static analysis (contradictions, guards,
ordering), each checking clean, so `policyc check` times the whole pipeline.

  --shape objects --promises N   N promises over N/5 objects with 50 classes:
                                 each object gets 5 promises under 5 classes
                                 of one exclusive group, with 5 different
                                 values (no contradiction, but every promise
                                 needs a solver question), plus `after` edges
                                 and directories that contain the files.
  --shape hot --promises N       N promises on ONE object, each under its own
                                 fact test (sys.hostname == "hN"): mutually
                                 exclusive, all different values.

Usage: python3 bench/gen_analysis.py --shape objects --promises 100000 -o FILE
"""

import argparse
import sys

CLASSES = 50
GROUP = 5  # classes per exclusive group; 10 groups


def header():
    out = []
    for c in range(CLASSES):
        out.append(f'class c{c} = sys.hostname =~ r"^h{c}-";\n')
    for g in range(CLASSES // GROUP):
        names = ", ".join(f"c{g * GROUP + k}" for k in range(GROUP))
        out.append(f"exclusive {{ {names} }}\n")
    return "".join(out)


def objects(promises):
    per_bundle = 100
    objs = promises // GROUP
    out = [header()]
    bundles = 0
    obj = 0
    while obj < objs:
        out.append(f"bundle part{bundles} {{\n")
        dir_index = bundles
        out.append(f'  directory "/srv/d{dir_index}" {{ mode = 0o755; }}\n')
        for _ in range(per_bundle // GROUP):
            if obj >= objs:
                break
            group = obj % (CLASSES // GROUP)
            path = f"/srv/d{dir_index}/f{obj}"
            for k in range(GROUP):
                cls = group * GROUP + k
                after = f' after = [directory "/srv/d{dir_index}"];' if k == 0 else ""
                out.append(
                    f'  when c{cls} {{ file "{path}" {{ content = "v{k}\\n"; mode = 0o644;{after} }} }}\n'
                )
            obj += 1
        out.append("}\n")
        bundles += 1
    out.append("policy {\n")
    for b in range(bundles):
        out.append(f"  part{b}();\n")
    out.append("}\n")
    return "".join(out)


def hot(promises):
    out = ["bundle hot {\n"]
    for i in range(promises):
        out.append(
            f'  when sys.hostname == "h{i}" {{ file "/etc/hot" {{ content = "v{i}\\n"; }} }}\n'
        )
    out.append("}\npolicy { hot(); }\n")
    return "".join(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=["objects", "hot"], default="objects")
    parser.add_argument("--promises", type=int, default=100000)
    parser.add_argument("-o", "--output")
    args = parser.parse_args()
    text = objects(args.promises) if args.shape == "objects" else hot(args.promises)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
