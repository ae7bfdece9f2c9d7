#!/usr/bin/env bash
# `policyc build` against `policyc check` on one generated policy, side by
# side in one run (issue 22, item 4): builds `policyc` in release, generates
# a policy of $PROMISES promises with bench/gen_policy.py (through
# bench/generated.sh), makes a signing key, then runs `check` and `build`
# alternately $RUNS times each under GNU time, and prints the median wall
# time, CPU time (user + system) and peak resident memory of each, and
# the ratios build / check, with the load average before each run. On a
# loaded machine the wall clock mostly measures waiting for a core; the
# CPU ratio is then the one to read. `policyc` is built in
# $CARGO_TARGET_DIR when that is set (bench/generated.sh asks `cargo
# metadata` where cargo builds).
#
# Targets (docs/performance.md): build <= 1.3x check on 100,000 promises;
# check on 1,000,000 promises < 8 s and < 1.5 GB
# (`PROMISES=1000000 RUNS=1 bash bench/build_vs_check.sh`).
#
# Needs: cargo, python3, GNU time at /usr/bin/time (Debian package `time`).
# Usage: bash bench/build_vs_check.sh   (from any directory)
# Environment: PROMISES (default 100000), RUNS (default 3), KEEP=1 keeps the
# generated files.
set -euo pipefail

root="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
promises="${PROMISES:-100000}"
runs="${RUNS:-3}"

if [[ ! -x /usr/bin/time ]]; then
    echo "build_vs_check.sh: /usr/bin/time is missing; install Debian's 'time' package" >&2
    exit 2
fi

# shellcheck source=bench/generated.sh
source "$root/bench/generated.sh"
echo "== check and build on $promises promises, $lines lines, $bytes bytes, $runs runs each" >&2
"$policyc" keygen --out "$tmp/hub" > /dev/null

# One timed run: prints "WALL USER SYSTEM KB LOAD1" (seconds; peak
# resident set; the one-minute load average before the run).
timed() {
    local log="$tmp/time.txt" status=0 load
    load="$(cut -d ' ' -f 1 /proc/loadavg)"
    NO_COLOR=1 /usr/bin/time -f "%e %U %S %M" -o "$log" "$@" > "$tmp/out.txt" 2>&1 || status=$?
    if [[ "$status" -ne 0 ]]; then
        echo "build_vs_check.sh: '$*' failed (exit $status):" >&2
        head -n 40 "$tmp/out.txt" >&2
        exit 1
    fi
    echo "$(tail -n 1 "$log") $load"
}

check_runs=()
build_runs=()
for ((i = 1; i <= runs; i++)); do
    check_runs+=("$(timed "$policyc" check "$tmp/generated.policy")")
    build_runs+=("$(timed "$policyc" build "$tmp/generated.policy" -o "$tmp/out.bundle" --key "$tmp/hub.key" --serial "$i")")
done

python3 - "$promises" "$(stat -c %s "$tmp/out.bundle")" "${#check_runs[@]}" "${check_runs[@]}" "${build_runs[@]}" <<'PY'
import statistics, sys
promises, size, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
runs = [tuple(map(float, r.split())) for r in sys.argv[4:]]
check, build = runs[:n], runs[n:]
def show(name, rs):
    wall = statistics.median(r[0] for r in rs)
    cpu = statistics.median(r[1] + r[2] for r in rs)
    rss = max(r[3] for r in rs) / 1024
    walls = ", ".join(f"{r[0]:.2f}" for r in rs)
    loads = ", ".join(f"{r[4]:.1f}" for r in rs)
    print(f"policyc {name:<5}  wall median {wall:6.2f} s (runs: {walls})  CPU median {cpu:6.2f} s  peak RSS {rss:7.1f} MiB  (load: {loads})")
    return wall, cpu
print(f"promises: {promises}, bundle: {size} bytes")
cw, cc = show("check", check)
bw, bc = show("build", build)
print(f"build / check: wall {bw / cw:.2f}x, CPU {bc / cc:.2f}x (target <= 1.3x)")
PY
