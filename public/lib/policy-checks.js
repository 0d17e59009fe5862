// The checks of one instance of policy.wasm (relay-core's src/policy, src/search and
// src/packages/python compiled to wasm by policy-wasm/): the page gets its instance from lib/policy.js (fetched against its SRI
// hash), a runner worker makes its own from the module the sandbox frame compiled
// (runner/write-rule.js). No I/O here.
//
// The module has a C ABI and no imports: `alloc(len) -> ptr`, `dealloc(ptr, len)`, and one
// export per check taking a JSON request (ptr, len) and returning the JSON reply's pointer and
// length packed into a u64 (`ptr << 32 | len`). A reply is the decision, or `{error}` when the
// request was malformed, which is this file's bug and thrown.

/**
 * @param instance a WebAssembly.Instance of policy.wasm
 * @returns {{checkUrl, checkPath, search}}:
 *   - checkUrl(network, url) → `{allow: true}` | `{allow: false, reason}`, network as in a
 *     capsule's policy.network;
 *   - checkPath(filesystem, path, "read" | "write") → `{allow: true, path}` (path normalized)
 *     | `{allow: false, reason}`, filesystem as in a capsule's policy.filesystem;
 *   - search(request, files) → the search tool's result for `request` (its arguments) over
 *     `files` ([[path, Uint8Array]]), or throws a ValidationError naming what to change;
 *   - resolvePython(known) → one step of a Python build's resolution (relay-core's
 *     `packages::python::resolve`): `{fetch: {projects, wheels}}`, `{done: {install}}` or
 *     `{failed: {message}}`.
 */
export function policyChecks(instance) {
  const call = caller(instance.exports);
  return {
    checkUrl: (network, url) => call("check_url", { network, url }),
    checkPath: (filesystem, path, access) => call("check_path", { filesystem, path, access }),
    resolvePython: (known) => call("resolve_python", known),
    search(request, files) {
      const reply = call("search", searchInput(request, files));
      if (reply.failure) throw Object.assign(new Error(reply.failure), { name: "ValidationError" });
      return reply;
    },
  };
}

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
