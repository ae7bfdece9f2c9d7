#!/usr/bin/env bash
# Rebuilds every golden bundle from its policy with a fresh signing key, then
# rewrites the expected `policyvm inspect` output and run reports.
#
# Only for a deliberate format change (a new FORMAT_MAJOR or FORMAT_MINOR,
# docs/bytecode.md "Compatibility"): the bundle bytes are the frozen
# contract every VM must keep reading, so regenerating them for any other
# reason hides exactly the regressions tests/golden.rs exists to catch.
# Review the diff of every *.txt and report.json it changes.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
cargo build -q --bin policyc --bin policyvm
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$target/debug/policyc" keygen --out "$tmp/golden" >/dev/null
mkdir -p tests/golden/trust
cp "$tmp/golden.pub" tests/golden/trust/golden.pub
for policy in tests/golden/*/*.policy; do
  dir=$(dirname "$policy")
  name=$(basename "$dir")
  [ "$(basename "$policy")" = "$name.policy" ] || continue
  # Built from inside its directory, so the source map says `NAME.policy`.
  (cd "$dir" && "$target/debug/policyc" build "$name.policy" -o "$repo/tests/golden/$name.bundle" \
      --key "$tmp/golden.key" --serial 1 --name "$name")
done
CONVERGE_GOLDEN_WRITE=1 cargo test -q --test golden
