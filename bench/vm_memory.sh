#!/usr/bin/env bash
# Memory of the VM per promise (issue 22, item 3): the peak RSS of a
# converged `policyvm run` of N file promises (literal content and mode
# 0644, N/100 directories, the policy of bench/vm.sh) for N = 1,000,
# 10,000 and 100,000, and of a policy of one promise (the baseline: the
# binary, its libraries, the facts). The files are written beforehand as
# the policy promises them, without fsync, so the measured run repairs
# nothing (checked: the summary line says 0 repaired, 0 failed); the first
# run of 100,000 files would only measure the disk. Each figure is the
# median of RUNS runs (`/usr/bin/time -f %M`, kB), with the CPU time
# (user + sys) and the wall time beside it, and the load average.
#
# Prints, per N: peak RSS, (RSS - baseline) / N in bytes, and whether the
# 10,000-file figure meets the target (<= 8 MB). Memory per promise is
# constant when the per-promise figure does not grow with N.
#
# NAMES=long gives every file a 35-36-byte path and 57 bytes of content
# (texts longer than the 24 bytes a constant keeps inline), NAMES=mid a
# 27-29-byte path and the default content; the default paths are 7-16
# bytes and contents 17-21.
# SIZES="1 1000 10000 100000" chooses the sizes (the first is the
# baseline). PEER=DIR measures DIR/policyvm too (another build of the VM, e.g. of
# `main`), on the same bundles and roots, interleaved run by run with this
# one, and prints its figures and the ratios (this / peer).
# Usage: [RUNS=5] [SIZES=...] [PEER=DIR] [CARGO_TARGET_DIR=...] bash bench/vm_memory.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-${RUNS:-5}}
peer=${PEER:-}
if [ ! -x /usr/bin/time ]; then
  apt-get install -y -qq time >/dev/null
fi
cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
bin=${CARGO_TARGET_DIR:-target}/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/trust"
"$bin/policyc" keygen --out "$work/hub" >/dev/null
cp "$work/hub.pub" "$work/trust/"
python3 - "$work" "$runs" "$bin" "$peer" <<'PY'
import os, re, statistics, subprocess, sys, time

work, runs, bin_dir, peer = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
policyc, policyvm = f"{bin_dir}/policyc", f"{bin_dir}/policyvm"
vms = {"this": policyvm}
if peer:
    vms["peer"] = f"{peer}/policyvm"

NAMES = os.environ.get("NAMES", "short")
LONG = NAMES == "long"

def content(i):
    if LONG:  # 57 bytes: longer than a text kept inline (24)
        return f"listen 127.0.0.1:{8000 + i % 1000}; server_name www{i:05}.example.org;\n"
    return f"content of file {i}\n"

def path(i):
    if LONG:  # 35-36 bytes
        return f"/srv/www/site{i // 100}/conf/file-{i:05}.conf"
    if NAMES == "mid":  # 27-29 bytes
        return f"/srv/bench/d{i // 100}/file-{i:05}.txt"
    return f"/data/d{i // 100}/f{i}"

def prepare(n):
    """The bundle of n file promises, and a root where every file already
    is as promised."""
    policy = ["bundle files {"]
    policy += [f'  file "{path(i)}" {{ content = "{content(i)[:-1]}\\n"; mode = 0o644; }}'
               for i in range(n)]
    policy.append("}\npolicy { files(); }\n")
    src, bundle = f"{work}/p{n}.policy", f"{work}/p{n}.bundle"
    with open(src, "w") as f:
        f.write("\n".join(policy))
    subprocess.run([policyc, "build", src, "-o", bundle, "--key", f"{work}/hub.key", "--serial", "1"],
                   check=True, stdout=subprocess.DEVNULL)
    root = f"{work}/root{n}"
    for i in range(n):
        p = root + path(i)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(content(i))
        os.chmod(p, 0o644)
    return ["run", bundle, "--trust", f"{work}/trust", "--root", root]

def measure(cmd):
    """Peak RSS (kB), CPU (user + system, 10 ms resolution) and wall
    milliseconds of one converged run, from GNU time: a small program, so
    the peak is the VM's own (a child forked from this Python carries
    Python's resident size into its `ru_maxrss` until it execs)."""
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M %U %S"] + cmd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = (time.perf_counter() - start) * 1000
    assert proc.returncode == 0, (cmd, proc.stderr)
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(r" 0 repaired, 0 failed, 0 skipped", summary), summary
    rss, user, system = proc.stderr.strip().splitlines()[-1].split()
    return int(rss), (float(user) + float(system)) * 1000, wall

sizes = tuple(int(n) for n in os.environ.get("SIZES", "1 1000 10000 100000").split())
args = {n: prepare(n) for n in sizes}
for a in args.values():
    subprocess.run([policyvm] + a, check=True, stdout=subprocess.DEVNULL)  # the state directory
samples = {(vm, n): [] for vm in vms for n in sizes}
loads = []
for _ in range(runs):  # interleaved: every size and VM sees the same machine
    loads.append(os.getloadavg()[0])
    for n in sizes:
        for vm, exe in vms.items():
            samples[(vm, n)].append(measure([exe] + args[n]))

def med(vm, n, k):
    return statistics.median(s[k] for s in samples[(vm, n)])

print(f"converged `policyvm run` of N file promises ({NAMES} names), median of {runs}; "
      f"load average {min(loads):.1f}-{max(loads):.1f} (1 min, at each round)")
for vm, exe in vms.items():
    base = med(vm, sizes[0], 0)
    print(f"{vm}: {exe}")
    print(f"{'promises':>9} {'peak RSS':>10} {'over baseline':>14} {'per promise':>12} {'cpu':>9} {'wall':>9}")
    for n in sizes:
        rss = med(vm, n, 0)
        over = rss - base
        per = f"{over * 1024 / n:>8.0f} B" if n > sizes[0] else f"{'-':>10}"
        print(f"{n:>9} {rss:>7.0f} kB {over:>11.0f} kB {per:>12} {med(vm, n, 1):>6.0f} ms {med(vm, n, 2):>6.0f} ms")
    if 10000 in sizes:
        target = med(vm, 10000, 0)
        print(f"10,000 files: {target / 1024:.1f} MB peak RSS (target <= 8 MB): {'met' if target <= 8 * 1024 else 'NOT met'}")
if peer:
    print("ratios this / peer (medians): peak RSS, CPU, wall")
    for n in sizes:
        r = [med("this", n, k) / max(med("peer", n, k), 1e-9) for k in range(3)]
        print(f"{n:>9} {r[0]:>6.2f} {r[1]:>6.2f} {r[2]:>6.2f}")
PY
