#!/usr/bin/env bash
# Data-file benchmark (issue 16): generates a 10,000-host inventory (one
# record of 10 fields per host) as YAML, JSON and TOML with
# bench/gen_hosts.py, and loads each against `map<string, Host>` exactly as
# `data(...)` does in `policyc check` (compiler/examples/data_load.rs: read
# inside the policy tree, parse, check every field), under GNU time.
#
# Needs: cargo, python3, GNU time at /usr/bin/time (Debian package `time`).
# Usage: bash bench/data.sh           Environment: HOSTS (default 10000).
# Targets (docs/performance.md): well under 1 s and 300 MB per file.
set -euo pipefail

root="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cargo build --release --quiet -p converge-compiler --example data_load
bin="$root/target/release/examples/data_load"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 bench/gen_hosts.py "$tmp"

status=0
for file in hosts.yaml hosts.json hosts.toml; do
    /usr/bin/time -v -o "$tmp/time.txt" "$bin" "$tmp" "$file" > "$tmp/out.txt" 2>&1 || status=$?
    wall="$(sed -n 's/^[[:space:]]*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/time.txt")"
    rss_kb="$(sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$tmp/time.txt")"
    user="$(sed -n 's/^[[:space:]]*User time (seconds): //p' "$tmp/time.txt")"
    sys="$(sed -n 's/^[[:space:]]*System time (seconds): //p' "$tmp/time.txt")"
    printf '%-11s %9s bytes  %s  wall %s (user %ss, sys %ss)  max RSS %s MiB\n' \
        "$file" "$(wc -c < "$tmp/$file")" "$(head -n 1 "$tmp/out.txt")" "$wall" "$user" "$sys" "$(( ${rss_kb:-0} / 1024 ))"
done
exit "$status"
