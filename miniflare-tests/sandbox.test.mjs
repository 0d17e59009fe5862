// The sandbox under attack. Guest code in both runtimes tries every way out of its run (a
// request of any kind, the page's storage or origin, a nested worker, forged messages, eval,
// state left for the next run), through the real path: the official SDK client calls the
// Worker, the Session DO sends the capsule to the executor page in headless Chromium, and the
// run happens in a runner worker inside the page's sandbox frame. A loopback listener records
// every request that reaches it: none may.
//
// Python is given the worst case: it takes hold of its worker's global scope (a timer
// callback's `this`, through Pyodide's FFI) and calls anything there, including spawning a
// nested worker running arbitrary JavaScript. What it holds must be worth nothing.

import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { launchBrowser, openExecutor } from "./lib/browser.mjs";
import { connectClient } from "./lib/mcp-client.mjs";
import { BASE, createTenant } from "./lib/relay.mjs";
import { FORGED_MESSAGES, ctypesEval, leaks, requestAttempts, startLoopback, withRealm } from "./lib/sandbox-probes.mjs";
import { startStaticServer } from "./lib/static-server.mjs";

let browser;
let client;
let loopback;

before(async () => {
  const { key } = await createTenant("sandbox", { queue: { attachWaitMs: 500 } });
  browser = await launchBrowser();
  await openExecutor(browser, key);
  client = await connectClient(key);
  loopback = await startLoopback();
});

after(async () => {
  await client?.close();
  await browser?.close();
  await loopback?.close();
});

const call = async (name, code, policy) => {
  const result = await client.callTool({ name, arguments: { code, ...(policy && { policy }) } });
  return result.structuredContent;
};
const runJs = (code, policy) => call("run_js", code, policy);
const runPy = (code, policy) => call("run_py", code, policy);

/** Lets any request still in flight land, then asserts none reached the loopback listener. */
async function assertNoRequestLeft() {
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.deepEqual(loopback.hits, [], "requests reached the loopback listener");
}

describe("Python holding its worker's global scope", () => {
  test("it is the worker's realm, in an opaque origin, with no storage of the page's origin", async () => {
    const result = await runPy(
      withRealm(`
def present(holder, name):
    return "present" if getattr(holder, name, None) is not None else "absent"
print("realm:", g, "origin:", g.origin, "crossOriginIsolated:", g.crossOriginIsolated)
for name in ["SharedArrayBuffer", "localStorage", "sessionStorage", "caches", "document", "parent", "opener", "top"]:
    print(name, present(g, name))
print("navigator.storage", present(g.navigator, "storage"), "navigator.locks", present(g.navigator, "locks"))
await attempt("indexedDB.open", lambda: g.indexedDB.open("relay"))
`),
    );
    assert.equal(result.exitCode, 0, result.stderr);
    const lines = result.stdout.split("\n");
    assert.equal(lines[0], "realm: [object DedicatedWorkerGlobalScope] origin: null crossOriginIsolated: False");
    for (const name of ["SharedArrayBuffer", "localStorage", "sessionStorage", "caches", "document", "parent", "opener", "top"]) {
      assert.ok(lines.includes(`${name} absent`), `${name} is reachable:\n${result.stdout}`);
    }
    assert.ok(lines.includes("navigator.storage absent navigator.locks absent"), result.stdout);
    assert.ok(lines.includes("indexedDB.open: blocked JsException"), result.stdout);
  });

  test("no request leaves: fetch, XHR, WebSocket, EventSource, importScripts, eval('import()'), sendBeacon", async () => {
    const result = await runPy(withRealm(requestAttempts(loopback.url, BASE)));
    assert.equal(result.exitCode, 0, result.stderr);
    assert.deepEqual(leaks(result.stdout), [], result.stdout);
    await assertNoRequestLeft();
  });

  test("JavaScript it starts in a nested worker is just as walled in, and dies with the run", async () => {
    const loop = loopback.url;
    const attacker = `
      const tries = {
        fetch: () => fetch("${loop}/nested-fetch"),
        import: () => import("${loop}/nested-import.js"),
        importBlob: () => import(URL.createObjectURL(new Blob(["export default 1"], { type: "text/javascript" }))),
        importScripts: () => importScripts("${loop}/nested-import-scripts.js"),
        eval: () => eval("1"),
        websocket: () => new Promise((ok, no) => { const s = new WebSocket("${loop.replace("http", "ws")}/nested-ws"); s.onopen = ok; s.onerror = () => no(new Error("refused")); }),
        indexedDB: () => new Promise((ok, no) => { const r = indexedDB.open("x"); r.onsuccess = ok; r.onerror = () => no(r.error); }),
      };
      (async () => {
        const out = [];
        for (const [name, attempt] of Object.entries(tries)) {
          try { await attempt(); out.push(name + ": ALLOWED"); } catch (e) { out.push(name + ": blocked " + e.name); }
        }
        postMessage(out.join("\\n"));
        // Try to outlive the run: keep calling out to whoever listens in this origin.
        const channel = new BroadcastChannel("relay-leak");
        setInterval(() => channel.postMessage("still here"), 20);
      })();`;
    const listen = `
heard = []
channel = g.BroadcastChannel.new("relay-leak")
channel.onmessage = create_proxy(lambda event: heard.append(event.data))
await asyncio.sleep(0.3)
print("heard", len(heard) > 0)
`;
    const result = await runPy(
      withRealm(`
blob = g.Blob.new(to_js([${JSON.stringify(attacker)}]), obj(g, {"type": "text/javascript"}))
nested = g.Worker.new(g.URL.createObjectURL(blob))
done = asyncio.get_running_loop().create_future()
nested.onmessage = create_proxy(lambda event: done.set_result(event.data))
print(await done)
${listen}
`),
    );
    assert.equal(result.exitCode, 0, result.stderr);
    const report = "fetch: blocked TypeError\nimport: blocked TypeError\nimportBlob: blocked TypeError\nimportScripts: blocked NetworkError\neval: blocked EvalError\nwebsocket: blocked Error\nindexedDB: blocked SecurityError\n";
    // The last line shows the channel works while the nested worker lives: the next run hears nothing.
    assert.equal(result.stdout, `${report}heard True\n`);
    const next = await runPy(withRealm(listen));
    assert.equal(next.stdout, "heard False\n", next.stderr);
    await assertNoRequestLeft();
  });

  test("it cannot forge the run's messages, nor see the ones its glue sends", async () => {
    const result = await runPy(
      withRealm(`
${FORGED_MESSAGES}
g.self.onmessage = create_proxy(lambda event: print("heard", event.data))
# Spy on every MessagePort send in this realm (passing them on, so Pyodide's own scheduling
# still works): the glue's stdout and exit must not pass through it.
seen = []
original = g.MessagePort.prototype.postMessage
def spy(this, *args):
    kind = getattr(args[0], "type", None) if args and hasattr(args[0], "js_id") else None
    if kind in ("stdout", "stderr", "exit"):
        seen.append(kind)
    return original.call(this, *args)
g.MessagePort.prototype.postMessage = create_proxy(spy, capture_this=True)
print("real output")
await asyncio.sleep(0.05)
print("glue messages seen:", len(seen), file=sys.stderr)
sys.exit(7)
`),
    );
    assert.equal(result.exitCode, 7, result.stderr);
    assert.equal(result.stdout, "real output\n");
    assert.equal(result.stderr, "glue messages seen: 0\n");
  });

  test("its timeout is the page's clock: messages, a closed worker, a busy loop all end at timeoutMs", async () => {
    const spam = withRealm(`
for _ in range(100):
    g.postMessage(obj(g, {"type": "started"}))
while True:
    pass
`);
    const busy = await runPy(spam, { limits: { timeoutMs: 1500 } });
    assert.equal(busy.error?.name, "Timeout", JSON.stringify(busy));
    assert.equal(busy.exitCode, 124);
    assert.ok(busy.usage.wallMs >= 1500 && busy.usage.wallMs < 4000, `wallMs ${busy.usage.wallMs}`);

    const closed = await runPy(withRealm("g.close()\nawait asyncio.sleep(60)"), { limits: { timeoutMs: 1500 } });
    assert.equal(closed.error?.name, "Timeout", JSON.stringify(closed));

    const next = await runPy("print('fine')");
    assert.equal(next.stdout, "fine\n");
  });

  test("filling its worker's JavaScript heap kills the frame's process: the run ends RuntimeCrashed, and the tab goes on", async (t) => {
    // V8 aborts the renderer process the sandbox frame lives in (Chromium gives it its own);
    // the page hears nothing of it but the silence of the frame it pings.
    const fill = withRealm(`
keep = []
i = 0
while True:
    keep.append(g.Array.new(1000000).fill(i))
    i += 1
`);
    const timed = async (promise) => {
      const started = Date.now();
      return [await promise, Date.now() - started];
    };
    const [crashed, crashedMs] = await timed(runPy(fill, { limits: { timeoutMs: 60_000 } }));
    assert.equal(crashed.error?.name, "RuntimeCrashed", JSON.stringify(crashed));
    assert.equal(crashed.exitCode, 137);
    assert.match(crashed.error.message, /^pyodide@\S+ crashed after \d+ ms, most likely out of memory: .*use less memory$/);
    const [py, pyMs] = await timed(runPy("print('fine')", { limits: { timeoutMs: 5_000 } }));
    assert.equal(py.stdout, "fine\n", JSON.stringify(py));
    const [js, jsMs] = await timed(runJs("console.log('fine')", { limits: { timeoutMs: 5_000 } }));
    assert.equal(js.stdout, "fine\n", JSON.stringify(js));
    t.diagnostic(`the crashed run ended after ${crashedMs} ms (its limit: 60000 ms); then run_py took ${pyMs} ms, run_js ${jsMs} ms`);
  });

  test("ctypes into emscripten_run_script meets the no-eval wall, and the next run is clean", async () => {
    const result = await runPy(ctypesEval(loopback.url));
    assert.notEqual(result.exitCode, 0);
    assert.doesNotMatch(result.stdout, /survived/);
    const next = await runPy("print('fine')");
    assert.equal(next.exitCode, 0, next.stderr);
    assert.equal(next.stdout, "fine\n");
    await assertNoRequestLeft();
  });

  // Files are the exception by design: the workspace (/tmp, /out, /host) persists, and nothing
  // outside it may be written at all (workspace.test.mjs).
  test("nothing a run changes is seen by the next: globals, modules, env, timers", async () => {
    const polluter = await runPy(
      withRealm(`
import json, os, builtins
g.leak = "left behind"
json.dumps = lambda *args, **kwargs: "patched"
sys.modules["leaky"] = sys
os.environ["LEAK"] = "1"
builtins.LEAK = 1
g.setInterval(create_proxy(lambda: print("tick from the past")), 5)
print("polluted")
`),
    );
    assert.match(polluter.stdout, /^polluted\n/, polluter.stderr);
    const probe = await runPy(
      withRealm(`
import json, os, builtins
await asyncio.sleep(0.1)
print(getattr(g, "leak", None), json.dumps({}), "leaky" in sys.modules, os.environ.get("LEAK"), hasattr(builtins, "LEAK"))
`),
    );
    assert.equal(probe.stdout, "None {} False None False\n", probe.stderr);
  });
});

describe("the sandbox frame itself", () => {
  test("it is served sandboxed wherever it is framed, and only the relay's own pages may frame it", async () => {
    const res = await fetch(`${BASE}/sandbox.html`);
    assert.equal(res.status, 200);
    const policy = res.headers.get("content-security-policy") ?? "";
    assert.match(policy, /(^|;)\s*sandbox allow-scripts\s*(;|$)/);
    assert.match(policy, /frame-ancestors 'self'/);
    // Another origin on the same site frames it without the sandbox attribute: it must not
    // load there (or its script would run in the relay's origin, next to the relay's storage).
    const dir = await mkdtemp(path.join(tmpdir(), "relay-attacker-"));
    await writeFile(
      path.join(dir, "index.html"),
      `<iframe src="${BASE}/sandbox.html"></iframe><script>window.heard = []; addEventListener("message", (e) => heard.push(e.data?.type));</script>`,
    );
    const attacker = await startStaticServer(dir);
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${attacker.url}/`);
      await page.waitForTimeout(1500);
      assert.deepEqual(await page.evaluate(() => window.heard), [], "the frame ran for a foreign page");
    } finally {
      await context.close();
      await attacker.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("JavaScript in QuickJS", () => {
  test("its global object, reached every way, holds no browser API", async () => {
    // No fetch here: the global fetch is the relay's own, sent to the page, which applies the policy.
    const names = ["XMLHttpRequest", "WebSocket", "EventSource", "importScripts", "postMessage", "self", "navigator", "indexedDB", "caches", "Worker", "BroadcastChannel", "MessageChannel"];
    const result = await runJs(`
      const globals = [globalThis, Function("return this")(), ({}).constructor.constructor("return this")(), (0, eval)("this")];
      console.log(globals.every((g) => g === globalThis));
      console.log(${JSON.stringify(names)}.filter((name) => typeof globalThis[name] !== "undefined").join(",") || "none");
    `);
    assert.equal(result.stdout, "true\nnone\n", result.stderr);
  });

  test("import() of a URL, directly or through eval, is refused without a request", async () => {
    const result = await runJs(`
      for (const load of [() => import("${loopback.url}/qjs-import.js"), () => eval('import("${loopback.url}/qjs-eval-import.js")')]) {
        try { await load(); console.log("ALLOWED"); } catch (e) { console.log("blocked:", e.message); }
      }
    `);
    assert.equal(result.exitCode, 0, result.stderr);
    assert.match(result.stdout, /^blocked: .*can be imported, not URLs.*\nblocked: .*can be imported, not URLs.*\n$/);
    await assertNoRequestLeft();
  });

  test("timers do not outlive the run, and globals do not reach the next", async () => {
    const first = await runJs(`globalThis.leak = 1; setInterval(() => console.log("tick"), 1); process.exit(0);`);
    assert.equal(first.exitCode, 0);
    const next = await runJs(`await new Promise((r) => setTimeout(r, 50)); console.log(typeof globalThis.leak);`);
    assert.equal(next.stdout, "undefined\n");
  });
});
