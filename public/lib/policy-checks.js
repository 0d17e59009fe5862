// The checks of one instance of policy.wasm (relay-core's src/policy and
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
 * @returns {{checkUrl, checkPath, resolvePython}}:
 *   - checkUrl(network, url) → `{allow: true}` | `{allow: false, reason}`, network as in a
 *     capsule's policy.network;
 *   - checkPath(filesystem, path, "read" | "write") → `{allow: true, path}` (path normalized)
 *     | `{allow: false, reason}`, filesystem as in a capsule's policy.filesystem;
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
  };
}

/** `call(name, request)`: the reply of export `name` to JSON `request`. */
function caller(exports) {
  const { memory, alloc, dealloc } = exports;
  return (name, request) => {
    const input = new TextEncoder().encode(JSON.stringify(request));
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
