#!/usr/bin/env bash
# Smoke run of package builds against the real default sources (the npm registry, PyPI,
# Pyodide's CDN): builds relay-edge, starts it locally (scripts/with-server.sh) and runs
# scripts/smoke-packages.mjs with a headless Chromium tab, which prints each call's cold and
# reused time. Needs the network; not part of CI. RELAY_TEST_PORT picks the port (8799).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
cargo build --quiet --bin relay-capsule
bash scripts/build.sh >/dev/null
bash scripts/with-server.sh node scripts/smoke-packages.mjs
