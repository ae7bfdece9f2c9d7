#!/usr/bin/env bash
# Secrets build benchmark (issue 20, "Performance"): `policyc build
# --identity` of a policy with SECRETS secrets (default 1,000: one per
# group, a few for every host, the rest one per host) for an inventory of
# HOSTS hosts (default 10,000 in 20 groups), written by bench/gen_secrets.py.
# The build decrypts every secret with the builder's identity, works out
# which hosts are entitled to each (every promise guard for every host),
# and seals one set key per set of hosts to those hosts' recipients.
# Reports wall time (median of RUNS), CPU time and peak RSS, then the same
# policy's `policyc check` (no identity, no sealing) for comparison.
#
# Needs python3 and GNU time (/usr/bin/time).
# Usage: bash bench/secrets_build.sh
# Environment: HOSTS (10000), SECRETS (1000), GROUPS (20), RUNS (3).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/bin/time ] || { echo "bench/secrets_build.sh: /usr/bin/time is missing (Debian package 'time')" >&2; exit 1; }
runs=${RUNS:-3}
cargo build --release --locked -q -p converge-compiler --bin policyc
policyc=${CARGO_TARGET_DIR:-target}/release/policyc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/site/secrets"
names=$(python3 bench/gen_secrets.py "$work/site")
recipient=$("$policyc" secret keygen --out "$work/builder.key" | grep -o 'age1[a-z0-9]*')
echo "$recipient" > "$work/site/secrets/.recipients"
for name in $names; do
  echo "secret value of $name" | "$policyc" secret add "$name" --policy-root "$work/site" > /dev/null
done
"$policyc" keygen --out "$work/hub" > /dev/null
echo "secrets: $(echo "$names" | wc -l), hosts: ${HOSTS:-10000}, runs: $runs"
measure() { # label, command...
  local label=$1; shift
  local walls=()
  for _ in $(seq "$runs"); do
    /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" > /dev/null
    walls+=("$(cat "$work/time")")
  done
  printf '%s\n' "${walls[@]}" | sort -n | awk -v label="$label" -v n="$runs" '
    { w[NR] = $1; u[NR] = $2 + $3; m[NR] = $4 }
    END { i = int((n + 1) / 2); printf "%-7s wall %.2f s (median of %d), cpu %.2f s, peak RSS %d MiB\n", label, w[i], n, u[i], m[i] / 1024 }'
}
measure build "$policyc" build "$work/site/site.policy" --identity "$work/builder.key" \
  --key "$work/hub.key" --output "$work/site.bundle" --serial 1
ls -l "$work/site.bundle" | awk '{ printf "bundle  %d bytes\n", $5 }'
measure check "$policyc" check "$work/site/site.policy"
