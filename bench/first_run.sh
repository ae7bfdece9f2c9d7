#!/usr/bin/env bash
# Durable first runs (issue 22, items 1-2): N files (default 10,000) with
# content and mode 0644 in N/100 directories, side by side in one run:
# policyvm, cf-agent -K (Debian's cfengine3, installed if missing), the
# plain floor (writes without fsync; stat+hash for converged runs:
# vm/examples/stathash.rs) and the durable floor (temporaries, one syncfs,
# renames, one fsync per directory: vm/examples/durable_floor.rs). First
# run, converged run, 1% drift; medians of 3 rounds, the programs
# interleaved within each round; wall and CPU (user+sys) time, peak RSS,
# and policyvm's ratios to the floors and to cf-agent. The load average is
# printed beside the figures: fsync-bound figures need a quiet machine.
# First runs create 10,000 files each: on ext4 without a journal, file
# creation is several times slower for minutes after many files were
# removed nearby (ext4's `recently_deleted`), so the script removes no tree
# before the end, and a second run of it should start several minutes
# later (three were not enough on this machine; ext4 says up to six).
#
# Usage: [ROUNDS=3] [CARGO_TARGET_DIR=...] bash bench/first_run.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
if ! command -v cf-agent >/dev/null; then
  apt-get install -y -qq cfengine3 >/dev/null
fi
if [ ! -x /usr/bin/time ]; then
  apt-get install -y -qq time >/dev/null
fi
cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm \
  --example stathash --example durable_floor
release=${CARGO_TARGET_DIR:-target}/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/trust"
"$release/policyc" keygen --out "$work/hub" >/dev/null
cp "$work/hub.pub" "$work/trust/"
ROUNDS=${ROUNDS:-3} python3 - "$work" "$n" "$release" <<'PY'
import os, statistics, subprocess, sys, time

work, n, release = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rounds = int(os.environ["ROUNDS"])
policyc, policyvm = f"{release}/policyc", f"{release}/policyvm"
stathash, floor = f"{release}/examples/stathash", f"{release}/examples/durable_floor"

def measure(cmd):
    """Wall seconds, CPU seconds (user+sys) and peak RSS (MB) of one run."""
    # RSS from /usr/bin/time: the child's own peak (wait4's counts the
    # Python process it was forked from).
    start = time.perf_counter()
    proc = subprocess.Popen(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{cmd[0]} failed: {err}")
    return wall, usage.ru_utime + usage.ru_stime, int(err.strip().splitlines()[-1]) / 1024

def drift(root):
    for i in range(0, n, 100):
        with open(f"{root}/data/d{i // 100}/f{i}", "w") as f:
            f.write("drifted\n")

p = ["bundle files {"]
for i in range(n):
    p.append(f'  file "/data/d{i // 100}/f{i}" {{ content = "content of file {i}\\n"; mode = 0o644; }}')
p.append("}\npolicy { files(); }\n")
open(f"{work}/p.policy", "w").write("\n".join(p))
bundle = f"{work}/p.bundle"
subprocess.run([policyc, "build", f"{work}/p.policy", "-o", bundle, "--key", f"{work}/hub.key",
                "--serial", "1"], check=True, stdout=subprocess.DEVNULL)
cf = f"{work}/p.cf"

samples = {}
def add(key, m):
    samples.setdefault(key, []).append(m)

# Every tree is new and none is removed before the end: on an ext4 file
# system without a journal (this machine's root), the kernel skips inodes
# freed in the last minute (six if their inode-table block is still dirty)
# when it allocates one, looking at each in turn (ext4's
# `recently_deleted`), so creating 10,000 files right after removing
# 10,000 took 2-3 s instead of 0.3-0.6 s, for whichever program came after
# the removal. The trees of all rounds take a few hundred MB until the
# script ends.
for rnd in range(rounds):
    load = open("/proc/loadavg").read().split()[0]
    add(("load", ""), (float(load), 0, 0))
    # The durable and plain floors of a first run, each on a fresh tree.
    # Every first run starts on a clean page cache: a syncfs writes back
    # the whole filesystem's dirty data, so without the sync the durable
    # floor's would flush the round before's cf-agent runs and the
    # removed trees, and policyvm's the plain floor's 10,000 unsynced
    # files, written just before it.
    for mode, name in (("syncfs", "durable floor"), ("plain", "plain floor")):
        d = f"{work}/{rnd}/floor-{mode}"
        os.makedirs(d)
        os.sync()
        add((name, "first"), measure([floor, d, str(n), mode]))
    # policyvm
    root = f"{work}/{rnd}/root-vm"
    os.makedirs(root)
    run = [policyvm, "run", bundle, "--trust", f"{work}/trust", "--root", root]
    os.sync()
    add(("policyvm", "first"), measure(run))
    # Converged and drifted runs start on a settled machine: the first
    # run's (and the drift's) writeback would otherwise be flushed during
    # whichever program comes next, or by its syncfs. Both policyvm and
    # the floor read with O_NOATIME (rootfs::read_at,
    # vm/examples/stathash.rs): on a relatime mount the first reader after
    # the writes would otherwise write every file's inode, and pay for the
    # one that reads second.
    os.sync()
    add(("policyvm", "converged"), measure(run))
    add(("plain floor", "converged"), measure([stathash, f"{root}/data"]))
    drift(root)
    os.sync()
    add(("policyvm", "drift"), measure(run))
    # The floors of a 1% drift: stat+hash of the tree plus replacing the
    # drifted files (durably or not) as the VM must: one file in each of
    # the N/100 directories of an existing tree (made beforehand, not
    # timed), each rename replacing a file.
    for mode, name in (("syncfs", "durable floor"), ("plain", "plain floor")):
        d = f"{work}/{rnd}/drift-{mode}"
        os.makedirs(d)
        measure([floor, d, str(n), "plain"])
        os.sync()
        w, c, r = measure([stathash, f"{root}/data"])
        w2, c2, r2 = measure([floor, d, str(n), mode, "100"])
        add((name, "drift"), (w + w2, c + c2, max(r, r2)))
    add(("durable floor", "converged"), samples[("plain floor", "converged")][-1])
    # cf-agent
    croot = f"{work}/{rnd}/root-cf"
    os.makedirs(croot)
    lines = ['body common control { bundlesequence => { "main" }; }',
             'body perms p644 { mode => "644"; rxdirs => "true"; }',
             'bundle agent main {', '  files:']
    for i in range(n):
        lines.append(f'    "{croot}/data/d{i // 100}/f{i}" create => "true", perms => p644, '
                     f'content => "content of file {i}$(const.n)";')
    lines.append("}")
    open(cf, "w").write("\n".join(lines) + "\n")
    os.chmod(cf, 0o600)
    agent = ["cf-agent", "-K", "-f", cf]
    os.sync()
    add(("cf-agent", "first"), measure(agent))
    os.sync()
    add(("cf-agent", "converged"), measure(agent))
    drift(croot)
    os.sync()
    add(("cf-agent", "drift"), measure(agent))

def med(key, i):
    return statistics.median(s[i] for s in samples[key])

loads = [s[0] for s in samples[("load", "")]]
print(f"{n} files with content and mode 0644; medians of {rounds} rounds; load average at each round: {loads}")
print(f"{'':<14} {'first run':>26} {'converged':>26} {'1% drift':>26}")
print(f"{'':<14}" + f"{'wall':>9} {'cpu':>8} {'rss':>7}" * 3)
for who in ("policyvm", "cf-agent", "plain floor", "durable floor"):
    row = f"{who:<14}"
    for case in ("first", "converged", "drift"):
        row += f"{med((who, case), 0):>8.3f}s {med((who, case), 1):>7.3f}s {med((who, case), 2):>5.1f}MB"
    print(row)
for i, what in ((0, "wall"), (1, "CPU")):
    print(f"policyvm {what} time as a ratio:")
    for case in ("first", "converged", "drift"):
        vm = med(("policyvm", case), i)
        print(f"  {case:<10} {vm / med(('durable floor', case), i):5.2f}x the durable floor, "
              f"{vm / med(('plain floor', case), i):5.2f}x the plain floor, "
              f"cf-agent is {med(('cf-agent', case), i) / vm:5.2f}x slower")
PY
