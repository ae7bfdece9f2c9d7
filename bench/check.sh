#!/usr/bin/env bash
# Front-end benchmark of the whole CLI: builds `policyc` in release, generates
# a 100,000-promise policy (~310,000 lines, 12 MB) with bench/gen_policy.py
# into a temporary directory, runs `policyc check FILE` under GNU time and
# prints the wall time and the peak resident set size. Exits non-zero if
# policyc reports any error (or the policy is not checked cleanly).
#
# Needs: cargo, python3, and GNU time at /usr/bin/time. On Debian/Ubuntu that
# is the `time` package: if /usr/bin/time is missing the script runs
# `apt-get install -y time` (as root, or through sudo when available).
#
# Usage: bash bench/check.sh            (from any directory)
# Environment: PROMISES (default 100000), KEEP=1 keeps the generated file.
# Targets (docs/performance.md): lex + parse >= 1,000,000 lines/s, and peak
# memory of `policyc check` on this file under 200 MB; with
# PROMISES=1000000 (127 MB, 1,600,000 instances, within the instance budget
# that grows with the source), under 8 s and 1.5 GB (issue 22, item 4).
set -euo pipefail

root="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
promises="${PROMISES:-100000}"

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

status=0
NO_COLOR=1 /usr/bin/time -v -o "$tmp/time.txt" "$policyc" check "$file" > "$tmp/out.txt" 2>&1 || status=$?

wall="$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/time.txt")"
rss_kb="$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$tmp/time.txt")"
user="$(sed -n 's/^[[:space:]]*User time (seconds): //p' "$tmp/time.txt")"
sys="$(sed -n 's/^[[:space:]]*System time (seconds): //p' "$tmp/time.txt")"
summary="$(tail -n 1 "$tmp/out.txt")"

echo "policyc:        $policyc"
echo "input:          $promises promises, $lines lines, $bytes bytes"
echo "result:         $summary (exit $status)"
echo "wall time:      $wall (user ${user}s, sys ${sys}s)"
echo "Maximum resident set size: ${rss_kb} kB ($(( ${rss_kb:-0} / 1024 )) MiB)"

if [[ "$status" -ne 0 || "$summary" != *"no errors"* ]]; then
    echo "check.sh: policyc reported errors on the generated policy:" >&2
    head -n 40 "$tmp/out.txt" >&2
    exit 1
fi
