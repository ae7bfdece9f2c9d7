#!/usr/bin/env bash
# Data and templates benchmark (issue 16, "Performance"), side by side in one
# run, on trees written by bench/gen_lookups.py:
#
#   check   `policyc check` of a policy that looks each host up by
#           sys.hostname in a HOSTS-host data/hosts.yaml (ten fields a
#           record) into one template: wall, CPU and peak RSS, for a
#           template reading 1 field and one reading all 10 (each run under
#           a time and memory cap, so a blow-up is reported, not waited for)
#   growth  the same check with 3, 4 and 5 lookups in the template at 10
#           hosts: how the cost grows with lookups per template
#   render  the converged `policyvm run` (second run, nothing to repair) on
#           a sandbox root, wall time and CPU time (user + sys, which a
#           loaded machine disturbs less), median of RUNS: the lookup
#           bundle (one promise, its content looked up in a table of
#           HOSTS keys since format 2.3) vs the same file with constant
#           content; FILES files from a template the host renders
#           (facts, an {% if %} on a fact) vs FILES files of constant
#           content. The difference per file is the rendering cost.
#   rival   contradiction analysis over a K-key lookup: the lookup policy
#           plus a second promise on the same file for one host, at
#           K = 1,000 / 10,000 / 20,000 keys
#
# Needs python3 and GNU time (/usr/bin/time; Debian package `time`).
# Usage: bash bench/lookups.sh
# Environment: HOSTS (10000), FILES (100), RUNS (5, median of the VM runs),
#   KEYS ("1000 10000 20000"), CAP_SECONDS (120), CAP_KB (4000000),
#   RENDER_HOSTS (HOSTS; the size of the lookup bundle the VM runs).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/time ]; then
  echo "bench/lookups.sh: /usr/bin/time is missing; install Debian's 'time' package" >&2
  exit 1
fi

hosts=${HOSTS:-10000}
files=${FILES:-100}
runs=${RUNS:-5}
keys=${KEYS:-"1000 10000 20000"}
cap_s=${CAP_SECONDS:-120}
cap_kb=${CAP_KB:-4000000}
render_hosts=${RENDER_HOSTS:-$hosts}

cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
policyc=$PWD/target/release/policyc
policyvm=$PWD/target/release/policyvm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# check NAME DIR POLICY: one capped `policyc check`, one line of figures.
check() {
  local name=$1 dir=$2 policy=$3 status=0
  ( cd "$dir" && ulimit -v "$cap_kb" &&
    /usr/bin/time -f "%e %U %S %M" -o "$work/time" \
      timeout "$cap_s" "$policyc" check "$policy" >"$work/out" 2>&1 ) || status=$?
  read -r wall user sys rss < <(tail -n 1 "$work/time") || true
  case "$wall" in [0-9]*) ;; *) wall=- user=0 sys=0 rss=- ;; esac
  local result
  result=$(tail -n 1 "$work/out")
  if [ "$status" -ne 0 ] && ! grep -q "^checked" "$work/out"; then
    result="did not finish (exit $status: cap ${cap_s} s / ${cap_kb} kB)"
  fi
  printf '%-34s wall %8s s  cpu %8s s  peak %9s kB  %s\n' "$name" "$wall" \
    "$(python3 -c "print(round(${user:-0} + ${sys:-0}, 2))")" "$rss" "$result"
}

echo "== check: $hosts hosts, one template"
for lookups in 1 10; do
  python3 bench/gen_lookups.py --hosts "$hosts" --lookups "$lookups" --files "$files" -o "$work/h$lookups"
  check "lookup, $lookups field(s)" "$work/h$lookups" lookup.policy
done
check "constant content (baseline)" "$work/h1" constant.policy

echo "== growth: lookups per template, 10 hosts"
for lookups in 3 4 5; do
  python3 bench/gen_lookups.py --hosts 10 --lookups "$lookups" --files 1 -o "$work/g$lookups"
  check "10 hosts, $lookups lookups" "$work/g$lookups" lookup.policy
done

echo "== render: converged policyvm run, median of $runs"
python3 bench/gen_lookups.py --hosts "$render_hosts" --lookups 1 --files "$files" -o "$work/r"
"$policyc" keygen --out "$work/hub" >/dev/null
mkdir -p "$work/trust" && cp "$work/hub.pub" "$work/trust/"
python3 - "$work" "$policyc" "$policyvm" "$runs" "$render_hosts" "$files" <<'PY'
import os, resource, statistics, subprocess, sys, time

work, policyc, policyvm, runs, hosts, files = sys.argv[1:7]
runs, hosts, files = int(runs), int(hosts), int(files)
tree = os.path.join(work, "r")

def build(policy):
    out = os.path.join(work, policy + ".bundle")
    subprocess.run([policyc, "build", policy, "-o", out, "--key",
                    os.path.join(work, "hub.key"), "--serial", "1"],
                   cwd=tree, check=True, stdout=subprocess.DEVNULL)
    return out

def converged_ms(bundle, name):
    root = os.path.join(work, "root-" + name)
    os.makedirs(os.path.join(root, "etc"), exist_ok=True)
    with open(os.path.join(root, "etc", "hostname"), "w") as f:
        f.write(f"host{hosts // 2:05d}\n")
    cmd = [policyvm, "run", bundle, "--trust", os.path.join(work, "trust"), "--root", root]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)   # converge
    samples, cpu = [], []
    for _ in range(runs):
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        samples.append((time.perf_counter() - start) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime) * 1000)
    return statistics.median(samples), statistics.median(cpu), os.path.getsize(bundle)

pairs = [
    (f"lookup bundle ({hosts} hosts)", "lookup.policy", "constant content", "constant.policy", 1),
    (f"{files} host-rendered templates", "hostrender.policy", f"{files} constant files", "hostconst.policy", files),
]
for name_a, pol_a, name_b, pol_b, per in pairs:
    a, cpu_a, size_a = converged_ms(build(pol_a), pol_a)
    b, cpu_b, size_b = converged_ms(build(pol_b), pol_b)
    print(f"{name_a:34} {a:8.1f} ms  cpu {cpu_a:6.1f} ms  bundle {size_a:>10} B")
    print(f"{name_b:34} {b:8.1f} ms  cpu {cpu_b:6.1f} ms  bundle {size_b:>10} B")
    print(f"{'added per template':34} {(a - b) / per:8.3f} ms  cpu {(cpu_a - cpu_b) / per:6.3f} ms  (ratio {a / b:.2f})")
PY

echo "== rival: contradiction analysis over a K-key lookup"
for k in $keys; do
  python3 bench/gen_lookups.py --hosts "$k" --lookups 1 --files 1 -o "$work/k$k"
  check "$k keys" "$work/k$k" rival.policy
done
