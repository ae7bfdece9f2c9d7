#!/usr/bin/env bash
# Package backend benchmark (issue 7): the converged check of N `package`
# promises (default 200), every one a package that is installed on this
# machine, read from the machine's own dpkg database. READ-ONLY: the run is
# a `--dry-run` of packages that are all installed, so nothing could change
# even by mistake. A `dpkg-query` first in PATH counts its calls and hands
# over to the real one: the check must make at most ONE call, not N (none
# when the VM reads dpkg's status file itself).
#
# Prints the median wall time of `policyvm run --dry-run` over RUNS runs
# (default 21), the same for an empty policy (the fixed cost of a run:
# verify, facts, report), and the number of dpkg-query calls per run.
#
# Usage: bash bench/packages.sh           (from any directory)
# Environment: N (default 200), RUNS (default 21).
# Target (docs/performance.md): under 100 ms for 200 packages.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${N:-200}"
runs="${RUNS:-21}"

cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
target_dir="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
policyc="$target_dir/release/policyc"
policyvm="$target_dir/release/policyvm"

work="$(mktemp -d "${TMPDIR:-/tmp}/converge-bench-packages.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/trust" "$work/bin"
"$policyc" keygen --out "$work/hub" >/dev/null
cp "$work/hub.pub" "$work/trust/"

real="$(command -v dpkg-query)"
cat >"$work/bin/dpkg-query" <<EOF
#!/bin/sh
echo call >>"$work/calls"
exec "$real" "\$@"
EOF
chmod 755 "$work/bin/dpkg-query"

# N installed packages whose names the policy grammar accepts.
dpkg-query -W --showformat='${Package} ${db:Status-Abbrev}\n' |
    awk -v n="$n" '$2 == "ii" && $1 ~ /^[A-Za-z0-9][A-Za-z0-9._+@:-]*$/ && c < n { print $1; c++ }' \
    >"$work/names"
got="$(wc -l <"$work/names")"
[[ "$got" -eq "$n" ]] || { echo "packages.sh: only $got installed packages, wanted $n" >&2; exit 2; }

{
    echo "bundle packages {"
    while read -r name; do echo "  package \"$name\" { state = installed; }"; done <"$work/names"
    echo "}"
    echo "policy { packages(); }"
} >"$work/packages.policy"
printf 'bundle none { report "r" { message = "m"; } }\npolicy { none(); }\n' >"$work/empty.policy"
for p in packages empty; do
    "$policyc" build "$work/$p.policy" -o "$work/$p.bundle" --key "$work/hub.key" --serial 1 >/dev/null
done

PATH="$work/bin:$PATH" python3 - "$work" "$policyvm" "$runs" "$n" <<'PY'
import json, os, statistics, subprocess, sys, time

work, policyvm, runs, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def run(bundle):
    cmd = [policyvm, "run", f"{work}/{bundle}.bundle", "--trust", f"{work}/trust",
           "--dry-run", "--format", "json"]
    start = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True)
    return (time.perf_counter() - start) * 1000, json.loads(out.stdout)

calls = f"{work}/calls"
_, report = run("packages")
summary = report["summary"]
assert summary["kept"] == n and summary["repaired"] == 0 and summary["failed"] == 0, summary
# 0 when the VM read dpkg's status file itself (vm/src/backend/toolset/dpkg_status).
per_run = 0
if os.path.exists(calls):
    with open(calls) as f:
        per_run = len(f.readlines())
    os.remove(calls)
pk = statistics.median(run("packages")[0] for _ in range(runs))
empty = statistics.median(run("empty")[0] for _ in range(runs))
print(f"{n} packages, converged (dry run): median {pk:.1f} ms over {runs} runs")
print(f"empty policy (fixed cost of a run): median {empty:.1f} ms")
print(f"dpkg-query calls per run: {per_run}")
sys.exit(0 if per_run <= 1 else 1)
PY
