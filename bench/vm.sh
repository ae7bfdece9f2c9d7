#!/usr/bin/env bash
# VM benchmark, side by side with CFEngine (issue 6): N files with literal
# content and mode 0644 in N/100 directories under a sandbox root, and a
# variant that ensures one line in each file. For N = 1,000 and 10,000:
# the first run, the converged run (nothing to do: what every host does every
# few minutes), and a run after 1% drift; `policyvm run` against
# `cf-agent -K` on equivalent policies, and against a plain program that only
# stats and hashes the files (vm/examples/stathash.rs). Peak RSS of policyvm
# on the converged run.
#
# Installs Debian's cfengine3 if cf-agent is missing (needs root and apt).
# Usage: bash bench/vm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cf-agent >/dev/null; then
  apt-get install -y -qq cfengine3 >/dev/null
fi
if [ ! -x /usr/bin/time ]; then
  apt-get install -y -qq time >/dev/null
fi
cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm --example stathash
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/trust"
target/release/policyc keygen --out "$work/hub" >/dev/null
cp "$work/hub.pub" "$work/trust/"
python3 - "$work" <<'PY'
import os, shutil, statistics, subprocess, sys, time

work = sys.argv[1]
policyc, policyvm = "target/release/policyc", "target/release/policyvm"
stathash = "target/release/examples/stathash"

def timed(cmd, runs=1):
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000

def peak_rss(cmd):
    out = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, check=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return int(out.stderr.strip().splitlines()[-1])

def converge_policy(n, lines):
    p = ["bundle files {"]
    for i in range(n):
        path = f"/data/d{i // 100}/f{i}"
        if lines:
            p.append(f'  file "{path}" {{ ensure = present; mode = 0o644; }}')
            p.append(f'  line "{path}" {{ present = "managed line {i}"; }}')
        else:
            p.append(f'  file "{path}" {{ content = "content of file {i}\\n"; mode = 0o644; }}')
    p.append("}\npolicy { files(); }\n")
    return "\n".join(p)

def cf_policy(n, lines, root):
    p = ['body common control { bundlesequence => { "main" }; }',
         'body perms p644 { mode => "644"; rxdirs => "true"; }',
         'body edit_defaults nobackup { edit_backup => "false"; }',
         'bundle edit_line add_line(l) { insert_lines: "$(l)"; }',
         'bundle agent main {', '  files:']
    for i in range(n):
        path = f"{root}/data/d{i // 100}/f{i}"
        if lines:
            p.append(f'    "{path}" create => "true", perms => p644, edit_defaults => nobackup, edit_line => add_line("managed line {i}");')
        else:
            p.append(f'    "{path}" create => "true", perms => p644, content => "content of file {i}$(const.n)";')
    p.append("}")
    return "\n".join(p) + "\n"

def drift(root, n):
    for i in range(0, n, 100):
        with open(f"{root}/data/d{i // 100}/f{i}", "w") as f:
            f.write("drifted\n")

rows = []
for n in (1000, 10000):
    for lines in (False, True):
        name = f"{n} files" + (" + line" if lines else "")
        # Converge
        pol = f"{work}/p{n}{int(lines)}.policy"
        open(pol, "w").write(converge_policy(n, lines))
        bundle = f"{work}/p{n}{int(lines)}.bundle"
        subprocess.run([policyc, "build", pol, "-o", bundle, "--key", f"{work}/hub.key", "--serial", "1"],
                       check=True, stdout=subprocess.DEVNULL)
        root = f"{work}/root-c{n}{int(lines)}"
        os.makedirs(root)
        run = [policyvm, "run", bundle, "--trust", f"{work}/trust", "--root", root]
        c_first = timed(run)
        c_conv = timed(run, 5)
        rss = peak_rss(run)
        drift(root, n)
        c_drift = timed(run)
        base = timed([stathash, f"{root}/data"], 5)
        # CFEngine
        croot = f"{work}/root-f{n}{int(lines)}"
        os.makedirs(croot)
        cf = f"{work}/p{n}{int(lines)}.cf"
        open(cf, "w").write(cf_policy(n, lines, croot))
        os.chmod(cf, 0o600)
        agent = ["cf-agent", "-K", "-f", cf]
        f_first = timed(agent)
        f_conv = timed(agent, 5)
        drift(croot, n)
        f_drift = timed(agent)
        rows.append((name, c_first, f_first, c_conv, f_conv, base, c_drift, f_drift, rss))

print(f"{'policy':<18} {'first run':>21} {'converged run':>27} {'stat+hash':>10} {'after 1% drift':>21} {'policyvm RSS':>13}")
print(f"{'':<18} {'policyvm':>10} {'cf-agent':>10} {'policyvm':>10} {'cf-agent':>10} {'ratio':>6} {'':>10} {'policyvm':>10} {'cf-agent':>10} {'':>13}")
for (name, cf1, ff1, cc, fc, base, cd, fd, rss) in rows:
    print(f"{name:<18} {cf1:>8.0f}ms {ff1:>8.0f}ms {cc:>8.1f}ms {fc:>8.1f}ms {fc / cc:>5.1f}x {base:>8.1f}ms {cd:>8.0f}ms {fd:>8.0f}ms {rss:>10} kB")
print("ratio = cf-agent / policyvm on the converged run; stat+hash = the plain baseline on the same tree")
PY
