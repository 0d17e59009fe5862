#!/usr/bin/env bash
# Runs every test of relay-edge: formatting and lints, the native tests of the pure core, then
# the built Worker under wrangler dev (workerd, local DO/R2/KV) driven by real MCP clients, the
# official conformance suite and headless Chromium as executor. Installs what it needs first.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

step() { printf '\n== %s\n' "$*"; }

step "setup"
bash scripts/setup.sh --browser

step "format and lints"
cargo fmt --check
cargo clippy --quiet --all-targets -- -D warnings
cargo clippy --quiet --lib --target wasm32-unknown-unknown -- -D warnings

step "native tests of the pure core"
cargo test --quiet 2>&1 | grep -Ev '^(running 0 tests|test result: ok. 0 passed.*)$|^$'
cargo build --quiet --bin relay-capsule

step "build"
bash scripts/build.sh

step "the Worker under wrangler dev"
export RELAY_TEST_PORT="${RELAY_TEST_PORT:-8799}"
export RELAY_URL="http://127.0.0.1:$RELAY_TEST_PORT"
state=$(mktemp -d)
wrangler dev --ip 127.0.0.1 --port "$RELAY_TEST_PORT" --persist-to "$state" --log-level warn \
  --show-interactive-dev-session=false >"$state/wrangler.log" 2>&1 &
server=$!
stop_server() {
  local rc=$?
  kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
  rm -rf "$state"
  exit "$rc"
}
trap stop_server EXIT
for _ in $(seq 1 120); do
  curl -sf "$RELAY_URL/healthz" >/dev/null && break
  kill -0 $server 2>/dev/null || { cat "$state/wrangler.log"; exit 1; }
  sleep 0.5
done
curl -sf "$RELAY_URL/healthz" >/dev/null || { cat "$state/wrangler.log"; exit 1; }

step "miniflare-tests"
node --test --test-concurrency=1 --test-reporter=spec miniflare-tests/*.test.mjs || { tail -50 "$state/wrangler.log"; exit 1; }
