#!/usr/bin/env bash
# Content-addressed files (issue 22 item 5): a hub and an agent on
# loopback (python3 -m http.server, which logs every request), a policy
# with a 37 MB binary and a 1,000-file `directory source` tree (8 KiB
# files). Measures, per agent cycle: what the hub served (bundle bytes,
# blob requests and bytes), wall and CPU time (user+sys) and peak RSS of
# `policyvm agent` (/usr/bin/time -v). Cycles: the first publish; a new
# serial with nothing changed but a small inline file; one file of the
# tree changed; the binary changed. Then `policyc publish --gc`.
#
# Usage: bash bench/blobs.sh   (a release build in CARGO_TARGET_DIR or
# target/; PROFILE=debug uses the debug binaries: the bytes and requests
# are the same, times and RSS are not)
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
profile=${PROFILE:-release}
if [ "$profile" = release ]; then
  cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
else
  cargo build --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
fi
work=$(mktemp -d)
cleanup() {
  [ -f "$work/http.pid" ] && kill "$(cat "$work/http.pid")" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
python3 - "$work" "$target/$profile" <<'PY'
import json, os, re, socket, subprocess, sys, time

work, bin_dir = sys.argv[1], sys.argv[2]
policyc, policyvm = f"{bin_dir}/policyc", f"{bin_dir}/policyvm"
run = lambda *cmd: subprocess.run(cmd, check=True, capture_output=True, text=True)

for d in ("trust", "srv", "root", "policy/tree"):
    os.makedirs(f"{work}/{d}")
run(policyc, "keygen", "--out", f"{work}/hub")
os.rename(f"{work}/hub.pub", f"{work}/trust/hub.pub")
with open(f"{work}/policy/app.bin", "wb") as f:
    f.write(os.urandom(37 << 20))
for i in range(1000):
    os.makedirs(f"{work}/policy/tree/d{i // 100}", exist_ok=True)
    with open(f"{work}/policy/tree/d{i // 100}/f{i}", "wb") as f:
        f.write(os.urandom(8192))

def publish(serial, gc=False):
    open(f"{work}/policy/site.policy", "w").write(f"""bundle site {{
  directory "/opt/app" {{ mode = 0o755; }}
  file "/opt/app/app" {{ source = "app.bin"; mode = 0o755; }}
  file "/opt/app/SERIAL" {{ content = "{serial}\\n"; }}
  directory "/srv/tree" {{ source = "tree"; }}
}}
policy {{ site(); }}
""")
    started = time.monotonic()
    cpu0 = os.times()
    out = run(policyc, "publish", f"{work}/policy/site.policy", "--key", f"{work}/hub.key",
              "--dir", f"{work}/srv", "--name", "site", "--serial", str(serial), *(["--gc"] if gc else []))
    cpu1 = os.times()
    return out.stdout.strip(), time.monotonic() - started, (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system)

s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
log = open(f"{work}/http.log", "w")
server = subprocess.Popen(["python3", "-m", "http.server", str(port), "--bind", "127.0.0.1",
                           "--directory", f"{work}/srv"], stdout=log, stderr=log)
open(f"{work}/http.pid", "w").write(str(server.pid))
time.sleep(1)
open(f"{work}/agent.toml", "w").write(
    f'hubs = ["http://127.0.0.1:{port}"]\nname = "site"\ntrust = "{work}/trust"\nroot = "{work}/root"\ntimeout = "120s"\n')

served_before = 0
def cycle(label, serial, change=None):
    global served_before
    if change:
        change()
    said, pub_wall, pub_cpu = publish(serial)
    bundle = os.path.getsize(f"{work}/srv/site.bundle")
    t = subprocess.run(["/usr/bin/time", "-v", policyvm, "agent", "--no-splay", "--config", f"{work}/agent.toml"],
                       capture_output=True, text=True)
    if t.returncode != 0:
        sys.exit(f"agent failed:\n{t.stdout}\n{t.stderr}")
    field = lambda name: re.search(rf"{name}: (.*)", t.stderr).group(1)
    wall = field(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\)")
    cpu = float(field("User time \\(seconds\\)")) + float(field("System time \\(seconds\\)"))
    rss = int(field(r"Maximum resident set size \(kbytes\)")) / 1024
    report = json.load(open(f"{work}/root/var/lib/converge/reports/last.json"))
    blobs = report["agent"]["pull"]["blobs"]
    lines = open(f"{work}/http.log").read().splitlines()
    requests = [l for l in lines if "GET /blobs/" in l]
    new = requests[served_before:]
    served_before = len(requests)
    load = open("/proc/loadavg").read().split()[0]
    print(f"| {label} | {bundle:,} | {len(new)} | {blobs['bytes']:,} | {wall} | {cpu:.2f} s | {rss:.1f} MB | {pub_wall:.2f} s / {pub_cpu:.2f} s | {load} |")

print("| cycle | bundle bytes | blob requests | blob bytes downloaded | agent wall | agent CPU | agent peak RSS | publish wall / CPU | load |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
cycle("first publish (37 MB binary + 1,000 x 8 KiB)", 1)
cycle("republish, nothing stored changed", 2)
cycle("republish, nothing changed (again)", 3)
def one_file():
    with open(f"{work}/policy/tree/d5/f517", "wb") as f:
        f.write(os.urandom(8192))
cycle("one file of the tree changed", 4, one_file)
def new_binary():
    with open(f"{work}/policy/app.bin", "wb") as f:
        f.write(os.urandom(37 << 20))
cycle("the binary changed", 5, new_binary)
said, wall, cpu = publish(6, gc=True)
print()
print("publish --gc:", said.splitlines()[-1], f"({wall:.2f} s wall)")
print("hub blobs after gc:", len(os.listdir(f"{work}/srv/blobs")))
server.terminate()
PY
