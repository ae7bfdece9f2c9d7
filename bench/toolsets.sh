#!/usr/bin/env bash
# Toolset benchmark (issue 25): a converged run of N `package` promises
# (default 200) on a sandbox root of each family, side by side with ONE
# query of the package database on the same root:
#   - a Rocky-like root (rpm): `policyvm run --root R` vs `rpm --root R
#     --dbpath /var/lib/rpm -qa`;
#   - a Debian-like root (dpkg): `policyvm run --root R` vs `dpkg-query
#     --root=R -W`.
# The N packages are installed in the root first (one rpmbuild of a spec
# with N subpackages, one `rpm -i`; N `dpkg-deb --build`, one `dpkg -i`).
# The runs are real runs (not --dry-run), interleaved with the queries, RUNS
# times (default 21), the VM once with `--format json` and once with the
# default human report per round; medians of wall time and of CPU time
# (user+sys, the command's children included: the VM's own query too) and
# their ratios are printed, with the load average. Each round also runs
# the VM on an EMPTY policy on the same root (the fixed cost of any
# `policyvm run`: start, bundle, facts, state directory, report), shown
# beside the query as the part of the ratio no package code can remove.
# A `dnf`,
# `apt-get` and `apt-cache` first in PATH log any call: a converged run
# must start none (checked, the script fails otherwise).
#
# Usage: sudo bash bench/toolsets.sh   (root: `dpkg --root -i` needs it)
# Environment: N (default 200), RUNS (default 21), PROFILE (release),
# SKIP_BUILD=1 (measure the binaries already built), CARGO_TARGET_DIR
# (where the binaries are built and found; cargo's default otherwise).
# Target (docs/performance.md, "Toolsets"): within 1.5x of the one query.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${N:-200}"
runs="${RUNS:-21}"
for tool in rpm rpmbuild dpkg-deb dpkg-query; do
    command -v "$tool" >/dev/null || { echo "toolsets.sh: needs $tool" >&2; exit 2; }
done

# PROFILE=debug measures the debug build instead (no release build).
profile="${PROFILE:-release}"
if [[ -n "${SKIP_BUILD:-}" ]]; then
    :  # SKIP_BUILD=1: measure the binaries already built
elif [[ "$profile" == release ]]; then
    cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
else
    cargo build --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
fi
target_dir="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
policyc="$target_dir/$profile/policyc"
policyvm="$target_dir/$profile/policyvm"

work="$(mktemp -d "${TMPDIR:-/tmp}/converge-bench-toolsets.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/trust" "$work/bin" "$work/home"
"$policyc" keygen --out "$work/hub" >/dev/null
cp "$work/hub.pub" "$work/trust/"
for tool in dnf apt-get apt-cache; do
    printf '#!/bin/sh\necho "%s $*" >>"%s/installers"\nexit 1\n' "$tool" "$work" >"$work/bin/$tool"
    chmod 755 "$work/bin/$tool"
done

# The policy: N package promises, the same for both roots.
{
    echo "bundle packages {"
    for i in $(seq 1 "$n"); do echo "  package \"cvg-bench-$i\" { state = installed; }"; done
    echo "}"
    echo "policy { packages(); }"
} >"$work/packages.policy"
"$policyc" build "$work/packages.policy" -o "$work/packages.bundle" --key "$work/hub.key" --serial 1 >/dev/null
printf 'bundle empty {\n}\npolicy { empty(); }\n' >"$work/empty.policy"
"$policyc" build "$work/empty.policy" -o "$work/empty.bundle" --key "$work/hub.key" --serial 1 >/dev/null

# The rpm root: N empty noarch packages from one spec, installed with one rpm -i.
rpmroot="$work/rpmroot"
mkdir -p "$rpmroot/etc" "$rpmroot/var/lib/rpm" "$work/rpmbuild"
printf 'ID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.3"\n' >"$rpmroot/etc/os-release"
{
    printf 'Name: cvg-bench\nVersion: 1.0\nRelease: 1\nSummary: bench\nLicense: MIT\nBuildArch: noarch\n%%description\nbench\n%%files\n'
    for i in $(seq 1 "$n"); do
        printf '%%package -n cvg-bench-%s\nSummary: bench\n%%description -n cvg-bench-%s\nbench\n%%files -n cvg-bench-%s\n' "$i" "$i" "$i"
    done
} >"$work/bench.spec"
HOME="$work/home" rpmbuild --quiet --define "_topdir $work/rpmbuild" --define "_dbpath $work/rpmbuild/db" \
    -bb "$work/bench.spec" >/dev/null 2>&1
HOME="$work/home" rpm --root "$rpmroot" --dbpath /var/lib/rpm -i --nodeps \
    "$work"/rpmbuild/RPMS/noarch/cvg-bench-[0-9]*.rpm 2>/dev/null

# The dpkg root: N empty .debs, installed with one dpkg -i.
debroot="$work/debroot"
mkdir -p "$debroot"/var/lib/dpkg/{info,updates,triggers} "$debroot/etc" "$work/debs"
: >"$debroot/var/lib/dpkg/status"
: >"$debroot/var/lib/dpkg/available"
printf 'ID=debian\nVERSION_ID=12\n' >"$debroot/etc/os-release"
for i in $(seq 1 "$n"); do
    d="$work/deb-$i"
    mkdir -p "$d/DEBIAN"
    printf 'Package: cvg-bench-%s\nVersion: 1.0\nArchitecture: all\nMaintainer: bench <b@example.invalid>\nDescription: bench\n' "$i" >"$d/DEBIAN/control"
    dpkg-deb --root-owner-group --build "$d" "$work/debs/cvg-bench-$i.deb" >/dev/null
done
dpkg --root="$debroot" -i "$work"/debs/*.deb >/dev/null

PATH="$work/bin:$PATH" python3 - "$work" "$policyvm" "$runs" "$n" <<'PY'
import json, os, resource, statistics, subprocess, sys, time

work, policyvm, runs, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
env = dict(os.environ, HOME=f"{work}/home")

def timed(cmd):
    """Wall and CPU (user+sys of the command and its children) in ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, env=env)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu, out.stdout

def vm(root, fmt="json", bundle="packages"):
    return [policyvm, "run", f"{work}/{bundle}.bundle", "--trust", f"{work}/trust",
            "--root", root, "--format", fmt]

def load():
    return open("/proc/loadavg").read().split()[0]

rows = [
    ("rpm root", f"{work}/rpmroot",
     ["rpm", "--root", f"{work}/rpmroot", "--dbpath", "/var/lib/rpm", "-qa"]),
    ("dpkg root", f"{work}/debroot", ["dpkg-query", f"--root={work}/debroot", "-W"]),
]
# Each round runs, in turn: the VM with the JSON report on standard output
# (`--format json`), the query, the VM as an operator runs it (the human
# report, the default), the query again.
for name, root, query in rows:
    summary = json.loads(timed(vm(root))[2])["summary"]
    assert summary["kept"] == n and summary["repaired"] == 0 and summary["failed"] == 0, summary
    runs_json, runs_human, runs_q, runs_empty = [], [], [], []
    load_before = load()
    for _ in range(runs):
        runs_json.append(timed(vm(root))[:2])
        runs_q.append(timed(query)[:2])
        runs_human.append(timed(vm(root, "human"))[:2])
        runs_q.append(timed(query)[:2])
        runs_empty.append(timed(vm(root, "human", "empty"))[:2])
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    qw, qc = med(runs_q, 0), med(runs_q, 1)
    print(f"{name}: {n} packages converged, medians over {runs} interleaved rounds "
          f"(load average {load_before} -> {load()}); one query: wall {qw:.1f} ms, CPU {qc:.1f} ms")
    for label, runs_vm in [("--format json", runs_json), ("human report", runs_human),
                           ("EMPTY policy (fixed cost)", runs_empty)]:
        vw, vc = med(runs_vm, 0), med(runs_vm, 1)
        print(f"  policyvm run, {label}: wall {vw:.1f} ms (ratio {vw / qw:.2f}), "
              f"CPU (user+sys) {vc:.1f} ms (ratio {vc / qc:.2f})")
installers = f"{work}/installers"
if os.path.exists(installers):
    sys.exit("an installer ran during a converged run:\n" + open(installers).read())
print("dnf/apt-get/apt-cache calls during the converged runs: 0")
PY
