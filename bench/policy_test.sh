#!/usr/bin/env bash
# `policyc test` benchmark (issue 21): 100 tests over a generated
# 10,000-promise policy, printing wall time and peak resident memory of
# `policyc test` (load, check and compile the policy once, then preview it
# for each test's host with the VM's evaluator and check 4 expectations).
#
# The policy: 50 roles chosen by host name, each a bundle of 200 files
# whose content is rendered from the host name, one of them from a
# per-host lookup in a 1,000-entry map (with a `??` default), plus a loop
# over `sys.ipv4`.
# The tests: 2 per role, each giving a host's facts, expecting 3 rendered
# files (`content`, `contains`, `matches`) and the absence of another
# role's file. Target: < 5 s (docs/performance.md).
#
# Needs python3 and GNU time (/usr/bin/time; Debian package `time`).
# Usage: bash bench/policy_test.sh [--debug]
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/time ]; then
  echo "bench/policy_test.sh: /usr/bin/time is missing; install Debian's 'time' package" >&2
  exit 1
fi
if [ "${1:-}" = "--debug" ]; then
  cargo build --locked -q -p converge-compiler --bin policyc
  policyc=target/debug/policyc
else
  cargo build --release --locked -q -p converge-compiler --bin policyc
  policyc=target/release/policyc
fi
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

python3 - "$work" <<'PY'
import sys

work = sys.argv[1]
roles, files_per_role, hosts = 50, 200, 1000
out = []
out.append("let port: map<string, int> = {")
for h in range(hosts):
    out.append(f'  "role{h % roles}-{h:04}": {8000 + h},')
out.append("};")
for r in range(roles):
    out.append(f'class role{r} = sys.hostname =~ r"^role{r}-";')
for r in range(roles):
    out.append(f"bundle role{r}_files {{")
    # One file per role reads the lookup: the compiler splits a promise
    # that looks a fact up into one instance per key (docs/bytecode.md).
    out.append(
        f'  file "/etc/role{r}/port.conf" {{ content = "port = ${{port[sys.hostname] ?? 80}}\\n"; mode = 0o640; }}'
    )
    for f in range(files_per_role - 1):
        out.append(
            f'  file "/etc/role{r}/f{f}.conf" {{ content = "# {f} on ${{sys.hostname}} ({r})\\n"; mode = 0o644; }}'
        )
    out.append("}")
out.append("policy {")
for r in range(roles):
    out.append(f"  when role{r} {{ role{r}_files(); }}")
out.append('  for ip in sys.ipv4 { file "/etc/listen/${ip}" { content = "${ip}\\n"; } }')
out.append("}")
open(f"{work}/site.policy", "w").write("\n".join(out) + "\n")

tests = ['import "site.policy";']
for t in range(100):
    r = t % roles
    h = r + roles * (t // roles)
    host = f"role{r}-{h:04}"
    other = (r + 1) % roles
    tests.append(f'test "host {host}" {{')
    tests.append(f'  facts {{ hostname = "{host}"; os_family = "debian"; ipv4 = ["10.0.0.{t % 250}"]; }}')
    tests.append(f'  expect file "/etc/role{r}/f0.conf" {{ content = "# 0 on {host} ({r})\\n"; mode = 0o644; }}')
    tests.append(f'  expect file "/etc/role{r}/port.conf" {{ contains = "port = {8000 + h}"; mode = 0o640; }}')
    tests.append(f'  expect file "/etc/listen/10.0.0.{t % 250}" {{ matches = r"^10\\.0\\.0\\.[0-9]+\\n$"; }}')
    tests.append(f'  expect no file "/etc/role{other}/f0.conf";')
    tests.append("}")
open(f"{work}/site.test.policy", "w").write("\n".join(tests) + "\n")
PY

echo "policy: $(grep -c '^  file ' "$work/site.policy") file promises in $(grep -c '^bundle' "$work/site.policy") bundles; tests: $(grep -c '^test ' "$work/site.test.policy")"
/usr/bin/time -f "policyc test: %e s wall, %M KiB peak RSS" \
  "$policyc" test "$work/site.test.policy" > "$work/out.txt"
tail -1 "$work/out.txt"
