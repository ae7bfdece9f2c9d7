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
# Usage: bash bench/vm_memory.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
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
python3 - "$work" "$runs" "$bin" <<'PY'
import os, re, statistics, subprocess, sys, time

work, runs, bin_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
policyc, policyvm = f"{bin_dir}/policyc", f"{bin_dir}/policyvm"

def content(i):
    return f"content of file {i}\n"

def path(i):
    return f"/data/d{i // 100}/f{i}"

def prepare(n):
    """The bundle of n file promises, and a root where every file already
    is as promised."""
    policy = ["bundle files {"]
    policy += [f'  file "{path(i)}" {{ content = "content of file {i}\\n"; mode = 0o644; }}'
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
    return [policyvm, "run", bundle, "--trust", f"{work}/trust", "--root", root]

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

sizes = (1, 1000, 10000, 100000)
cmds = {n: prepare(n) for n in sizes}
for cmd in cmds.values():
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)  # the state directory
samples = {n: [] for n in sizes}
for _ in range(runs):  # interleaved: every size sees the same machine
    for n in sizes:
        samples[n].append(measure(cmds[n]))

def med(n, k):
    return statistics.median(s[k] for s in samples[n])

base = med(1, 0)
print(f"converged `policyvm run` of N file promises, median of {runs}; load average {os.getloadavg()[0]:.1f}")
print(f"{'promises':>9} {'peak RSS':>10} {'over baseline':>14} {'per promise':>12} {'cpu':>9} {'wall':>9}")
for n in sizes:
    rss = med(n, 0)
    over = rss - base
    per = f"{over * 1024 / n:>8.0f} B" if n > 1 else f"{'-':>10}"
    print(f"{n:>9} {rss:>7.0f} kB {over:>11.0f} kB {per:>12} {med(n, 1):>6.0f} ms {med(n, 2):>6.0f} ms")
target = med(10000, 0)
print(f"10,000 files: {target / 1024:.1f} MB peak RSS (target <= 8 MB): {'met' if target <= 8 * 1024 else 'NOT met'}")
PY
