#!/usr/bin/env bash
# The main job on the embedded example: check the site policy, generate a
# signing key, compile and sign examples/sandbox.policy (the site's file-level
# policy, without the bundles that run commands on the machine), verify it as
# a host would, and run the VM twice on a sandbox root that looks like a small
# Debian web server. The second run repairs nothing. Everything happens in a
# temporary directory that is removed at the end; the policy runs no command,
# so nothing outside it is touched.
set -euo pipefail
cd "$(dirname "$0")/.."

# The VM's backends run the host's own tools against the sandbox (dpkg-query
# --root, useradd -R, systemctl --root): every Debian machine has them, a
# minimal container image may lack systemctl.
for tool in dpkg-query useradd systemctl; do
  if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
    echo "demo: \`$tool\` is missing; install it first (apt-get install dpkg passwd systemd)" >&2
    exit 1
  fi
done

cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
policyc=${CARGO_TARGET_DIR:-target}/release/policyc
policyvm=${CARGO_TARGET_DIR:-target}/release/policyvm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/trusted"

echo "== policyc check examples/site.policy"
"$policyc" check examples/site.policy

echo
echo "== policyc keygen, policyc build (compile and sign)"
"$policyc" keygen --out "$work/hub" >/dev/null
cp "$work/hub.pub" "$work/trusted/"
"$policyc" build examples/sandbox.policy -o "$work/sandbox.bundle" --key "$work/hub.key" --serial 1

echo
echo "== policyvm verify (as a host would, against its trusted keys)"
"$policyvm" verify "$work/sandbox.bundle" --trust "$work/trusted"

# A sandbox root with what a small Debian web server already has.
root="$work/root"
mkdir -p "$root/etc/ssh" "$root/etc/default"
echo web01 > "$root/etc/hostname"
printf 'ID=debian\nVERSION_ID="12"\n' > "$root/etc/os-release"
printf 'root:x:0:0:root:/root:/bin/bash\nwww-data:x:33:33::/var/www:/usr/sbin/nologin\nalice:x:2001:2001::/home/alice:/bin/bash\ndeploy:x:2002:2100::/home/deploy:/bin/bash\n' > "$root/etc/passwd"
printf 'root:x:0:\nadm:x:4:\nsudo:x:27:\nwww-data:x:33:\nalice:x:2001:\nops:x:2000:\ndeployers:x:2100:\n' > "$root/etc/group"
printf 'nameserver 192.0.2.1\n' > "$root/etc/resolv.conf"
printf '127.0.0.1 localhost\n' > "$root/etc/hosts"
printf 'driftfile /var/lib/ntp/ntp.drift\n' > "$root/etc/ntp.conf"
printf 'PermitRootLogin yes\nPasswordAuthentication yes\nX11Forwarding yes\n' > "$root/etc/ssh/sshd_config"
printf 'ULIMIT="-n 1024"\n' > "$root/etc/default/nginx"
# What the distribution's packages left: a dpkg database listing them as
# installed, and their systemd units (disabled, as in a fresh image).
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/lib/systemd/system"
for p in logrotate ntp openssh-server nginx; do
  printf 'Package: %s\nStatus: install ok installed\nVersion: 1.0\nArchitecture: all\nMaintainer: demo <demo@example.invalid>\nDescription: %s\n\n' "$p" "$p"
done > "$root/var/lib/dpkg/status"
touch "$root/var/lib/dpkg/available"
for u in ntp ssh nginx apache2; do
  printf '[Unit]\nDescription=%s\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n' "$u" > "$root/lib/systemd/system/$u.service"
done

echo
echo "== policyvm run --root SANDBOX (first run: converges the sandbox)"
echo "   (the backends are pointed at the sandbox: dpkg-query reads its database, users and groups"
echo "    change with useradd -R, units are enabled with systemctl --root; no service is started,"
echo "    as no systemd runs inside a root: see docs/promise-types.md)"
"$policyvm" run "$work/sandbox.bundle" --trust "$work/trusted" --root "$root"

echo
echo "== policyvm run --root SANDBOX again (nothing left to repair)"
"$policyvm" run "$work/sandbox.bundle" --trust "$work/trusted" --root "$root" | tail -1

echo
echo "== the converged /etc/ssh/sshd_config of the sandbox"
cat "$root/etc/ssh/sshd_config"
