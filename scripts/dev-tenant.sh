#!/usr/bin/env bash
# Seeds the `dev` tenant of the relay at URL (default http://127.0.0.1:8787) with the key in
# .dev.vars (DEV_API_KEY). A dev tenant that exists already keeps its name and defaults (as
# PATCH /admin/tenants/dev left them), so restarting scripts/dev.sh does not undo them.
# Usage: scripts/dev-tenant.sh [URL]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

URL="${1:-http://127.0.0.1:8787}"
var() { grep "^$1=" .dev.vars | cut -d= -f2-; }
admin="authorization: Bearer $(var ADMIN_TOKEN)"
existing=$(curl -sf "$URL/admin/tenants/dev" -H "$admin" || echo '{}')
seed=$(node -e '
  const [existing, key] = process.argv.slice(1);
  const { name = "dev", defaults } = JSON.parse(existing).tenant ?? {};
  process.stdout.write(JSON.stringify({ id: "dev", key, name, defaults }));
' "$existing" "$(var DEV_API_KEY)")
curl -sS --fail-with-body -o /dev/null -X POST "$URL/admin/tenants" -H "$admin" -H 'content-type: application/json' -d "$seed"
