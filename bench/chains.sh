#!/usr/bin/env bash
# Long-chain benchmark of `policyc check` (issue 14, items 11 and 21-23):
# builds `policyc` in release, generates with bench/gen_chains.py one
# policy per kind of chain (lets, bodies, classes, bundle calls, and a
# guard over N classes), N = 100,000 by default, and prints the wall time,
# peak memory and the summary line of each check. Exits non-zero if a
# check crashes, takes more than LIMIT seconds of CPU (user + system;
# default 2, the target of docs/performance.md: CPU rather than wall time,
# because the machine these run on is shared), or says something other
# than expected (no errors,
# except E0601 for the call chain and E0301 for the guard, which are the
# right answers there).
#
# Needs: cargo, python3, GNU time at /usr/bin/time (Debian: `time`).
# Usage: bash bench/chains.sh     Environment: N (100000), LIMIT (2).
set -euo pipefail

root="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
n="${N:-100000}"
limit="${LIMIT:-2}"

cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p converge-compiler --bin policyc
policyc="$root/target/release/policyc"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

status=0
printf '%-8s %9s %9s %10s  %s\n' kind "wall (s)" "cpu (s)" "peak (MB)" result
for kind in lets bodies classes calls guard; do
    file="$tmp/$kind.policy"
    python3 "$root/bench/gen_chains.py" "$kind" "$n" -o "$file"
    code=0
    /usr/bin/time -f '%e %U %S %M' -o "$tmp/time" "$policyc" check --format json "$file" > "$tmp/out.json" || code=$?
    # GNU time writes "Command exited with non-zero status N" first then.
    read -r wall user sys rss < <(tail -n 1 "$tmp/time")
    cpu="$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')"
    codes="$(python3 -c 'import json,sys; print(" ".join(sorted({d["code"] for d in json.load(open(sys.argv[1]))["diagnostics"]})))' "$tmp/out.json")"
    case "$kind" in
        calls) expected="E0601" ;;
        guard) expected="E0301" ;;
        *) expected="" ;;
    esac
    printf '%-8s %9s %9s %10s  exit %s, codes [%s]\n' "$kind" "$wall" "$cpu" "$((rss / 1024))" "$code" "$codes"
    if [[ "$codes" != "$expected" ]] || (( code > 1 )); then
        echo "chains.sh: $kind: expected codes [$expected]" >&2
        status=1
    fi
    if awk -v c="$cpu" -v l="$limit" 'BEGIN { exit !(c > l) }'; then
        echo "chains.sh: $kind took ${cpu}s of CPU, over the ${limit}s target" >&2
        status=1
    fi
done
exit "$status"
