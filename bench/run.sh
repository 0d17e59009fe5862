#!/usr/bin/env bash
# Prints relay-edge's latency figures against a fresh local Worker: bench/latency.mjs, or
# bench/<name>.mjs with `bash bench/run.sh <name>` (upstream: calls of upstream MCP servers).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --browser
bash scripts/build.sh
RELAY_TEST_PORT="${RELAY_TEST_PORT:-8798}" bash scripts/with-server.sh node "bench/${1:-latency}.mjs"
