#!/usr/bin/env bash
# Runs a command against a fresh local relay-edge: `wrangler dev` on RELAY_TEST_PORT (default
# 8799) with its own empty state (DO, R2, KV), exported as RELAY_URL; stopped afterwards.
# The server's output (the Worker's log lines among it) is in RELAY_SERVER_LOG meanwhile.
# RELAY_INSPECTOR_PORT, when set, is the port of the Worker's DevTools inspector (bench/profile.mjs).
# Usage: scripts/with-server.sh COMMAND [ARGS...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

export RELAY_TEST_PORT="${RELAY_TEST_PORT:-8799}"
export RELAY_URL="http://127.0.0.1:$RELAY_TEST_PORT"
state=$(mktemp -d)
export RELAY_SERVER_LOG="$state/wrangler.log"
# The Worker writes only the lines wrangler prints at this level (its LOG_LEVEL): under wrangler
# dev a line costs ~2-3 ms of CPU even when wrangler then drops it (docs/BENCHMARKS.md).
level="${RELAY_LOG_LEVEL:-log}"
case "$level" in warn) worker_level=warn ;; error | none) worker_level=error ;; *) worker_level=info ;; esac
wrangler dev --ip 127.0.0.1 --port "$RELAY_TEST_PORT" --persist-to "$state" --log-level "$level" --var "LOG_LEVEL:$worker_level" \
  ${RELAY_INSPECTOR_PORT:+--inspector-port "$RELAY_INSPECTOR_PORT"} --show-interactive-dev-session=false >"$state/wrangler.log" 2>&1 &
server=$!
stop_server() {
  local rc=$?
  kill "$server" 2>/dev/null && wait "$server" 2>/dev/null || true
  [ "$rc" = 0 ] || tail -40 "$state/wrangler.log" >&2
  rm -rf "$state"
  exit "$rc"
}
trap stop_server EXIT
for _ in $(seq 1 240); do
  curl -sf "$RELAY_URL/healthz" >/dev/null && break
  kill -0 "$server" 2>/dev/null || exit 1
  sleep 0.5
done
curl -sf "$RELAY_URL/healthz" >/dev/null
"$@"
