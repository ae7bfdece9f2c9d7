#!/usr/bin/env bash
# Language-server latency: builds `policyc` in release, generates a policy of
# about 10,000 lines with bench/gen_policy.py, and runs bench/lsp_latency.py:
# didOpen, then one-character edits, each timed from sending the didChange to
# receiving the publishDiagnostics of that version. Prints the median.
#
# Usage: bash bench/lsp.sh            (from any directory)
# Environment: PROMISES (default 3200, about 10,000 lines), EDITS (default 60),
# KEEP=1 keeps the generated file.
# Target (docs/performance.md): median under 100 ms.
set -euo pipefail

root="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)"
promises="${PROMISES:-3200}"
edits="${EDITS:-60}"

cd "$root"
echo "== building policyc (release)" >&2
cargo build --release -p converge-compiler --bin policyc >&2
target_dir="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
policyc="$target_dir/release/policyc"
[[ -x "$policyc" ]] || { echo "lsp.sh: $policyc not found after build" >&2; exit 2; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/converge-bench.XXXXXX")"
cleanup() {
    if [[ "${KEEP:-0}" == 1 ]]; then
        echo "lsp.sh: kept $tmp" >&2
    else
        rm -rf -- "$tmp"
    fi
}
trap cleanup EXIT

file="$tmp/generated.policy"
python3 "$root/bench/gen_policy.py" --promises "$promises" -o "$file"
lines="$(wc -l < "$file" | tr -d ' ')"
bytes="$(wc -c < "$file" | tr -d ' ')"
echo "policyc:        $policyc"
echo "input:          $promises promises, $lines lines, $bytes bytes"
python3 "$root/bench/lsp_latency.py" "$policyc" "$file" --edits "$edits"
