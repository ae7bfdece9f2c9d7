#!/usr/bin/env bash
# Static-analysis benchmark: full `policyc check` (parse, resolve, expand,
# type-check, contradictions, ordering) on generated policies that check
# clean, printing wall time and peak resident memory of each.
#
#   objects 10k / 100k / 1M : N promises over N/5 objects, 50 classes in
#                             exclusive groups (bench/gen_analysis.py)
#   hot 2000                : 2,000 promises on ONE object under different,
#                             mutually exclusive guards
#
# Needs python3 and GNU time (/usr/bin/time; Debian package `time`).
# Usage: bash bench/analysis.sh [--no-1m]
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/time ]; then
  echo "bench/analysis.sh: /usr/bin/time is missing; install Debian's 'time' package" >&2
  exit 1
fi

cargo build --release --locked -q -p converge-compiler --bin policyc
policyc=target/release/policyc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

sizes=(10000 100000 1000000)
if [ "${1:-}" = "--no-1m" ]; then sizes=(10000 100000); fi

run() {
  local name=$1 file=$2
  local out
  out=$( { /usr/bin/time -f "%e %M" "$policyc" check "$file" >"$work/stdout"; } 2>&1 | tail -1)
  if ! grep -q ": no errors" "$work/stdout"; then
    echo "policyc reported problems on $name:" >&2
    cat "$work/stdout" >&2
    exit 1
  fi
  local promises
  promises=$(sed -n 's/^checked [0-9]* files\{0,1\}, \([0-9]*\) promises.*/\1/p' "$work/stdout")
  printf '%-14s %9s promises %8s s %10s kB peak\n' "$name" "$promises" ${out}
}

for n in "${sizes[@]}"; do
  python3 bench/gen_analysis.py --shape objects --promises "$n" -o "$work/objects-$n.policy"
  run "objects-$n" "$work/objects-$n.policy"
done
python3 bench/gen_analysis.py --shape hot --promises 2000 -o "$work/hot.policy"
run "hot-2000" "$work/hot.policy"
