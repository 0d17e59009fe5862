#!/usr/bin/env bash
# Runs relay-edge locally: `wrangler dev` on 127.0.0.1:8787 (RELAY_PORT to change the port) with
# local Durable Objects, R2 and KV (state in .wrangler/state) and the executor page; seeds the
# dev tenant (scripts/dev-tenant.sh: one that exists keeps its defaults) and prints its key, the
# page to open, and a client config to paste. Ctrl-C stops it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

bash scripts/setup.sh
bash scripts/build.sh
PORT="${RELAY_PORT:-8787}"
URL="http://127.0.0.1:$PORT"
wrangler dev --ip 127.0.0.1 --port "$PORT" --show-interactive-dev-session=false &
server=$!
trap 'kill $server 2>/dev/null' INT TERM EXIT
until curl -sf "$URL/healthz" >/dev/null; do
  kill -0 "$server" 2>/dev/null || exit 1
  sleep 0.5
done

bash scripts/dev-tenant.sh "$URL"
key=$(grep '^DEV_API_KEY=' .dev.vars | cut -d= -f2-)
cat <<INFO

relay-edge is running at $URL
  1. Open the executor page (keep the tab open):  $URL/#key=$key
  2. Point an MCP client at $URL/mcp with the header  Authorization: Bearer $key
     For example (Claude Code):  claude mcp add --transport http relay $URL/mcp --header "Authorization: Bearer $key"
     Or in a client's JSON config:
     { "mcpServers": { "relay": { "type": "http", "url": "$URL/mcp",
                                  "headers": { "Authorization": "Bearer $key" } } } }
  Another relay session: add ?session=NAME to the /mcp URL and #session=NAME to the page URL.

INFO
wait "$server"
