#!/usr/bin/env bash
# An operator's tenant routes (README "Operating"), over curl: RELAY is the Worker's URL,
# ADMIN_TOKEN its admin secret. Prints each answer's JSON; exits 1 on a refusal (its JSON on
# stderr).
#
#   tenant.sh list                      tenants, their key ids and states (every page)
#   tenant.sh create NAME               a new tenant and its key (shown once)
#   tenant.sh show ID                   its name and defaults
#   tenant.sh keys ID                   its keys' ids and states
#   tenant.sh rotate ID [GRACE_S]       a new key (shown once); the old ones work GRACE_S more (default 86400)
#   tenant.sh revoke ID KEY_ID          that key refused from now on
#   tenant.sh audit ID [--verify]       every relay session's audit chain; --verify checks each
#                                       with `relay-capsule audit-verify` instead of printing it
#   tenant.sh delete ID                 the tenant and all its data; prints what was deleted
set -euo pipefail
: "${RELAY:?set RELAY to the Worker's URL, such as https://relay.example.com}"
: "${ADMIN_TOKEN:?set ADMIN_TOKEN to the Worker's admin secret}"

# call METHOD PATH [BODY]: the answer's body on stdout, or on stderr with exit 1 when refused.
call() {
  local out status
  out=$(mktemp)
  status=$(curl -sS -o "$out" -w '%{http_code}' -X "$1" "$RELAY$2" -H "authorization: Bearer $ADMIN_TOKEN" \
    -H 'content-type: application/json' ${3:+--data "$3"})
  if [ "$status" -ge 400 ]; then
    echo "$1 $2: HTTP $status $(cat "$out")" >&2
    rm -f "$out"
    return 1
  fi
  cat "$out"
  rm -f "$out"
}

# A path segment, percent-encoded: ids and key ids go into URLs as given.
segment() { jq -rn --arg s "$1" '$s|@uri'; }

cmd=${1:-}
case "$cmd" in
  list)
    cursor=""
    while :; do
      page=$(call GET "/admin/tenants${cursor:+?cursor=$(segment "$cursor")}")
      jq -c '.tenants[]' <<<"$page"
      cursor=$(jq -r '.cursor // empty' <<<"$page")
      [ -n "$cursor" ] || break
    done ;;
  create) call POST /admin/tenants "$(jq -cn --arg name "${2:?name}" '{name: $name}')" ;;
  show) call GET "/admin/tenants/$(segment "${2:?tenant id}")" ;;
  keys) call GET "/admin/tenants/$(segment "${2:?tenant id}")/keys" ;;
  rotate) call POST "/admin/tenants/$(segment "${2:?tenant id}")/keys" "$(jq -cn --argjson g "${3:-86400}" '{graceSeconds: $g}')" ;;
  revoke) call DELETE "/admin/tenants/$(segment "${2:?tenant id}")/keys/$(segment "${3:?key id}")" ;;
  audit)
    exported=$(call GET "/admin/tenants/$(segment "${2:?tenant id}")/audit")
    if [ "${3:-}" != "--verify" ]; then
      echo "$exported"
      exit 0
    fi
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    verify="${CARGO_TARGET_DIR:-$root/target}/debug/relay-capsule"
    for session in $(jq -r '.relaySessions[].session' <<<"$exported"); do
      printf '%s: ' "$session"
      jq -c --arg s "$session" '.relaySessions[] | select(.session == $s) | .records' <<<"$exported" | "$verify" audit-verify
    done ;;
  delete) call DELETE "/admin/tenants/$(segment "${2:?tenant id}")" ;;
  *) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
