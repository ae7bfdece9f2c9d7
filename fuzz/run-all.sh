#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 600), one after the other,
# with its seeds, and prints the final statistics line of each.
# Needs a nightly toolchain and cargo-fuzz (see fuzz/README.md).
# Usage: bash fuzz/run-all.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-600}
for target in parse bundle stamp fmt template data test_file inventory report globs fetch_auth watch_state sealed_set; do
  seeds=seeds
  [ "$target" = bundle ] && seeds=seeds-bundle
  [ "$target" = stamp ] && seeds=seeds-stamp
  [ "$target" = data ] && seeds=seeds-data
  [ "$target" = test_file ] && seeds=seeds-tests
  [ "$target" = inventory ] && seeds=seeds-inventory
  case "$target" in report | globs | fetch_auth | watch_state | sealed_set) seeds=$(mktemp -d) ;; esac
  mkdir -p "corpus/$target"
  log=$(mktemp)
  dict=()
  [ "$target" = parse ] || [ "$target" = fmt ] || [ "$target" = template ] || [ "$target" = test_file ] && dict=(-dict=parse.dict)
  echo "== $target for ${seconds}s"
  if cargo +nightly fuzz run "$target" "corpus/$target" "$seeds" -- \
      "${dict[@]}" -max_total_time="$seconds" -timeout=10 >"$log" 2>&1; then
    grep -E "^#[0-9]+ +DONE|^Done" "$log" | tail -2
  else
    echo "$target found a problem; the input is in fuzz/artifacts/$target/:"
    tail -30 "$log"
    exit 1
  fi
  rm -f "$log"
done
