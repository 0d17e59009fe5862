#!/usr/bin/env bash
# The deploy check CI runs after the build: `wrangler deploy --dry-run` (offline: it builds and
# bundles, uploads nothing) into a temporary directory, then `relay-capsule deploy-check`
# (relay_core::deploy) on its output: every binding the Worker reads present, of its kind, and
# the bundle under the bound. Prints the bundle's size, raw and gzipped.
# Usage: scripts/deploy-check.sh [--config FILE] [--max-gzip-kib N]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

config=wrangler.toml
max=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) config=$2; shift 2 ;;
    --max-gzip-kib) max=("$2"); shift 2 ;;
    *) echo "deploy-check: unknown argument $1" >&2; exit 2 ;;
  esac
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# A failing dry run leaves no size line, which the check then names; its output is shown.
wrangler deploy --dry-run --outdir "$out/bundle" --config "$config" >"$out/dry-run.log" 2>&1 || true
target="${CARGO_TARGET_DIR:-$ROOT/target}"
if ! "$target/debug/relay-capsule" deploy-check "${max[@]}" <"$out/dry-run.log"; then
  cat "$out/dry-run.log" >&2
  exit 1
fi
