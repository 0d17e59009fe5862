// The page's policy checks and search engine: relay-core's src/policy and src/search compiled to
// wasm (policy-wasm/, served as policy.wasm), so the tab judges a guest's fetch or file write with the very code the Rust
// tests run, not a second implementation. tests/policy_cases.json and tests/fs_path_cases.json
// are the tables both sides pass (miniflare-tests/policy-tables.test.mjs runs them here).
//
// The module has a C ABI and no imports: `alloc(len) -> ptr`, `dealloc(ptr, len)`, and one
// export per check taking a JSON request (ptr, len) and returning the JSON reply's pointer and
// length packed into a u64 (`ptr << 32 | len`). A reply is the decision, or `{error}` when the
// request was malformed, which is this file's bug and thrown.

import { memo } from "./memo.js";

/**
 * @param source where the module comes from: omitted in the page (policy.wasm next to this
 *   module, checked against the SRI hash the build put into the bundle), a URL (fetched and
 *   checked the same way), or the module's bytes (taken as they are: Node tests read them from
 *   dist/public/policy.wasm).
 * @returns {Promise<{checkUrl, checkPath, search}>}, kept per source (the instance is reused):
 *   - checkUrl(network, url) → `{allow: true}` | `{allow: false, reason}`, network as in a
 *     capsule's policy.network;
 *   - checkPath(filesystem, path, "read" | "write") → `{allow: true, path}` (path normalized)
 *     | `{allow: false, reason}`, filesystem as in a capsule's policy.filesystem;
 *   - search(request, files) → the search tool's result for `request` (its arguments) over
 *     `files` ([[path, Uint8Array]]), or throws a ValidationError naming what to change.
 */
export function loadPolicy(source) {
  return policies(source);
}

const policies = memo(async (source) => {
  const bytes = ArrayBuffer.isView(source) || source instanceof ArrayBuffer ? source : await fetchChecked(source);
  const { instance } = await WebAssembly.instantiate(bytes, {});
  const call = caller(instance.exports);
  return {
    checkUrl: (network, url) => call("check_url", { network, url }),
    checkPath: (filesystem, path, access) => call("check_path", { filesystem, path, access }),
    search(request, files) {
      const reply = call("search", searchInput(request, files));
      if (reply.failure) throw Object.assign(new Error(reply.failure), { name: "ValidationError" });
      return reply;
    },
  };
});

/** The `search` export's input: a JSON header, a NUL, then the files' bytes (never escaped). */
function searchInput(request, files) {
  const header = new TextEncoder().encode(JSON.stringify({ request, files: files.map(([path, bytes]) => [path, bytes.length]) }));
  const input = new Uint8Array(header.length + 1 + files.reduce((sum, [, bytes]) => sum + bytes.length, 0));
  input.set(header);
  let at = header.length + 1;
  for (const [, bytes] of files) {
    input.set(bytes, at);
    at += bytes.length;
  }
  return input;
}

async function fetchChecked(url = new URL("policy.wasm", import.meta.url)) {
  // Imported only here, so that Node can load this file unbundled (the alias is esbuild's).
  const { integrity } = (await import("relay-policy-wasm")).default;
  const res = await fetch(url, { integrity });
  if (!res.ok) throw new Error(`GET ${url} answered ${res.status}`);
  return res.arrayBuffer();
}

/** `call(name, request)`: the reply of export `name` to `request` (JSON, or bytes as they are). */
function caller(exports) {
  const { memory, alloc, dealloc } = exports;
  return (name, request) => {
    const input = request instanceof Uint8Array ? request : new TextEncoder().encode(JSON.stringify(request));
    const inPtr = alloc(input.length);
    new Uint8Array(memory.buffer, inPtr, input.length).set(input);
    let packed;
    try {
      packed = exports[name](inPtr, input.length);
    } finally {
      dealloc(inPtr, input.length);
    }
    const outPtr = Number(packed >> 32n);
    const outLen = Number(packed & 0xffffffffn);
    // Read before dealloc; `memory.buffer` is fetched again because the call may have grown it.
    const reply = JSON.parse(new TextDecoder().decode(new Uint8Array(memory.buffer, outPtr, outLen)));
    dealloc(outPtr, outLen);
    if (reply.error) throw new Error(`policy.wasm ${name}: ${reply.error}`);
    return reply;
  };
}
