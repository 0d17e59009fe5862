#!/usr/bin/env bash
# Runs every test of relay-edge: formatting and lints, the native tests of the pure core, then
# the built Worker under wrangler dev (workerd, local DO/R2/KV) driven by real MCP clients, the
# official conformance suite and headless Chromium as executor, and last the executor suite's
# core in Chromium, Firefox ESR and WebKitGTK at once, on the same server. Installs what it
# needs first.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

step() { printf '\n== %s\n' "$*"; }

step "setup"
bash scripts/setup.sh --browser

step "format and lints"
cargo fmt --all --check
cargo clippy --quiet --all-targets -- -D warnings
cargo clippy --quiet -p relay-edge --target wasm32-unknown-unknown -- -D warnings
cargo clippy --quiet -p relay-policy-wasm --target wasm32-unknown-unknown -- -D warnings

step "native tests of the pure core"
cargo test --quiet 2>&1 | grep -Ev '^(running 0 tests|test result: ok. 0 passed.*)$|^$'
cargo build --quiet --bin relay-capsule

step "build"
bash scripts/build.sh

step "deploy check: wrangler deploy --dry-run (offline), its bindings and the bundle's size"
bash scripts/deploy-check.sh

step "miniflare-tests: the built Worker under wrangler dev, then the cross-engine subset"
# The suite one file at a time; then the three engines' files in parallel, with nothing else.
bash scripts/with-server.sh bash -ec '
  node --test --test-concurrency=1 --test-reporter=spec miniflare-tests/*.test.mjs
  printf "\n== cross-engine subset: Chromium, Firefox ESR, WebKitGTK\n"
  node --test --test-concurrency=3 --test-reporter=spec miniflare-tests/engines/*.test.mjs'
