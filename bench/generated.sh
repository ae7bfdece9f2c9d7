# Sourced by bench/check.sh and bench/lsp.sh: builds `policyc` in release
# and generates a policy of $promises promises with bench/gen_policy.py in a
# temporary directory (removed at exit unless KEEP=1).
# Needs $root (the repository) and $promises; sets $policyc, $tmp, $file,
# $lines and $bytes.

bench_name="$(basename -- "$0")"
cd "$root"
echo "== building policyc (release)" >&2
cargo build --release -p converge-compiler --bin policyc >&2
target_dir="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
policyc="$target_dir/release/policyc"
[[ -x "$policyc" ]] || { echo "$bench_name: $policyc not found after build" >&2; exit 2; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/converge-bench.XXXXXX")"
cleanup() {
    if [[ "${KEEP:-0}" == 1 ]]; then
        echo "$bench_name: kept $tmp" >&2
    else
        rm -rf -- "$tmp"
    fi
}
trap cleanup EXIT

file="$tmp/generated.policy"
python3 "$root/bench/gen_policy.py" --promises "$promises" -o "$file"
lines="$(wc -l < "$file" | tr -d ' ')"
bytes="$(wc -c < "$file" | tr -d ' ')"
