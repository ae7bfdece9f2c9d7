#!/usr/bin/env bash
# Report upload benchmark (issue 18): what signing and uploading the run
# report adds to an unchanged-stamp agent cycle (the 1,000-file converged
# bundle of bench/agent.sh). Three enrolled hosts, cycles interleaved so all
# see the same machine:
#   none  no `collectors` configured (nothing signed, sent or spooled)
#   up    a collector on loopback answering 200 (a stand-in written here:
#         this measures the agent's side, not converge-collector's ingest)
#   down  a collector URL nothing listens on (the report is spooled)
# The hub is a Python HTTP server on loopback serving the publish directory.
# Target: up adds < 5 ms to none; down adds nothing but a spool write.
#
# Usage: bash bench/upload.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-40}
cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" "$runs" <<'PY'
import functools, http.server, os, socket, statistics, subprocess, sys, threading, time

work, runs = sys.argv[1], int(sys.argv[2])
policyc, policyvm = "target/release/policyc", "target/release/policyvm"
run = lambda *cmd: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

os.makedirs(f"{work}/trust"); os.makedirs(f"{work}/srv")
run(policyc, "keygen", "--out", f"{work}/hub")
os.rename(f"{work}/hub.pub", f"{work}/trust/hub.pub")
lines = ["bundle files {"]
for i in range(1000):
    lines.append(f'  file "/data/d{i // 100}/f{i}" {{ content = "content of file {i}\\n"; mode = 0o644; }}')
lines.append("}\npolicy { files(); }\n")
open(f"{work}/site.policy", "w").write("\n".join(lines))
run(policyc, "publish", f"{work}/site.policy", "--key", f"{work}/hub.key", "--dir", f"{work}/srv", "--name", "site")

class Quiet(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def log_message(self, *args): pass

received = []
class Collector(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def log_message(self, *args): pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        received.append(len(body))
        answer = b'{"stored":true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

def serve(handler):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}"

hub = serve(functools.partial(Quiet, directory=f"{work}/srv"))
collector = serve(Collector)
s = socket.socket(); s.bind(("127.0.0.1", 0)); down = f"http://127.0.0.1:{s.getsockname()[1]}"; s.close()

agents = {}
for name, collectors in [("none", []), ("up", [collector]), ("down", [down])]:
    root, state = f"{work}/{name}/root", f"{work}/{name}/state"
    os.makedirs(root)
    run(policyvm, "enroll", "--state", state, "--root", root, "--name", name)
    listed = ", ".join(f'"{c}"' for c in collectors)
    open(f"{work}/{name}/agent.toml", "w").write(
        f'hubs = ["{hub}"]\nname = "site"\ntrust = "{work}/trust"\nstate = "{state}"\n'
        f'root = "{root}"\ncollectors = [{listed}]\n')
    agents[name] = [policyvm, "agent", "--no-splay", "--config", f"{work}/{name}/agent.toml"]
    run(*agents[name]); run(*agents[name])  # install, then converged

def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000

def upload_ms(name):
    text = open(f"{work}/{name}/root/var/lib/converge/metrics/converge.prom").read()
    line = next(l for l in text.splitlines() if l.startswith("converge_report_upload_duration_seconds "))
    return float(line.split()[1]) * 1000

before = len(received)
times = {name: [] for name in agents}
inside = {name: [] for name in agents}
for _ in range(runs):
    for name, cmd in agents.items():
        times[name].append(timed(cmd))
        inside[name].append(upload_ms(name))
assert len(received) - before == runs, (len(received) - before, runs)
spooled = len(os.listdir(f"{work}/down/state/spool"))
assert spooled == runs + 2, spooled
med = {name: statistics.median(t) for name, t in times.items()}
p90 = {name: sorted(t)[int(len(t) * 0.9) - 1] for name, t in times.items()}
low = {name: min(t) for name, t in times.items()}
print(f"unchanged-stamp agent cycle, 1,000-file converged bundle, {runs} runs each, interleaved:")
print(f"  {'':26} {'cycle median':>12} {'p90':>8} {'min':>8} {'+median':>8} {'upload step (median, in the agent)':>36}")
for name, what in [("none", "no collector configured"), ("up", "collector up (200)"), ("down", "collector down (spooled)")]:
    print(f"  {what:26} {med[name]:9.1f} ms {p90[name]:5.1f} ms {low[name]:5.1f} ms {med[name] - med['none']:+5.1f} ms"
          f" {statistics.median(inside[name]):30.2f} ms")
print(f"  report size {statistics.median(received[before:]):.0f} bytes (signed envelope); target: up adds < 5 ms")
PY
