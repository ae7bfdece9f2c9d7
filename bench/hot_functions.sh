#!/usr/bin/env bash
# Regenerates vm/hot-functions.ld (issue 22, item 3): the functions a
# `policyvm run` executes, laid out together at the start of the text so
# that the pages a run faults in are few. The kernel maps a file-backed page
# with its neighbours (fault-around, 64 KiB), so code that is run once but
# spread over the 5.7 MB text made most of it resident: 3.5 MB of a
# converged run's 14 MB.
#
# What it does: builds policyc and policyvm in release, runs policyvm under
# callgrind on a policy of N file promises (a converged run, one of a
# policy of one promise, one with the JSON report, then a first run, a dry
# run and a 1% drift), and writes every function of the policyvm binary
# that ran, in the order first seen (so a converged run's code comes first), as a section pattern without its symbol
# hash (`.text.*_ZN...17h*`), so that the script keeps matching when the
# hashes change (another toolchain, other features unified by another
# `cargo build -p` set). vm/build.rs hands the script to the linker for the
# policyvm binary. Run it again when the run's code moved a lot; a stale
# pattern only matches nothing.
#
# Needs: valgrind (Debian: valgrind), python3.
# Usage: [N=1000] bash bench/hot_functions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-1000}
command -v valgrind >/dev/null || apt-get install -y -qq valgrind >/dev/null
# Profiled in the linker's own layout (vm/build.rs): valgrind names no
# function of the `.text.hot` section. The next ordinary build links it
# with the script again.
CONVERGE_PLAIN_LAYOUT=1 cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
release=${CARGO_TARGET_DIR:-target}/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/trust"
"$release/policyc" keygen --out "$work/hub" >/dev/null
cp "$work/hub.pub" "$work/trust/"
python3 - "$work" "$n" "$release" vm/hot-functions.ld <<'PY'
import os, re, subprocess, sys

work, n, release, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
policyc, policyvm = f"{release}/policyc", f"{release}/policyvm"

def bundle(name, promises):
    src = ["bundle files {"] + promises + ["}", "policy { files(); }", ""]
    open(f"{work}/{name}.policy", "w").write("\n".join(src))
    subprocess.run([policyc, "build", f"{work}/{name}.policy", "-o", f"{work}/{name}.bundle",
                    "--key", f"{work}/hub.key", "--serial", "1"], check=True,
                   stdout=subprocess.DEVNULL)
    return f"{work}/{name}.bundle"

files = bundle("files", [f'  file "/data/d{i // 100}/f{i}" {{ content = "content of file {i}\\n"; mode = 0o644; }}'
                         for i in range(n)])
one = bundle("one", ['  file "/data/x" { content = "x\\n"; mode = 0o644; }'])
root, root1 = f"{work}/root", f"{work}/root1"
os.makedirs(root); os.makedirs(root1)

seen, order = set(), []
def profile(*args):
    """The functions of the policyvm binary one run executes."""
    data = f"{work}/callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", "--compress-strings=no",
                    f"--callgrind-out-file={data}", policyvm, *args],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    obj = None
    for line in open(data, errors="replace"):
        if line.startswith("ob="):
            obj = line[3:].strip()
        elif line.startswith("fn=") and obj and os.path.basename(obj) == "policyvm":
            name = line[3:].strip()
            if name not in seen:
                seen.add(name)
                order.append(name)

run = ["run", "--trust", f"{work}/trust"]
# The converged run's functions first, in the order it first runs them:
# a converged run (the common one, and the one whose memory is measured)
# then faults in only the start of the section; what only first runs,
# drifts and dry runs execute comes after it.
for r, b in ((root, files), (root1, one)):
    subprocess.run([policyvm, *run, "--root", r, b], check=True, stdout=subprocess.DEVNULL)
profile(*run, "--root", root, files)                       # converged
profile(*run, "--root", root1, one)                        # one promise
profile(*run, "--root", root, "--format", "json", files)   # the JSON report
root2 = f"{work}/root2"
os.makedirs(root2)
profile(*run, "--root", root2, files)                      # first run
for i in range(0, n, 100):
    open(f"{root}/data/d{i // 100}/f{i}", "w").write("drifted\n")
profile(*run, "--root", root, "--dry-run", files)          # a dry run
profile(*run, "--root", root, files)                       # 1% drift

patterns, done = [], set()
for name in order:
    # callgrind marks a recursive call `'2`, and LLVM suffixes a local
    # copy's name (`.123`, `.llvm.456`): neither is part of the section.
    name = re.sub(r"'[0-9]+$", "", name)
    name = re.sub(r"(\.[0-9]+|\.llvm\.[0-9]+)+$", "", name)
    # A v0 name (std's) carries its crate's hash as `Cs<hash>_`, which
    # another toolchain changes: matched by any.
    name = re.sub(r"Cs[0-9A-Za-z]+_", "Cs*_", name) if name.startswith("_R") else name
    legacy = re.match(r"^(_ZN.*?)17h[0-9a-f]{16}E$", name)
    if legacy:
        pattern = f".text.*{legacy.group(1)}17h*"
    elif name.startswith("_R"):
        pattern = f".text.*{name}*"
    elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.$]*", name):
        pattern = f".text.*{name}"
    else:
        continue
    # A glob's own metacharacters never occur in a mangled name; skip any
    # name that would make one.
    if any(c in pattern[len(".text.*"):].rstrip("*").replace("Cs*_", "") for c in "[]?*\\ '") or pattern in done:
        continue
    done.add(pattern)
    patterns.append(pattern)

with open(out, "w") as f:
    f.write("/* Generated by bench/hot_functions.sh: the functions a `policyvm run`\n"
            "   executes, first together (docs/performance.md, \"The run's code\n"
            "   together\"). INSERT keeps the linker's own layout for everything\n"
            "   else. */\n")
    f.write("SECTIONS {\n  .text.hot : {\n")
    for pattern in patterns:
        f.write(f"    *({pattern})\n")
    f.write("  }\n} INSERT BEFORE .text;\n")
print(f"{out}: {len(patterns)} patterns from {len(order)} functions")
PY
