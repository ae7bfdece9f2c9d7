#!/usr/bin/env bash
# `policyc plan` benchmark (issue 21, "Performance"): OLD and NEW versions
# of a PROMISES-promise policy with data lookups (bench/gen_plan.py) planned
# over an inventory of 1,000, 5,000 and 10,000 hosts, each run under
# /usr/bin/time -v: wall, CPU (user + sys, which a loaded machine disturbs
# less than wall) and peak RSS, and the plan's summary line. Then the
# 10,000-host run once more with the policy built but no host resolved
# (`--inventory` of one host), to split the build from the per-host work,
# and with --jobs 1 for the parallel speed-up.
#
# Target: 10,000 hosts, 2,000 promises: < 10 s and < 1 GB; near-linear in
# hosts.
#
# Needs python3 and GNU time (/usr/bin/time; Debian package `time`).
# Usage: bash bench/plan.sh
# Environment: HOSTS ("1000 5000 10000"), PROMISES (2000), HOST_LOOKUPS (1),
#   CAP_SECONDS (300), BASE_POLICYC (another build of policyc, e.g. of the
#   previous commit: each host count is then run with it too, right after,
#   for CPU side by side, and the two plans are compared byte for byte).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/time ]; then
  echo "bench/plan.sh: /usr/bin/time is missing; install Debian's 'time' package" >&2
  exit 1
fi

hosts_list=${HOSTS:-"1000 5000 10000"}
promises=${PROMISES:-2000}
host_lookups=${HOST_LOOKUPS:-1}
cap_s=${CAP_SECONDS:-300}

cargo build --release --locked -q -p converge-compiler --bin policyc
policyc=$(realpath "${CARGO_TARGET_DIR:-target}")/release/policyc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

base=${BASE_POLICYC:-}

# run LABEL DIR ARGS...: one `policyc plan` under /usr/bin/time -v, one line
# (with $bin, the build under test unless set).
run() {
  local label=$1 dir=$2 status=0
  shift 2
  ( cd "$dir" && /usr/bin/time -v -o "$work/time" \
      timeout "$cap_s" "${bin:-$policyc}" plan old new "$@" >"$work/out" 2>"$work/err" ) || status=$?
  local wall user sys rss
  wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$work/time")
  user=$(sed -n 's/.*User time (seconds): //p' "$work/time")
  sys=$(sed -n 's/.*System time (seconds): //p' "$work/time")
  rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/time")
  printf '%-34s exit %-3s wall %-8s cpu %6.2f s  peak %5d MB  load %s  %s\n' \
    "$label" "$status" "$wall" "$(echo "$user + $sys" | bc)" "$((rss / 1024))" \
    "$(cut -d' ' -f1 /proc/loadavg)" "$(head -n 1 "$work/out")"
  if [ "$status" != 0 ] && [ "$status" != 2 ]; then
    cat "$work/err" >&2
  fi
}

echo "policyc plan: $promises promises ($host_lookups looked up by sys.hostname, $((promises / 10)) by datacenter), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for hosts in $hosts_list; do
  dir=$work/h$hosts
  python3 bench/gen_plan.py --hosts "$hosts" --promises "$promises" \
    --host-lookups "$host_lookups" -o "$dir"
  run "$hosts hosts" "$dir" --inventory inventory.toml
  if [ -n "$base" ]; then
    cp "$work/out" "$work/out.new"
    bin=$base run "$hosts hosts, BASE_POLICYC" "$dir" --inventory inventory.toml
    cmp -s "$work/out" "$work/out.new" || echo "  the plans differ" >&2
  fi
done
# The build alone: the same policies (their lookups over every host of the
# data file), planned for the first four hosts only (one per group).
largest=${hosts_list##* }
dir=$work/h$largest
awk '/^\[\[host\]\]/ { n++ } n > 4 { exit } { print }' "$dir/inventory.toml" >"$dir/four.toml"
run "$largest-host data, 4 hosts planned" "$dir" --inventory four.toml
run "$largest hosts, --jobs 1" "$dir" --inventory inventory.toml --jobs 1
