#!/usr/bin/env bash
# Secrets on the host (issue 20, item 5): what a converged run of 100 secret
# files costs over the same run with the contents in clear. One policy of
# 100 files (mode 0600) is compiled once and written twice: `plain.bundle`
# (each content a string) and `secret.bundle` (each content a secret sealed
# to this root's enrolled identity, docs/bytecode.md "Secrets"). Both
# converge the same root, then `policyvm run` of each is timed, interleaved,
# so both see the same (shared, noisy) machine. The difference of the
# medians is the cost of secrets: opening the identity, one sealed key,
# 100 age decryptions, and the taint. Target: < 10 ms.
#
# The bundles are hand-sealed by an ignored test of tests/secrets_e2e.rs
# (`bench_inputs`), so this needs no `policyc secret`.
# Usage: bash bench/secrets_run.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-40}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build --release --locked -q -p converge-vm --bin policyvm
SECRETS_BENCH_DIR=$work cargo test --release --locked -q --test secrets_e2e -- \
  --ignored --exact bench_inputs >/dev/null
python3 - "$work" "$runs" "${CARGO_TARGET_DIR:-target}/release/policyvm" <<'PY'
import json, os, statistics, subprocess, sys, time

work, runs, policyvm = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def cmd(bundle):
    return [policyvm, "run", f"{work}/{bundle}.bundle", "--trust", f"{work}/trust", "--root", f"{work}/root"]

def timed(c):
    """Wall and CPU (user + system) milliseconds of one run. The CPU time
    is what the run itself costs; on a busy machine the wall time also
    holds the time spent waiting for a core."""
    start = time.perf_counter()
    proc = subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - start) * 1000
    assert os.waitstatus_to_exitcode(status) == 0, c
    return wall, (usage.ru_utime + usage.ru_stime) * 1000

# Both bundles promise the same files with the same content: after one
# run of each, both runs are converged (every file kept).
for b in ("secret", "plain", "secret", "plain"):
    subprocess.run(cmd(b), check=True, stdout=subprocess.DEVNULL)
for b in ("secret", "plain"):
    report = json.loads(subprocess.run(cmd(b) + ["--format", "json"], check=True, capture_output=True, text=True).stdout)
    outcomes = {p["outcome"] for p in report["promises"]}
    assert outcomes == {"kept"} and len(report["promises"]) == 100, (b, outcomes)
plain, secret = [], []
for _ in range(runs):
    plain.append(timed(cmd("plain")))
    secret.append(timed(cmd("secret")))
print(f"converged run of 100 files (0600), {runs} runs each, interleaved; load average {os.getloadavg()[0]:.1f}:")
for i, what in ((0, "wall"), (1, "cpu ")):
    p = [t[i] for t in plain]
    s = [t[i] for t in secret]
    mp, ms = statistics.median(p), statistics.median(s)
    print(f"  {what}  plain median {mp:6.1f} ms min {min(p):6.1f} ms | secret median {ms:6.1f} ms min {min(s):6.1f} ms"
          f" | secrets add {ms - mp:+6.1f} ms (medians) {min(s) - min(p):+6.1f} ms (minima)   (target < 10 ms)")
PY
