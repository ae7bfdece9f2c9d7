#!/usr/bin/env bash
# `directory recurse` benchmark (issue 17): a 100,000-file tree that already
# conforms (100 directories x 10 subdirectories x 100 files, modes 0640 and
# 0750), checked by `policyvm run` with one `directory recurse` promise,
# side by side in the same run with `find ROOT -printf '%m %u %g\n'` on the
# same tree (the floor: one getdents per directory, one lstat per entry,
# names of owners). Runs alternate; the medians of RUNS runs are printed,
# and their ratio, which must stay within 2x.
#
# Usage: bash bench/recurse.sh [RUNS] (default 7)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-7}
cargo build --release -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/trust"
target/release/policyc keygen --out "$work/hub" >/dev/null
cp "$work/hub.pub" "$work/trust/"
python3 - "$work" "$runs" <<'PY'
import os, statistics, subprocess, sys, time

work, runs = sys.argv[1], int(sys.argv[2])
policyc, policyvm = "target/release/policyc", "target/release/policyvm"
root = f"{work}/root"
tree = f"{root}/srv/tree"
os.makedirs(f"{root}/etc")
open(f"{root}/etc/passwd", "w").write("root:x:0:0::/root:/bin/sh\n")
open(f"{root}/etc/group", "w").write("root:x:0:\n")
files = 0
for d in range(100):
    for s in range(10):
        sub = f"{tree}/d{d}/s{s}"
        os.makedirs(sub)
        for f in range(100):
            path = f"{sub}/f{f}"
            with open(path, "w") as out:
                out.write("x")
            os.chmod(path, 0o640)
            files += 1
        os.chmod(sub, 0o750)
    os.chmod(f"{tree}/d{d}", 0o750)
os.chmod(tree, 0o750)
owner = 'owner = "root"; group = "root"; ' if os.getuid() == 0 else ""
policy = f"{work}/recurse.policy"
open(policy, "w").write(
    'bundle tree {\n  directory "/srv/tree" { mode = 0o750; recurse = true; '
    f'mode_files = 0o640; mode_dirs = 0o750; {owner}}}\n}}\npolicy {{ tree(); }}\n')
bundle = f"{work}/recurse.bundle"
subprocess.run([policyc, "build", policy, "-o", bundle, "--key", f"{work}/hub.key", "--serial", "1"],
               check=True, stdout=subprocess.DEVNULL)
vm = [policyvm, "run", bundle, "--trust", f"{work}/trust", "--root", root]
find = ["find", tree, "-printf", "%m %u %g\n"]
find_ids = ["find", tree, "-printf", "%m %U %G\n"]

def once(cmd):
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({done.returncode}): {done.stderr.decode()}")
    return took, done.stdout

# The first run converges nothing (the tree conforms); check it says so.
_, out = once(vm)
summary = [l for l in out.decode().splitlines() if "repaired" in l]
once(find)
vm_times, find_times, ids_times = [], [], []
for _ in range(runs):
    vm_times.append(once(vm)[0])
    find_times.append(once(find)[0])
    ids_times.append(once(find_ids)[0])
v, f = statistics.median(vm_times), statistics.median(find_times)
n = statistics.median(ids_times)
print(f"tree: {files} files, 1,101 directories, conforming; {runs} runs each, alternating")
print(f"policyvm run (directory recurse): median {v*1000:8.1f} ms  (min {min(vm_times)*1000:.1f})")
print(f"find -printf '%m %u %g':          median {f*1000:8.1f} ms  (min {min(find_times)*1000:.1f})")
print(f"find -printf '%m %U %G' (ids):    median {n*1000:8.1f} ms  (min {min(ids_times)*1000:.1f})")
print(f"ratio policyvm / find: {v/f:.2f} (target: at most 2.00); policyvm / find with numeric ids: {v/n:.2f}")
# The walk really visits the whole tree: one file deep inside drifts and
# is repaired.
os.chmod(f"{tree}/d99/s9/f99", 0o600)
_, out = once(vm)
drift = [l for l in out.decode().splitlines() if "repaired" in l]
print("after one file drifted:", drift[-1].strip() if drift else "?")
if summary:
    print("policyvm report:", summary[-1].strip())
PY
