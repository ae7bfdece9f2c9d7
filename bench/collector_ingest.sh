#!/usr/bin/env bash
# Collector ingest and query benchmark (issue 18): 10,000 enrolled hosts
# posting signed reports (20 promises each, 2 % failing) into
# converge-collector on SQLite, then on PostgreSQL; `fleet status` over the
# stored reports. Figures: docs/performance.md, "Collector (issue 18)".
#
#   bench/collector_ingest.sh [REPORTS] [FILL] [CONCURRENCY] [BACKENDS]
#
# REPORTS are timed (default 50,000); FILL more are stored first, untimed
# and straight through the store, so the queries run over a large store
# (default 0); BACKENDS is "sqlite postgres" (default) or one of them. PostgreSQL runs as
# `nobody` when this script runs as root (initdb refuses root), in a temp
# cluster on a Unix socket, with its default durability settings.
set -euo pipefail
cd "$(dirname "$0")/.."

reports=${1:-50000}
fill=${2:-0}
concurrency=${3:-8}
backends=${4:-sqlite postgres}

cargo build --release -q -p converge-collector --bin converge-collector --example collector_ingest
gen=target/release/examples/collector_ingest
bin=target/release/converge-collector

work=$(mktemp -d)
cleanup() {
  if [ -n "${pgbin:-}" ] && [ -d "$work/pg/data" ]; then
    $as_pg "$pgbin/pg_ctl" -D "$work/pg/data" -m fast stop >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

if [[ " $backends " == *" sqlite "* ]]; then
  echo "== SQLite"
  "$gen" --collector "$bin" --database "sqlite://$work/collector.db" \
    --reports "$reports" --fill "$fill" --concurrency "$concurrency"
  ls -l "$work/collector.db" | awk '{printf "database file: %d MiB\n", $5 / 1048576}'
fi
[[ " $backends " == *" postgres "* ]] || exit 0

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$pgbin" ]; then
  echo "== PostgreSQL: not installed (apt-get install postgresql), skipped"
  exit 0
fi
echo "== PostgreSQL ($pgbin)"
mkdir "$work/pg"
as_pg=""
if [ "$(id -u)" = 0 ]; then
  chown nobody:nogroup "$work/pg"
  chmod 755 "$work"
  as_pg="setpriv --reuid=nobody --regid=nogroup --clear-groups --"
fi
$as_pg "$pgbin/initdb" -D "$work/pg/data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
$as_pg "$pgbin/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" -w \
  -o "-c listen_addresses='' -c unix_socket_directories='$work/pg' -c shared_buffers=512MB -c max_connections=100" \
  start >/dev/null
$as_pg "$pgbin/createdb" -h "$work/pg" -U postgres fleet
"$gen" --collector "$bin" --database "postgres://postgres@localhost/fleet?host=$work/pg" \
  --reports "$reports" --fill "$fill" --concurrency "$concurrency"
$as_pg "$pgbin/psql" -h "$work/pg" -U postgres -d fleet -Atc \
  "select 'database size: ' || pg_size_pretty(pg_database_size('fleet'))"
