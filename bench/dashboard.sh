#!/usr/bin/env bash
# Dashboard benchmark (issue 18): a release `converge-collector` on
# loopback with a fresh SQLite file and an inventory of HOSTS hosts, one
# signed report uploaded per host (20 promises, 2 % of the hosts failing
# one), then `GET /` (the overview page), `GET /api/v1/status` and one host
# page timed ROUNDS times each (collector/examples/dashboard_load.rs).
# Times are taken by the client over loopback: an upper bound of the
# server time.
#
# Usage: bash bench/dashboard.sh      Environment: HOSTS (10000), ROUNDS (9).
# Target (docs/performance.md, "Dashboard"): overview < 300 ms at 10,000 hosts.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p converge-collector --bin converge-collector --example dashboard_load
target/release/examples/dashboard_load target/release/converge-collector "${HOSTS:-10000}" "${ROUNDS:-9}"
