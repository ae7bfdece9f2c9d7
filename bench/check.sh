#!/usr/bin/env bash
# Front-end benchmark of the whole CLI: builds `policyc` in release (in
# $CARGO_TARGET_DIR when set: `cargo metadata` reports the target directory
# cargo builds into), generates a policy of $PROMISES promises (~3.1 lines
# and 127 bytes each) with bench/gen_policy.py into a temporary directory,
# runs `policyc check FILE` $RUNS times under GNU time and prints the median
# CPU time (user + system), the median wall time and the largest peak
# resident set size, with the load average before each run. With
# BASELINE=/path/to/an/older/policyc, that binary runs too, alternating
# with this one run by run, and the ratios new / baseline are printed: on
# a loaded machine the CPU ratio is the one to read. Exits non-zero if
# either binary reports any error (or the policy is not checked cleanly).
#
# Needs: cargo, python3, and GNU time at /usr/bin/time. On Debian/Ubuntu that
# is the `time` package: if /usr/bin/time is missing the script runs
# `apt-get install -y time` (as root, or through sudo when available).
#
# Usage: bash bench/check.sh            (from any directory)
# Environment: PROMISES (default 100000), RUNS (default 5), BASELINE (a
# policyc to compare with), KEEP=1 keeps the generated file.
# Targets (docs/performance.md): lex + parse >= 1,000,000 lines/s, and peak
# memory of `policyc check` on this file under 200 MB; with
# PROMISES=1000000 (127 MB, 1,600,000 instances, within the instance budget
# that grows with the source), under 8 s and 1.5 GB (issue 22, item 4).
set -euo pipefail

root="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
promises="${PROMISES:-100000}"
runs="${RUNS:-5}"
baseline="${BASELINE:-}"

if [[ ! -x /usr/bin/time ]]; then
    echo "check.sh: /usr/bin/time missing, installing Debian's 'time' package" >&2
    sudo=""
    if [[ "$(id -u)" -ne 0 ]]; then
        sudo="sudo"
    fi
    $sudo apt-get install -y time >&2 || { $sudo apt-get update >&2 && $sudo apt-get install -y time >&2; }
fi

# shellcheck source=bench/generated.sh
source "$root/bench/generated.sh"
echo "== policyc check on $promises promises, $lines lines, $bytes bytes" >&2

if [[ -n "$baseline" && ! -x "$baseline" ]]; then
    echo "check.sh: BASELINE=$baseline is not an executable" >&2
    exit 2
fi

# One timed run of `$1 check FILE`: prints "WALL USER SYSTEM KB LOAD1".
timed() {
    local bin="$1" status=0 load
    load="$(cut -d ' ' -f 1 /proc/loadavg)"
    NO_COLOR=1 /usr/bin/time -f "%e %U %S %M" -o "$tmp/time.txt" "$bin" check "$file" > "$tmp/out.txt" 2>&1 || status=$?
    local summary
    summary="$(tail -n 1 "$tmp/out.txt")"
    if [[ "$status" -ne 0 || "$summary" != *"no errors"* ]]; then
        echo "check.sh: $bin reported errors on the generated policy (exit $status):" >&2
        head -n 40 "$tmp/out.txt" >&2
        exit 1
    fi
    echo "$(tail -n 1 "$tmp/time.txt") $load"
}

new_runs=()
base_runs=()
for ((i = 1; i <= runs; i++)); do
    if [[ -n "$baseline" ]]; then
        base_runs+=("$(timed "$baseline")")
    fi
    new_runs+=("$(timed "$policyc")")
done
echo "policyc:   $policyc"
[[ -n "$baseline" ]] && echo "baseline:  $baseline"
echo "input:     $promises promises, $lines lines, $bytes bytes, $runs runs each"
echo "result:    $(tail -n 1 "$tmp/out.txt")"

python3 - "${#new_runs[@]}" "${new_runs[@]}" "${base_runs[@]}" <<'PY'
import statistics, sys
n = int(sys.argv[1])
runs = [tuple(map(float, r.split())) for r in sys.argv[2:]]
new, base = runs[:n], runs[n:]
def show(name, rs):
    wall = statistics.median(r[0] for r in rs)
    cpu = statistics.median(r[1] + r[2] for r in rs)
    rss = max(r[3] for r in rs) / 1024
    loads = ", ".join(f"{r[4]:.1f}" for r in rs)
    cpus = ", ".join(f"{r[1] + r[2]:.2f}" for r in rs)
    print(f"{name:<9}  CPU median {cpu:6.2f} s (runs: {cpus})  wall median {wall:6.2f} s  peak RSS {rss:7.1f} MiB  (load: {loads})")
    return wall, cpu, rss
nw, nc, nr = show("policyc", new)
if base:
    bw, bc, br = show("baseline", base)
    print(f"policyc / baseline: CPU {nc / bc:.2f}x, wall {nw / bw:.2f}x, peak RSS {nr / br:.2f}x")
PY
