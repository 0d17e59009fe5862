#!/usr/bin/env bash
# Prints relay-edge's latency figures against a fresh local Worker: bench/latency.mjs, or
# bench/<name>.mjs with `bash bench/run.sh <name>` (upstream: calls of upstream MCP servers;
# floor: where the floor goes; quota: what the tenant's ledger costs; packages: dependency
# builds; throughput: 8 clients at once and memory over 1,000 runs; engines: the page in Chromium, Firefox ESR and WebKitGTK). The server
# logs at `warn`: at `log` wrangler dev prints every request and log line, which adds ~25 ms to
# a run here and nothing in production; and the Worker writes no info line then
# (scripts/with-server.sh sets its LOG_LEVEL to match).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --browser
bash scripts/build.sh
RELAY_LOG_LEVEL="${RELAY_LOG_LEVEL:-warn}" RELAY_TEST_PORT="${RELAY_TEST_PORT:-8798}" bash scripts/with-server.sh node "bench/${1:-latency}.mjs"
