#!/usr/bin/env python3
"""Writes a policy tree for bench/secrets_build.sh (issue 20, "Performance"):
HOSTS inventory hosts (default 10,000) in GROUPS groups (default 20), each
with an age recipient, and a policy using SECRETS secrets (default 1,000):
one per group (its group's config), GLOBAL for every host, and the rest one
per host (that host's own config, under `when host_NAME`). The secret files
themselves are written by the shell script with `policyc secret add`.

Host recipients are bech32 `age1...` encodings of random 32-byte X25519
public keys: the build only encrypts to them, so no private half is needed.

Usage: gen_secrets.py DIR  (prints the secret names, one a line)"""
import os
import sys

CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def polymod(values):
    gen = [0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3]
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i in range(5):
            chk ^= gen[i] if ((top >> i) & 1) else 0
    return chk


def bech32(hrp, data):
    bits, acc, out = 0, 0, []
    for b in data:
        acc = (acc << 8) | b
        bits += 8
        while bits >= 5:
            bits -= 5
            out.append((acc >> bits) & 31)
    if bits:
        out.append((acc << (5 - bits)) & 31)
    values = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp] + out
    mod = polymod(values + [0] * 6) ^ 1
    checksum = [(mod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(CHARSET[d] for d in out + checksum)


out = sys.argv[1]
hosts = int(os.environ.get("HOSTS", "10000"))
groups = int(os.environ.get("GROUPS", "20"))
secrets = int(os.environ.get("SECRETS", "1000"))
global_secrets = int(os.environ.get("GLOBAL", "5"))
per_host = secrets - groups - global_secrets
assert per_host >= 0 and per_host <= hosts, "SECRETS must leave room for the group and global ones"

report_key = "ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w="
with open(os.path.join(out, "inventory.toml"), "w") as f:
    for i in range(hosts):
        f.write(
            f'[[host]]\nname = "h{i:05d}"\nreport_key = "{report_key}"\n'
            f'age_recipient = "{bech32("age", os.urandom(32))}"\n'
            f'groups = ["g{i % groups}"]\nfacts = {{ datacenter = "dc{i % 4}" }}\n\n'
        )

names = []
lines = []
body = ["policy {"]
for g in range(groups):
    names.append(f"group_g{g}")
    lines.append(f'let s_group_g{g}: secret = secret("secrets/group_g{g}.age");')
    body.append(f'  when group_g{g} {{ file "/etc/app/group.conf" {{ content = "password=${{s_group_g{g}}}\\n"; mode = 0o600; }} }}')
for s in range(global_secrets):
    names.append(f"global_{s}")
    lines.append(f'let s_global_{s}: secret = secret("secrets/global_{s}.age");')
    body.append(f'  file "/etc/app/global_{s}.key" {{ content = s_global_{s}; mode = 0o400; }}')
for h in range(per_host):
    names.append(f"host_h{h:05d}")
    lines.append(f'let s_host_h{h:05d}: secret = secret("secrets/host_h{h:05d}.age");')
    body.append(f'  when host_h{h:05d} {{ file "/etc/app/host_h{h:05d}.key" {{ content = s_host_h{h:05d}; mode = 0o600; }} }}')
body.append("}")
with open(os.path.join(out, "site.policy"), "w") as f:
    f.write("\n".join(lines + body) + "\n")
print("\n".join(names))
