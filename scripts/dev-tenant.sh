#!/usr/bin/env bash
# Seeds the `dev` tenant of the relay at URL (default http://127.0.0.1:8787) with the key in
# .dev.vars (DEV_API_KEY). A dev tenant that exists already keeps its name and defaults (as
# PATCH /admin/tenants/dev left them), so restarting scripts/dev.sh does not undo them; one with
# no edge budget is given one (tab-or-edge, 60 runs a minute, 10 minutes a day). Only a
# 404 for the dev tenant means there is none yet: any other failure (an unreachable relay, a
# 503, a wrong ADMIN_TOKEN) stops here, seeding nothing, so no existing defaults are replaced.
# Usage: scripts/dev-tenant.sh [URL]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

URL="${1:-http://127.0.0.1:8787}"
var() { grep "^$1=" .dev.vars | cut -d= -f2-; }
admin="authorization: Bearer $(var ADMIN_TOKEN)"
answer=$(mktemp)
trap 'rm -f "$answer"' EXIT
if ! status=$(curl -sS -o "$answer" -w '%{http_code}' "$URL/admin/tenants/dev" -H "$admin"); then
  echo "dev-tenant.sh: could not reach $URL to look up the dev tenant; nothing seeded. Is the relay running there?" >&2
  exit 1
fi
case "$status" in
  200) existing=$(cat "$answer") ;;
  404) existing='{}' ;;
  *)
    echo "dev-tenant.sh: GET $URL/admin/tenants/dev answered $status: $(head -c 500 "$answer")" >&2
    echo "dev-tenant.sh: nothing seeded, so the dev tenant's defaults stay as they are. Fix the cause (a 401 means" \
      "ADMIN_TOKEN in .dev.vars is not the relay's; a 5xx, that the relay or its KV failed) and run it again." >&2
    exit 1
    ;;
esac
# A dev tenant without an edge budget gets one, and runs at the edge when no tab is there
# (tab-or-edge: README "Where runs go"), so a local user sees both executors.
seed=$(node -e '
  const [existing, key] = process.argv.slice(1);
  let { name = "dev", defaults } = JSON.parse(existing).tenant ?? {};
  if (!defaults?.edge) defaults = { ...defaults, executor: "tab-or-edge", edge: { cpuMsPerDay: 600000, runsPerMinute: 60 } };
  process.stdout.write(JSON.stringify({ id: "dev", key, name, defaults }));
' "$existing" "$(var DEV_API_KEY)")
curl -sS --fail-with-body -o /dev/null -X POST "$URL/admin/tenants" -H "$admin" -H 'content-type: application/json' -d "$seed"
