// The executor suite's core, written once against lib/engines.mjs and run in each browser
// engine by miniflare-tests/engines/<engine>.test.mjs: the official SDK client calls the Worker
// and the executor page, open in that engine, runs the calls. Attach with a key; run_js and
// run_py with streamed output; read, write and search; a guarded fetch allowed and refused; an
// /out file; a deps build (lodash from the loopback registry); a reload keeping the workspace;
// the Cache API, the results and lease sockets and the keepalive goodbye; and the sandbox's
// walls (the page's storage, the network past the policy, eval, state across runs, a forged
// exit). Where an engine lacks something the page degrades as its status area says
// (DEGRADED), and the tests hold the page to what it says.

import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { attachTab, pageFacts, waitForAttached } from "./engines.mjs";
import { connectClient } from "./mcp-client.mjs";
import { startPackageSources } from "./package-sources.mjs";
import { BASE, ROOT, createTenant } from "./relay.mjs";
import { FORGED_MESSAGES, REALM_OUT_OF_REACH, ctypesEval, leaks, requestAttempts, startLoopback, withRealm } from "./sandbox-probes.mjs";

/** What each engine's page says works differently there (browser-support.js ids), when it
 * first loads and after a reload. */
const DEGRADED = {
  chromium: { load: [], reload: [] },
  firefox: { load: [], reload: [] },
  // WebKitGTK's MiniBrowser has no navigator.storage (so no OPFS) and no WebAssembly JSPI; its
  // WebDriver session is ephemeral, and its Cache API keeps nothing once the page reloads.
  webkit: { load: ["opfs", "jspi"], reload: ["opfs", "jspi", "cache"] },
};

/**
 * Whether Python can take hold of its runner worker's global scope there (sandbox-probes.mjs):
 * WebKit calls a timer's callback without the global scope as `this`, and the frame's CSP
 * forbids the eval that would reach it otherwise.
 */
const REALM = { chromium: true, firefox: true, webkit: false };

const SCREENSHOTS = path.join(ROOT, "miniflare-tests", ".artifacts", "screenshots");

/** Defines the suite for `engine` ("chromium", "firefox" or "webkit"). */
export function engineSuite(engine) {
  const degraded = DEGRADED[engine].load;
  let tab;
  let client;
  let target; // a loopback server the tenant's policy allows guest code to fetch
  let origin;
  let loopback; // a loopback listener nothing may reach
  let registry;
  let tenant;

  before(async () => {
    target = await startTarget();
    origin = `http://localhost:${target.address().port}`;
    loopback = await startLoopback();
    registry = await startPackageSources();
    const network = { allowedDomains: [`localhost:${target.address().port}`], blockPrivateRanges: false, denyIpLiterals: false };
    let key;
    ({ key, tenant } = await createTenant(`engine-${engine}`, { policy: { network }, packages: registry.sources, queue: { attachWaitMs: 5000 } }));
    tab = await attachTab(engine, key);
    client = await connectClient(key);
  });

  after(async () => {
    await client?.close();
    await tab?.close();
    target?.close();
    await loopback?.close();
    await registry?.close();
  });

  const call = async (name, args) => (await client.callTool({ name, arguments: args })).structuredContent;
  const runJs = (code, extra) => call("run_js", { code, ...extra });
  const runPy = (code, extra) => call("run_py", { code, ...extra });

  describe(`the executor page in ${engine}`, () => {
    test("attaches with a key; its status area names the browser and what works differently there", async () => {
      const facts = await waitForAttached(tab, { runtimes: true });
      mkdirSync(SCREENSHOTS, { recursive: true });
      await tab.screenshot(path.join(SCREENSHOTS, `engine-${engine}.png`));
      assert.match(facts.banner, /^Attached\./);
      assert.deepEqual(facts.degraded, degraded, facts.browser);
      if (!degraded.length) assert.match(facts.browser, /: everything works$/);
      console.log(`${engine} (${tab.version}): ${facts.browser}`);
    });

    test("run_js: stdout and stderr stream to the client before the result", async () => {
      const seen = [];
      client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => seen.push([n.params.logger, n.params.data]));
      const result = await runJs("console.log('out', 1 + 1); console.error('err'); process.exit(3)");
      assert.deepEqual([result.exitCode, result.stdout, result.stderr], [3, "out 2\n", "err\n"]);
      assert.deepEqual(seen, [["stdout", "out 2\n"], ["stderr", "err\n"]]);
    });

    test("run_py: output streams, an exception is a traceback, sys.exit sets the code", async () => {
      const seen = [];
      client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => seen.push([n.params.logger, n.params.data]));
      const result = await runPy("import sys\nprint('py out')\nprint('py err', file=sys.stderr)\nsys.exit(2)");
      assert.deepEqual([result.exitCode, result.stdout, result.stderr], [2, "py out\n", "py err\n"], JSON.stringify(result));
      assert.deepEqual(seen, [["stdout", "py out\n"], ["stderr", "py err\n"]]);
      const raised = await runPy("def f():\n    raise ValueError('boom')\nf()");
      assert.equal(raised.exitCode, 1);
      assert.match(raised.stderr, /Traceback[\s\S]*ValueError: boom/);
    });

    test("read, write and search work on the relay session's workspace, which both runtimes share through the tab's copy", async () => {
      const written = await call("write", { path: "/tmp/notes/hello.txt", content: "héllo\nworld\n" });
      assert.deepEqual(written, { path: "/tmp/notes/hello.txt", bytesWritten: 13, size: 13 });
      assert.equal((await call("read", { path: "/tmp/notes/hello.txt" })).content, "héllo\nworld\n");
      const js = await runJs('import fs from "fs";\nfs.writeFileSync("/tmp/notes/js.txt", fs.readFileSync("/tmp/notes/hello.txt", "utf8").toUpperCase());');
      assert.equal(js.exitCode, 0, JSON.stringify(js));
      const py = await runPy("print(open('/tmp/notes/js.txt').read().split())");
      assert.equal(py.stdout, "['HÉLLO', 'WORLD']\n", JSON.stringify(py));
      const found = await call("search", { pattern: "WOR", paths: ["/tmp/notes"] });
      assert.deepEqual(
        found.matches.map((m) => [m.path, m.line]),
        [["/tmp/notes/js.txt", 2]],
      );
    });

    test("guest fetch: an allowed host is reached through the Worker, another is refused in the tab", async () => {
      const js = await runJs(`
        console.log(await (await fetch("${origin}/hello")).text());
        try { await fetch("https://evil.example/x") } catch (e) { console.log(e.name) }`);
      assert.equal(js.stdout, "hello from the target\nPolicyDenied\n", JSON.stringify(js));
      assert.deepEqual([js.usage.fetches, js.usage.denied], [2, 1]);
      const py = await runPy(`from pyodide.http import pyfetch
print(await (await pyfetch("${origin}/hello")).string())
try:
    await pyfetch("https://evil.example/x")
except Exception as e:
    print(str(e).split(":")[0])`);
      assert.equal(py.stdout, "hello from the target\nPolicyDenied\n", JSON.stringify(py));
    });

    test("urllib.request: works where Python can block on a promise, and says to use pyfetch where it cannot", async () => {
      const code = `import urllib.request, urllib.error
try:
    print(urllib.request.urlopen("${origin}/hello").read().decode())
except urllib.error.URLError as e:
    print("URLError", e.reason)`;
      const result = await runPy(code);
      assert.equal(result.exitCode, 0, JSON.stringify(result));
      if (degraded.includes("jspi")) assert.match(result.stdout, /^URLError urllib\.request blocks .*JSPI.*pyfetch/);
      else assert.equal(result.stdout, "hello from the target\n");
    });

    test("a file left in /out comes back with a download URL", async () => {
      const result = await runPy("open('/out/data.csv', 'w').write('a,b\\n1,2\\n')");
      assert.equal(result.exitCode, 0, JSON.stringify(result));
      const [file] = result.files;
      assert.deepEqual([file.path, file.size], ["/out/data.csv", 8]);
      assert.equal(await (await fetch(file.url)).text(), "a,b\n1,2\n");
    });

    test("npm dependencies: lodash is built in the tab from the loopback registry, then imported", async () => {
      const result = await runJs('import _ from "lodash";\nconsole.log(JSON.stringify(_.chunk([1, 2, 3, 4, 5], 2)), _.VERSION);', {
        npm: { dependencies: { lodash: "^4.17.0" } },
      });
      assert.equal(result.stdout, "[[1,2],[3,4],[5]] 4.17.21\n", JSON.stringify(result));
    });

    test("a reload keeps the workspace", async () => {
      await call("write", { path: "/tmp/kept.txt", content: "kept across a reload", mode: "overwrite" });
      await tab.reload();
      await waitForAttached(tab);
      assert.equal((await call("read", { path: "/tmp/kept.txt" })).content, "kept across a reload");
      const py = await runPy("print(open('/tmp/kept.txt').read())");
      assert.equal(py.stdout, "kept across a reload\n", JSON.stringify(py));
      assert.deepEqual((await pageFacts(tab)).degraded, DEGRADED[engine].reload);
    });

    test("the runtimes' files and Pyodide's memory snapshot are kept in the Cache API for the next load, where it keeps anything", async () => {
      const { degraded: now } = await waitForAttached(tab, { runtimes: true });
      const cached = await tab.evaluate(async () => {
        const names = (await caches.keys()).filter((name) => name.startsWith("relay-runtime-"));
        const entries = await Promise.all(names.map(async (name) => (await (await caches.open(name)).keys()).map((r) => new URL(r.url).pathname.split("/").pop())));
        return Object.fromEntries(names.map((name, i) => [name.split("@")[0], entries[i]]));
      });
      if (now.includes("cache")) {
        // As the page says: nothing kept, so every load fetches the runtimes and boots Pyodide.
        assert.ok(Object.values(cached).every((files) => files.length === 0), JSON.stringify(cached));
        return;
      }
      assert.ok(cached["relay-runtime-quickjs"]?.length > 1, JSON.stringify(cached));
      assert.ok(cached["relay-runtime-pyodide"]?.includes("snapshot.bin"), JSON.stringify(cached));
    });

    test("the results and lease sockets open (the attach token in their subprotocols), and a reload says goodbye by keepalive POST", async () => {
      // (A batch may still go by POST: one sent before its page's socket opened.)
      // The server's log of this tenant's requests (scripts/with-server.sh): what the page used.
      const routes = () =>
        serverLog()
          .filter((line) => line.tenant === tenant.id)
          .map((line) => `${line.route} ${line.status}`);
      let seen = routes();
      for (let i = 0; i < 50 && !seen.includes("POST /session/:id/detach 204"); i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        seen = routes();
      }
      const count = (route) => seen.filter((line) => line === route).length;
      assert.equal(count("GET /session/:id/results 101"), 2, "a results socket per page load");
      assert.equal(count("GET /session/:id/lease 101"), 2, "a lease socket per page load");
      assert.ok(seen.includes("POST /session/:id/detach 204"), `the reload's goodbye: ${seen.join(", ")}`);
    });
  });

  describe(`the sandbox in ${engine}`, () => {
    /** Lets any request still in flight land, then asserts none reached the loopback listener. */
    async function assertNoRequestLeft() {
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual(loopback.hits, [], "requests reached the loopback listener");
    }

    /**
     * Runs `body` with Python holding its worker's realm (sandbox-probes.mjs `withRealm`) and
     * returns its output; null where the realm is out of Python's reach (REALM), which the
     * program said, with nothing to attack with.
     */
    async function withRealmRun(body) {
      const result = await runPy(withRealm(body));
      assert.equal(result.exitCode, 0, result.stderr);
      if (REALM[engine]) return result.stdout;
      assert.equal(result.stdout, `${REALM_OUT_OF_REACH}\n`);
      return null;
    }

    test("Python holding its worker's realm finds an opaque origin with none of the page's storage", async () => {
      const names = ["localStorage", "sessionStorage", "caches", "document", "parent", "opener", "top"];
      const stdout = await withRealmRun(`
def present(name):
    try:
        return "present" if getattr(g, name, None) is not None else "absent"
    except Exception:
        return "absent"  # reading it throws: Firefox's caches in an opaque origin
print("origin:", g.origin)
for name in ${JSON.stringify(names)}:
    print(name, present(name))
await attempt("indexedDB.open", lambda: g.indexedDB.open("relay"))
`);
      if (stdout === null) return;
      const lines = stdout.trim().split("\n");
      assert.deepEqual(lines.slice(0, names.length + 1), ["origin: null", ...names.map((name) => `${name} absent`)], stdout);
      assert.match(lines.at(-1), /^indexedDB\.open: blocked/, stdout);
    });

    test("no request leaves past the policy: fetch, importScripts, import(), XHR, WebSocket, EventSource, sendBeacon", async () => {
      const stdout = await withRealmRun(requestAttempts(loopback.url, BASE));
      if (stdout !== null) assert.deepEqual(leaks(stdout), [], stdout);
      await assertNoRequestLeft();
    });

    test("eval meets the frame's CSP: ctypes into emscripten_run_script fetches nothing, and the next run is clean", async () => {
      const result = await runPy(ctypesEval(loopback.url));
      assert.notEqual(result.exitCode, 0);
      assert.doesNotMatch(result.stdout, /survived/);
      assert.equal((await runPy("print('fine')")).stdout, "fine\n");
      await assertNoRequestLeft();
    });

    test("nothing a run changes is seen by the next: modules, env, builtins, timers, globals", async () => {
      const polluter = await runPy(`import js, json, os, sys, builtins
from pyodide.ffi import create_proxy
json.dumps = lambda *args, **kwargs: "patched"
sys.modules["leaky"] = sys
os.environ["LEAK"] = "1"
builtins.LEAK = 1
js.setInterval(create_proxy(lambda: print("tick from the past")), 5)
print("polluted")`);
      assert.match(polluter.stdout, /^polluted\n/, polluter.stderr);
      const probe = await runPy(`import asyncio, json, os, sys, builtins
await asyncio.sleep(0.1)
print(json.dumps({}), "leaky" in sys.modules, os.environ.get("LEAK"), hasattr(builtins, "LEAK"))`);
      assert.equal(probe.stdout, "{} False None False\n", probe.stderr);
      const js = await runJs("globalThis.leak = 1; setInterval(() => console.log('tick'), 1); process.exit(0);");
      assert.equal(js.exitCode, 0);
      const next = await runJs("await new Promise((r) => setTimeout(r, 50)); console.log(typeof globalThis.leak);");
      assert.equal(next.stdout, "undefined\n");
    });

    test("a forged exit or output on the worker's own port is not the run's", async () => {
      const result = await runPy(
        withRealm(`
${FORGED_MESSAGES}
print("real output")
await asyncio.sleep(0.05)
sys.exit(7)
`),
      );
      const realm = REALM[engine];
      assert.equal(result.exitCode, realm ? 7 : 0, result.stderr);
      assert.equal(result.stdout, realm ? "real output\n" : `${REALM_OUT_OF_REACH}\n`);
    });
  });
}

/** The JSON lines of the server's log (scripts/with-server.sh's RELAY_SERVER_LOG). */
function serverLog() {
  const file = process.env.RELAY_SERVER_LOG;
  if (!file) throw new Error("RELAY_SERVER_LOG is not set: run the suite through scripts/with-server.sh");
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line));
}

/** The fetch target: `/hello` answers; anything else is 404. */
async function startTarget() {
  const server = createServer((req, res) => {
    if (req.url === "/hello") return res.writeHead(200, { "content-type": "text/plain" }).end("hello from the target");
    res.writeHead(404).end();
  });
  await new Promise((resolve) => server.listen(0, resolve));
  return server;
}
