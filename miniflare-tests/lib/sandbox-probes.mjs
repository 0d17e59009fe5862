// What the sandbox suites attack with: a loopback listener that records every request reaching
// it (none may), and Python programs that take hold of their runner worker's global scope.
// Used by sandbox.test.mjs (Chromium, every attack) and the cross-engine suite (engine-suite.mjs).

import http from "node:http";

/** A listener on 127.0.0.1 that records every request (method, path) and answers it kindly. */
export async function startLoopback() {
  const hits = [];
  const server = http.createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    res.writeHead(200, { "access-control-allow-origin": "*", "content-type": "text/javascript" });
    res.end("export default 1;");
  });
  server.on("upgrade", (req, socket) => {
    hits.push(`UPGRADE ${req.url}`);
    socket.destroy();
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    hits,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

export const REALM_OUT_OF_REACH = "realm: out of reach";

/**
 * A Python program that first takes its worker's global scope as `g` (setTimeout calls its
 * callback with the global scope as `this`), then runs `body` inside `async def main(g)`.
 * `attempt(name, thunk)` prints "name: blocked <error>" or "name: ALLOWED <value>", awaiting
 * JS promises. It awaits at top level, which works in every engine (asyncio.run() needs JSPI).
 * Where the timer's callback gets no `this` (WebKit), the realm is out of Python's reach: the
 * program prints REALM_OUT_OF_REACH and nothing else.
 */
export function withRealm(body) {
  const indented = body.trim().split("\n").map((line) => `    ${line}`).join("\n");
  return `
import asyncio, inspect, js, sys
from pyodide.ffi import create_proxy, to_js

_box = {}
js.setTimeout(create_proxy(lambda this: _box.setdefault("g", this), capture_this=True), 0)

def obj(g, value):
    return to_js(value, dict_converter=g.Object.fromEntries)

async def attempt(name, thunk):
    try:
        value = thunk()
        if inspect.isawaitable(value):
            value = await value
        print(f"{name}: ALLOWED {str(value)[:60]}")
    except BaseException as error:
        print(f"{name}: blocked {type(error).__name__}")

async def main(g):
${indented}

while "g" not in _box:
    await asyncio.sleep(0)
if _box["g"] is None:
    print("${REALM_OUT_OF_REACH}")
else:
    await main(_box["g"])
`;
}

/** The lines of `stdout` that report an attempt that went through. */
export const allowed = (stdout) => stdout.split("\n").filter((line) => line.includes(": ALLOWED"));

/**
 * The body (for `withRealm`) of every way a worker's realm could send a request: to the
 * loopback listener `loop`, the relay at `base`, a data: URL, by eval. Print lines for `leaks`.
 */
export function requestAttempts(loop, base) {
  return `
await attempt("fetch loopback", lambda: g.fetch("${loop}/py-fetch"))
await attempt("fetch own origin", lambda: g.fetch("${base}/healthz"))
await attempt("fetch data:", lambda: g.fetch("data:text/plain,x"))
await attempt("importScripts", lambda: g.importScripts("${loop}/py-import-scripts.js"))
await attempt("eval import()", lambda: g.eval("import('${loop}/py-eval-import.js')"))
await attempt("Function", lambda: g.Function("return 1")())
x = g.XMLHttpRequest.new()
await attempt("XMLHttpRequest", lambda: (x.open("GET", "${loop}/py-xhr"), x.send()))
await attempt("WebSocket", lambda: g.WebSocket.new("${loop.replace("http", "ws")}/py-ws"))
await attempt("EventSource", lambda: g.EventSource.new("${loop}/py-es"))
await attempt("sendBeacon", lambda: g.navigator.sendBeacon("${loop}/py-beacon", "x"))
await asyncio.sleep(0.3)
`;
}

/**
 * Lines (for `withRealm`) that forge a run's exit and output on the worker's global port and
 * on a BroadcastChannel: the page must take neither as the run's.
 */
export const FORGED_MESSAGES = `g.postMessage(obj(g, {"type": "exit", "exitCode": 0}))
g.postMessage(obj(g, {"type": "stdout", "data": "forged on the global port\\n"}))
g.BroadcastChannel.new("relay").postMessage(obj(g, {"type": "exit", "exitCode": 0}))`;

/**
 * A Python program that has Emscripten eval JavaScript (`emscripten_run_script`, through
 * ctypes) fetching `/ctypes-eval` from the loopback listener `loop`. The frame's CSP forbids
 * eval: the run fails before it prints "survived", and nothing reaches the listener.
 */
export function ctypesEval(loop) {
  return `import ctypes
ctypes.CDLL(None).emscripten_run_script(b"fetch('${loop}/ctypes-eval')")
print("survived")`;
}

/**
 * The attempts of `requestAttempts` that went through, but for opening a socket, a stream or an
 * XHR, which may start (the browser then refuses the connection: the listener hears nothing).
 */
export function leaks(stdout) {
  const started = ["WebSocket", "EventSource", "XMLHttpRequest"];
  return allowed(stdout).filter((line) => !started.some((name) => line.startsWith(name)));
}
