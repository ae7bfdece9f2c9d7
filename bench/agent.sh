#!/usr/bin/env bash
# Agent benchmark (issue 8): one unchanged-stamp agent cycle (lock, pull the
# stamp from nginx on loopback, run a converged 1,000-file bundle, write the
# report and the metrics), splay excluded. Compared, in the same run, with
# `policyvm run` of the same bundle on the same converged root (the cycle's
# floor), so the figure can be read as a ratio on this shared, noisy machine.
#
# Needs nginx (apt-get install nginx-light). Usage: bash bench/agent.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-50}
nginx=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$nginx" ] || { echo "nginx is not installed (apt-get install nginx-light)" >&2; exit 1; }
cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
work=$(mktemp -d)
cleanup() {
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
python3 - "$work" "$runs" "$nginx" <<'PY'
import os, socket, statistics, subprocess, sys, time

work, runs, nginx = sys.argv[1], int(sys.argv[2]), sys.argv[3]
policyc, policyvm = "target/release/policyc", "target/release/policyvm"
run = lambda *cmd: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

os.makedirs(f"{work}/trust"); os.makedirs(f"{work}/srv"); os.makedirs(f"{work}/root")
run(policyc, "keygen", "--out", f"{work}/hub")
os.rename(f"{work}/hub.pub", f"{work}/trust/hub.pub")
lines = ["bundle files {"]
for i in range(1000):
    lines.append(f'  file "/data/d{i // 100}/f{i}" {{ content = "content of file {i}\\n"; mode = 0o644; }}')
lines.append("}\npolicy { files(); }\n")
open(f"{work}/site.policy", "w").write("\n".join(lines))
run(policyc, "publish", f"{work}/site.policy", "--key", f"{work}/hub.key", "--dir", f"{work}/srv", "--name", "site")

s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
open(f"{work}/nginx.conf", "w").write(f"""
daemon on; worker_processes 1; pid {work}/nginx.pid; error_log {work}/error.log;
events {{ worker_connections 256; }}
http {{ log_format served '$uri $status $body_bytes_sent'; access_log {work}/access.log served;
  client_body_temp_path {work}/b; proxy_temp_path {work}/p; fastcgi_temp_path {work}/f;
  uwsgi_temp_path {work}/u; scgi_temp_path {work}/s;
  server {{ listen 127.0.0.1:{port}; root {work}/srv; }} }}
user root;
""")
run(nginx, "-p", work, "-e", f"{work}/error.log", "-c", f"{work}/nginx.conf")
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", port)).close(); break
    except OSError:
        time.sleep(0.05)

open(f"{work}/agent.toml", "w").write(f"""
hubs = ["http://127.0.0.1:{port}"]
name = "site"
trust = "{work}/trust"
state = "{work}/state"
root = "{work}/root"
""")
agent = [policyvm, "agent", "--no-splay", "--config", f"{work}/agent.toml"]
plain = [policyvm, "run", f"{work}/state/current.bundle", "--trust", f"{work}/trust", "--root", f"{work}/root"]
run(*agent)  # installs the bundle, converges the root
run(*agent)  # converged

def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000

served_before = len(open(f"{work}/access.log").read().splitlines())
cycle, alone = [], []
for _ in range(runs):  # interleaved, so both see the same machine
    cycle.append(timed(agent))
    alone.append(timed(plain))
served = open(f"{work}/access.log").read().splitlines()[served_before:]
assert len(served) == runs and all(l.startswith("/site.stamp 200") for l in served), served[:3]
bundle = os.path.getsize(f"{work}/srv/site.bundle")
stamp = os.path.getsize(f"{work}/srv/site.stamp")
med_c, med_a = statistics.median(cycle), statistics.median(alone)
p90 = sorted(cycle)[int(len(cycle) * 0.9) - 1]
print(f"unchanged-stamp agent cycle, 1,000-file converged bundle ({bundle} bytes), {runs} runs:")
print(f"  agent cycle     median {med_c:6.1f} ms   p90 {p90:6.1f} ms   (target < 50 ms)")
print(f"  policyvm run    median {med_a:6.1f} ms   (same bundle, same root, no pull)")
print(f"  ratio cycle/run {med_c / med_a:.2f}; bytes fetched per cycle: {stamp} (the stamp only)")
PY
