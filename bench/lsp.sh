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

# shellcheck source=bench/generated.sh
source "$root/bench/generated.sh"
echo "policyc:        $policyc"
echo "input:          $promises promises, $lines lines, $bytes bytes"
python3 "$root/bench/lsp_latency.py" "$policyc" "$file" --edits "$edits"
