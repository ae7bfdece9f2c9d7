#!/usr/bin/env bash
# `watch` benchmark (issue 19 item 4): a converged run of one
# `watch "/tree" { recurse = true; }` over FILES files (sizes as those of
# /usr, bench/gen_watch_tree.py) against `find -type f -print0 | xargs -0
# sha256sum` on the same tree, and the metadata-only mode (`attributes =
# [mode, owner, group, size, mtime]`) against `find -printf '%m %u %g %s
# %T@ %p\n'`, alternating, on a warm cache. Prints the medians of RUNS
# runs and the ratios (targets: at most 1.5 and 2.0).
#
# Usage: bash bench/watch.sh [RUNS] [FILES] (defaults 5 and 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
files=${2:-100000}
cargo build --release -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/trust" "$work/root/etc"
target/release/policyc keygen --out "$work/hub" >/dev/null
cp "$work/hub.pub" "$work/trust/"
python3 bench/gen_watch_tree.py "$work/root/tree" "$files"
python3 - "$work" "$runs" <<'PY'
import os, statistics, subprocess, sys, time

work, runs = sys.argv[1], int(sys.argv[2])
policyc, policyvm = "target/release/policyc", "target/release/policyvm"
root, tree = f"{work}/root", f"{work}/root/tree"

def build(name, attrs):
    policy = f"{work}/{name}.policy"
    open(policy, "w").write(
        f'bundle w {{ watch "/tree" {{ recurse = true; {attrs} }} }}\npolicy {{ w(); }}\n')
    bundle = f"{work}/{name}.bundle"
    subprocess.run([policyc, "build", policy, "-o", bundle, "--key", f"{work}/hub.key",
                    "--serial", "1"], check=True, stdout=subprocess.DEVNULL)
    return [policyvm, "run", bundle, "--trust", f"{work}/trust", "--root", root,
            "--state", f"{work}/state-{name}"]

content = build("content", "")
meta = build("meta", "attributes = [mode, owner, group, size, mtime];")
sha = ["bash", "-c", f"find {tree} -type f -print0 | xargs -0 sha256sum >/dev/null"]
find = ["find", tree, "-printf", "%m %u %g %s %T@ %p\n"]
# A second floor: coreutils' sha256sum has no SHA-NI code, OpenSSL has.
has_openssl = subprocess.run(["sh", "-c", "command -v openssl"], stdout=subprocess.DEVNULL).returncode == 0
ossl = ["bash", "-c", f"find {tree} -type f -print0 | xargs -0 openssl dgst -sha256 >/dev/null"]

def once(cmd):
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({done.returncode}): {done.stderr.decode()}")
    return took, done.stdout.decode()

# Warm the cache and take the baselines (not timed).
once(sha); once(find)
for cmd in (content, meta):
    _, out = once(cmd)
    if "baseline" not in out:
        sys.exit(f"no baseline: {out}")
t = {k: [] for k in ("content", "sha", "meta", "find")}
if has_openssl:
    t["ossl"] = []
for _ in range(runs):
    t["content"].append(once(content)[0])
    t["sha"].append(once(sha)[0])
    if has_openssl:
        t["ossl"].append(once(ossl)[0])
    t["meta"].append(once(meta)[0])
    t["find"].append(once(find)[0])
m = {k: statistics.median(v) for k, v in t.items()}
load = open("/proc/loadavg").read().split()[:3]
print(f"{runs} runs each, alternating; load average {' '.join(load)}")
for k, label in (("content", "policyvm run (watch, content)       "),
                 ("sha", "find | xargs sha256sum              "),
                 ("meta", "policyvm run (watch, metadata only) "),
                 ("find", "find -printf '%m %u %g %s %T@ %p'   "),
                 ("ossl", "find | xargs openssl dgst -sha256   ")):
    if k not in m:
        continue
    print(f"{label} median {m[k]*1000:9.1f} ms  (min {min(t[k])*1000:.1f})")
print(f"ratio content / sha256sum: {m['content']/m['sha']:.2f} (target: at most 1.50)")
print(f"ratio metadata / find:     {m['meta']/m['find']:.2f} (target: at most 2.00)")
if "ossl" in m:
    print(f"ratio content / openssl (SHA-NI floor): {m['content']/m['ossl']:.2f}")
# The run really reads every file: one byte changed deep in the tree is
# reported.
last = len(os.listdir(tree)) - 1
victims = sorted(os.listdir(f"{tree}/d{last:02}")) if last >= 0 else []
sub = f"{tree}/d{last:02}/{victims[-1]}" if victims else None
victim = f"{sub}/{sorted(os.listdir(sub))[-1]}" if sub and os.listdir(sub) else None
if victim:
    with open(victim, "r+b") as f:
        b = f.read(1); f.seek(0); f.write(bytes([(b[0] if b else 0) ^ 1]) if b else b"x")
    _, out = once(content)
    print("after one byte changed:", [l for l in out.splitlines() if "CHANGED" in l][:1])
PY
