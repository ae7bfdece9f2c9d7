#!/usr/bin/env bash
# The main job on the embedded example, as far as Converge goes today:
# check examples/site.policy, generate a signing key, compile and sign the
# bundle, verify it as a host would against its trust directory, and show
# the start of its disassembly. Everything is written to a temporary
# directory that is removed at the end; nothing on this machine is changed.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --locked -q -p converge-compiler --bin policyc -p converge-vm --bin policyvm
policyc=target/release/policyc
policyvm=target/release/policyvm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/trusted"

echo "== policyc check examples/site.policy"
"$policyc" check examples/site.policy

echo
echo "== policyc keygen"
"$policyc" keygen --out "$work/hub"
cp "$work/hub.pub" "$work/trusted/"

echo
echo "== policyc build (compile and sign)"
"$policyc" build examples/site.policy -o "$work/site.bundle" --key "$work/hub.key" --serial 1

echo
echo "== policyvm verify (as a host would, against its trusted keys)"
"$policyvm" verify "$work/site.bundle" --trust "$work/trusted"

echo
echo "== policyvm inspect (first 40 lines)"
"$policyvm" inspect "$work/site.bundle" --trust "$work/trusted" | head -40
