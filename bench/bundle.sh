#!/usr/bin/env bash
# Bundle benchmark: a policy of 10,000 file promises (literal content, mode
# 0644, in 100 directories) is built and signed; then `policyvm verify`
# (read, hash, check the signature, decode, verify) is timed as a whole
# process, with its peak resident memory.
#
# Targets (issue 5): bundle under 1 MB; verify under 20 ms and 20 MB.
# Needs python3 and GNU time (/usr/bin/time; Debian package `time`).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/time ]; then
  echo "bench/bundle.sh: /usr/bin/time is missing; install Debian's 'time' package" >&2
  exit 1
fi
cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work/files.policy" <<'PY'
import sys
n = 10000
with open(sys.argv[1], "w") as f:
    f.write("bundle files {\n")
    for d in range(n // 100):
        f.write(f'  directory "/srv/bench/d{d}" {{ mode = 0o755; }}\n')
    for i in range(n):
        f.write(f'  file "/srv/bench/d{i // 100}/f{i}" {{ content = "line {i}\\n"; mode = 0o644; }}\n')
    f.write("}\npolicy { files(); }\n")
PY
mkdir -p "$work/trust"
target/release/policyc keygen --out "$work/hub" >/dev/null
cp "$work/hub.pub" "$work/trust/"
target/release/policyc build "$work/files.policy" -o "$work/files.bundle" --key "$work/hub.key" --serial 1
size=$(stat -c %s "$work/files.bundle")
echo "bundle size: $size bytes"
# Warm the page cache, then time 20 runs (wall clock of the whole process).
target/release/policyvm verify "$work/files.bundle" --trust "$work/trust" >/dev/null
python3 - "$work" <<'PY'
import subprocess, sys, time
work = sys.argv[1]
cmd = ["target/release/policyvm", "verify", f"{work}/files.bundle", "--trust", f"{work}/trust"]
runs = []
for _ in range(20):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    runs.append((time.perf_counter() - start) * 1000)
runs.sort()
print(f"policyvm verify over {len(runs)} runs: min {runs[0]:.1f} ms, median {runs[len(runs)//2]:.1f} ms, max {runs[-1]:.1f} ms")
PY
peak=$( { /usr/bin/time -f "%M" target/release/policyvm verify "$work/files.bundle" --trust "$work/trust" >/dev/null; } 2>&1 | tail -1)
echo "policyvm verify peak resident memory: $peak kB"
