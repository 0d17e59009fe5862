#!/usr/bin/env bash
# Prints relay-edge's latency figures (see bench/latency.mjs) against a fresh local Worker.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --browser
bash scripts/build.sh
RELAY_TEST_PORT="${RELAY_TEST_PORT:-8798}" bash scripts/with-server.sh node bench/latency.mjs
