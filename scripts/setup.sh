#!/usr/bin/env bash
# Installs everything relay-edge needs, once: the wasm32 target, worker-build and a
# wasm-bindgen-cli pinned to Cargo.lock, the npm packages of package-lock.json, the browsers the
# tests drive (with --browser: Debian's Chromium, Firefox ESR, WebKitGTK's WebKitWebDriver and
# Xvfb for it), and a local signing key in .dev.vars. Each step is skipped when already done,
# and nothing is printed then.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

say() { echo "setup: $*" >&2; }

ensure_wasm_target() {
  rustup target list --installed | grep -qx wasm32-unknown-unknown && return
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown >&2
}

# cargo_tool BIN CRATE VERSION: install CRATE@VERSION unless `BIN --version` already says
# VERSION (worker-build prints "0.8.7", wasm-bindgen "wasm-bindgen 0.2.130").
cargo_tool() {
  local bin=$1 crate=$2 version=$3
  if "$HOME/.cargo/bin/$bin" --version 2>/dev/null | awk '{print $NF}' | grep -qxF "$version"; then return; fi
  say "installing $crate $version (a few minutes, once)"
  cargo install --quiet "$crate" --version "$version" --force >&2
}

locked_version() {
  awk -v n="$1" '$0 == "name = \"" n "\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}

ensure_npm() {
  local stamp=node_modules/.relay-lock
  if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp"; then return; fi
  say "installing npm packages from package-lock.json"
  # Not `npm ci`: the registry here lacks some other platforms' optional packages (workerd for
  # macOS), so the lock cannot list them and `npm ci` refuses it. `--no-save` keeps the lock as is.
  npm install --no-save --no-audit --no-fund --loglevel=error >&2
  cp package-lock.json "$stamp"
}

# The Debian packages of the browsers the tests drive, by the program each brings: Chromium (the
# full suite), Firefox ESR and WebKitGTK's WebDriver with Xvfb to draw on (the cross-engine
# subset, miniflare-tests/engines/). Only the missing ones are installed, in one go.
ensure_browsers() {
  local missing=()
  [ -x "$CHROMIUM_BIN" ] || missing+=(chromium)
  [ -x /usr/bin/firefox-esr ] || missing+=(firefox-esr)
  [ -x /usr/bin/WebKitWebDriver ] || missing+=(webkit2gtk-driver)
  [ -x /usr/bin/Xvfb ] || missing+=(xvfb)
  [ ${#missing[@]} = 0 ] && return
  say "installing Debian's ${missing[*]}"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
}

random_b64url() { head -c "$1" /dev/urandom | base64 -w0 | tr '+/' '-_' | tr -d '='; }

# dev_var NAME VALUE: appends NAME=VALUE to .dev.vars unless NAME is there already.
dev_var() {
  grep -q "^$1=" .dev.vars 2>/dev/null && return
  say "writing $1 to .dev.vars (gitignored, local only)"
  echo "$1=$2" >> .dev.vars
}

ensure_dev_vars() {
  dev_var CAPSULE_SIGNING_KEY "$(random_b64url 32)"
  dev_var ADMIN_TOKEN "$(random_b64url 24)"
  dev_var DEV_API_KEY "rk_$(random_b64url 32)"
  dev_var RELAY_ALLOW_LOCALHOST 1
}

ensure_wasm_target
cargo_tool worker-build worker-build 0.8.7
cargo_tool wasm-bindgen wasm-bindgen-cli "$(locked_version wasm-bindgen)"
ensure_npm
ensure_dev_vars
if [ "${1:-}" = "--browser" ]; then ensure_browsers; fi
