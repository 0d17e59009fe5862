#!/usr/bin/env bash
# Builds the Worker (the relay-edge crate in durable/, Rust -> wasm with worker-build) into
# durable/build/ and the executor page's assets into dist/public/, among them policy.wasm (the
# policy-wasm crate, compiled by build-assets.mjs). wrangler runs this before
# `dev` and `deploy`; it is skipped when nothing it reads has changed since the last build.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

# One build at a time: wrangler dev rebuilds on change, and tests may build too.
mkdir -p build
exec 9>build/.lock
flock 9

stamp=build/.relay-stamp
inputs=(src durable/src durable/js durable/Cargo.toml policy-wasm migrations Cargo.toml Cargo.lock public scripts/build-assets.mjs scripts/pyodide-patches.mjs package-lock.json)
if [ -f "$stamp" ] && [ -z "$(find "${inputs[@]}" -newer "$stamp" -print -quit)" ]; then
  exit 0
fi
(cd durable && worker-build --release >&2)
node scripts/build-assets.mjs >&2
touch "$stamp"
