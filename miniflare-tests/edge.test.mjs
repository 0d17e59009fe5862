// Runs with no tab (issue 27): the edge executor, a fresh dynamic Worker per run running the
// page's QuickJS runner, through the official SDK client and raw HTTP. Output, exit codes,
// stdin/args/env; the relay session's workspace (a run's writes seen by `read`, a `write` seen
// by a run); guarded fetch allowed (a loopback server the policy allows) and denied; mcps.call
// to a test upstream; where runs go (a tab attaching takes the next runs; one that left is
// waited for; a tenant on `tab` still gets NoExecutorAttached; Python with pip packages needs a
// tab (Python itself: edge-py.test.mjs); a spent budget is EdgeBudgetExceeded; a deps layer a
// tab built runs at the edge; a new build with no tab runs at the edge and a tab attaching later
// reuses it; a package past a build cap fails naming it, a gzip bomb and a tarball of countless
// entries stopped as they inflate, a cancelled build holding the one build slot until it
// settles); the limits the runner enforces itself, each ending with its
// error and the server answering again within the run's timeout and a generous margin (short
// timeouts: a busy guest freezes all of wrangler dev's workerd), what the runner holds outside
// QuickJS's heap bounded; and what a guest cannot reach from there (HOST's routes are tested in
// edge-run.test.mjs). Figures are printed; only those bounds are asserted.

import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { inflateRawSync } from "node:zlib";
import { after, before, describe, test } from "node:test";
import { launchBrowser, openExecutor, waitForLine } from "./lib/browser.mjs";
import { admin, EDGE_BUDGET as BUDGET, edgeTenant, healthzDuring, MARGIN_MS } from "./lib/edge.mjs";
import { startWorker } from "./lib/local-worker.mjs";
import { connectClient } from "./lib/mcp-client.mjs";
import { modernCall } from "./lib/mcp-http.mjs";
import { BASE, createTenant, devVars } from "./lib/relay.mjs";
import { startPackageSources, startSilentSource } from "./lib/package-sources.mjs";

const SECRET = "edge-upstream-secret-5f1c";

let port; // of a loopback server the policy allows
let hits; // () => how many requests its /hit had
let tenant;
let key;
let client;
let close;

before(async () => {
  ({ port, key, tenant, client, close, hits } = await edgeTenant("edge", SECRET));
});

after(async () => {
  await close?.();
});

const LODASH = { dependencies: { lodash: "^4.17.0" } };
const LODASH_CODE = `import chunk from "lodash/chunk"; import _ from "lodash"; console.log(JSON.stringify(chunk([1, 2, 3], 2)), _.VERSION)`;
const LODASH_OUT = "[[1,2],[3]] 4.17.21\n";

let tabLayer; // lodash's deps layer as a tab built it ("where runs go"): {sha256, files}

// What one `write` of a big file carries: less than /mcp's 1 MiB request body.
const HALF_MIB = "x".repeat(1 << 19);

const writeFile = (c, path, content) => c.callTool({ name: "write", arguments: { path, content, mode: "overwrite" } });

/** Writes `count` files of HALF_MIB through client `c`, `dir`/0.bin on. */
async function writeHalves(c, dir, count) {
  for (let i = 0; i < count; i++) {
    const written = await writeFile(c, `${dir}/${i}.bin`, HALF_MIB);
    assert.equal(written.isError, false, JSON.stringify(written).slice(0, 500));
  }
}

/**
 * The deps layer of the last capsule a tab's `lines` name by `pattern`: its sha256 and its
 * files (path -> bytes, inflated here: zlib's, not the page's reader).
 */
async function depsLayer(lines, pattern, key) {
  const hash = lines.map((line) => pattern.exec(line)?.[1]).filter(Boolean).pop();
  const get = (file) => fetch(`${BASE}/capsules/${hash}/${file}`, { headers: { authorization: `Bearer ${key}` } });
  const manifest = await (await get("capsule.json")).json();
  const layer = manifest.fsLayers.find((l) => l.path.includes("deps"));
  const zip = Buffer.from(await (await get(layer.path)).arrayBuffer());
  const files = {};
  // The writer's local headers carry the sizes (lib/zip-writer.js: no data descriptors).
  for (let at = 0; zip.readUInt32LE(at) === 0x04034b50; ) {
    const [method, size, nameLength, extraLength] = [zip.readUInt16LE(at + 8), zip.readUInt32LE(at + 18), zip.readUInt16LE(at + 26), zip.readUInt16LE(at + 28)];
    const name = zip.toString("utf8", at + 30, at + 30 + nameLength);
    const body = zip.subarray(at + 30 + nameLength + extraLength, at + 30 + nameLength + extraLength + size);
    files[name] = method === 8 ? inflateRawSync(body) : body;
    at += 30 + nameLength + extraLength + size;
  }
  return { sha256: layer.sha256, files };
}

const runJs = (code, extra = {}, c = client) => c.callTool({ name: "run_js", arguments: { code, ...extra } }, undefined, { timeout: 120_000 });

/** Runs `code` and returns its structuredContent, failing unless it ran at the edge. */
async function atEdge(code, extra, c = client) {
  const { structuredContent: out } = await runJs(code, extra, c);
  assert.equal(out.executor, "edge", JSON.stringify(out));
  return out;
}

describe("run_js with no tab runs at the edge", () => {
  test("output, exit codes, stdin, args and env", async () => {
    const started = Date.now();
    const out = await atEdge(
      `console.log("out", process.argv.slice(2).join(","), process.env.GREETING, process.stdin.read().trim());
       console.error("err line");
       process.exit(3);`,
      { args: ["a", "b"], env: { GREETING: "hi" }, stdin: "from stdin\n" },
    );
    console.log(`# an edge run_js answered in ${Date.now() - started} ms (wallMs ${out.usage.wallMs})`);
    assert.equal(out.stdout, "out a,b hi from stdin\n");
    assert.equal(out.stderr, "err line\n");
    assert.equal(out.exitCode, 3);
    const thrown = await atEdge(`throw new TypeError("bad thing")`);
    assert.equal(thrown.exitCode, 1);
    assert.match(thrown.stderr, /Uncaught TypeError: bad thing/);
  });

  test("the result says where it ran, in its outputSchema too, and raw HTTP gets the same", async () => {
    const { tools } = await client.listTools();
    const runJsTool = tools.find((t) => t.name === "run_js");
    assert.deepEqual(runJsTool.outputSchema.properties.executor.enum, ["tab", "edge"]);
    assert.deepEqual(runJsTool.inputSchema.properties.executor.enum, ["tab", "tab-or-edge", "edge"]);
    const { message } = await modernCall(key, "tools/call", { name: "run_js", arguments: { code: "console.log(6*7)" } });
    assert.equal(message.result.structuredContent.executor, "edge");
    assert.equal(message.result.structuredContent.stdout, "42\n");
  });

  test("fs works on the relay session's workspace: a run's writes are read back, a write is seen by a run", async () => {
    const wrote = await atEdge(`import fs from "fs";
      fs.mkdirSync("/tmp/edge", { recursive: true });
      fs.writeFileSync("/tmp/edge/small.txt", "small at the edge");
      fs.writeFileSync("/tmp/edge/big.bin", "x".repeat(20000));
      fs.writeFileSync("/tmp/edge/gone.txt", "soon gone");
      fs.unlinkSync("/tmp/edge/gone.txt");
      console.log(fs.readdirSync("/tmp/edge").join(","));`);
    assert.equal(wrote.stdout, "big.bin,small.txt\n");
    const read = await client.callTool({ name: "read", arguments: { path: "/tmp/edge/small.txt" } });
    assert.equal(read.structuredContent.content, "small at the edge");
    const big = await client.callTool({ name: "read", arguments: { path: "/tmp/edge/big.bin" } });
    assert.equal(big.structuredContent.size, 20000, "a body over 4 KiB went to R2 through the run's routes");
    const gone = await client.callTool({ name: "read", arguments: { path: "/tmp/edge/gone.txt" } });
    assert.equal(gone.isError, true);
    await client.callTool({ name: "write", arguments: { path: "/tmp/edge/from-write.txt", content: "written by the write tool" } });
    const seen = await atEdge(`import fs from "fs"; console.log(fs.readFileSync("/tmp/edge/from-write.txt", "utf8"))`);
    assert.equal(seen.stdout, "written by the write tool\n");
  });

  test("files left in /out come back with download URLs, and display() shows rich results, as from a tab", async () => {
    const { structuredContent: out, content } = await runJs(`import fs from "fs";
      fs.writeFileSync("/out/edge-report.txt", "made at the edge");
      display({ "text/html": "<b>edge</b>" }, { raw: true });
      display([{ city: "Oslo", n: 1 }]);
      display("y".repeat(200 * 1024));
      display(new Uint8Array([1, 2, 3]));`);
    assert.equal(out.executor, "edge", JSON.stringify(out));
    assert.equal(out.exitCode, 0, JSON.stringify(out));
    assert.match(out.stderr, /^display: application\/octet-stream cannot be shown/);
    const [html, table, big] = out.displays;
    assert.equal(html.mimeType, "text/html");
    assert.deepEqual(table.table.rows, [{ city: "Oslo", n: 1 }]);
    assert.match(big.path, /^\/out\/display-r_\w+-2\.txt$/);
    assert.ok(content.some((c) => c.type === "resource" && c.resource.mimeType === "text/html"), JSON.stringify(content).slice(0, 500));
    const report = out.files.find((f) => f.path === "/out/edge-report.txt");
    assert.equal(report.size, 16);
    for (const { url, size } of [report, out.files.find((f) => f.path === big.path)]) {
      const fetched = await fetch(url);
      assert.equal(fetched.status, 200, url);
      assert.equal((await fetched.arrayBuffer()).byteLength, size);
    }
  });

  test("a write the policy refuses fails in the program, and is audited as denied", async () => {
    const out = await atEdge(`import fs from "fs";
      try { fs.writeFileSync("/host/nope.txt", "x"); } catch (e) { console.log(e.code, e.message.slice(0, 40)); }`);
    assert.match(out.stdout, /^EACCES /);
    assert.equal(out.usage.denied, 1);
  });

  test("guarded fetch: an allowed host through /egress, a denied one and a redirect off the list are PolicyDenied", async () => {
    const out = await atEdge(`
      const r = await fetch("http://localhost:${port}/hello");
      console.log(r.status, await r.text());
      for (const url of ["https://example.com/", "http://localhost:${port}/to-evil"]) {
        try { await fetch(url); console.log("fetched", url); } catch (e) { console.log(e.name, e.message); }
      }`);
    const [ok, denied, redirected] = out.stdout.trim().split("\n");
    assert.equal(ok, "200 hello from the target");
    assert.match(denied, /^PolicyDenied .*example\.com.*allowedDomains/);
    assert.match(redirected, /PolicyDenied|evil\.example/);
    assert.doesNotMatch(out.stdout, /^fetched/m);
    assert.equal(out.usage.fetches, 3);
  });

  test("mcps.call reaches the tenant's upstream server; its credential stays with the Worker", async () => {
    const out = await atEdge(`console.log(JSON.stringify(await mcps.call("modern", "shout", { text: "from the edge" })))`);
    assert.match(out.stdout, /FROM THE EDGE/);
    assert.doesNotMatch(JSON.stringify(out), new RegExp(SECRET));
  });

  test("guest code reads the /mcps tree as on a tab, and cannot write under it", async () => {
    const out = await atEdge(`
      import fs from "fs";
      const index = JSON.parse(fs.readFileSync("/mcps/index.json", "utf8"));
      console.log(JSON.stringify(index.servers.modern.tools), fs.readFileSync("/mcps/modern.d.ts", "utf8").includes("shout"));
      try { fs.writeFileSync("/mcps/modern.d.ts", "x"); } catch (e) { console.log(e.name); }
    `);
    assert.deepEqual(out.stdout.trim().split("\n"), ['["shout","slow"] true', "PolicyDenied"], JSON.stringify(out));
  });

  test("the audit records where each run executed", async () => {
    const { message } = await modernCall(key, "resources/read", { uri: "relay://audit" });
    const audit = JSON.parse(message.result.contents[0].text);
    const runs = (Array.isArray(audit) ? audit : audit.records).filter((r) => r.tool === "run_js");
    assert.ok(runs.length > 0, message.result.contents[0].text.slice(0, 300));
    assert.ok(runs.every((r) => r.executor === "edge"), JSON.stringify(runs.map((r) => r.executor)));
    const metrics = await (await fetch(`${BASE}/admin/metrics?tenant=${tenant.id}`, { headers: admin })).text();
    assert.match(metrics, /relay_executor_runs_total\{tenant="[^"]+",executor="edge"\} [1-9]/);
  });

  test("each run has an isolate of its own; a run after the last one ended finds its isolate prepared (a standby), unless it needs another CPU limit", async () => {
    const isolates = [];
    // The fifth asks for a 2 s timeout: its worker's limits.cpuMs is not the standby's.
    for (const extra of [{}, {}, {}, {}, { policy: { limits: { timeoutMs: 2000 } } }]) {
      // The next standby is asked for once a run's events end: a run a second later finds it.
      if (isolates.length > 0) await new Promise((r) => setTimeout(r, 1000));
      const { out, id, how } = await isolateRun(client, { code: "console.log(1)", ...extra });
      assert.equal(out.stdout, "1\n", JSON.stringify(out));
      isolates.push({ id, how, wallMs: out.usage.wallMs });
    }
    console.log("edge runs, 1 s apart:", JSON.stringify(isolates));
    assert.equal(new Set(isolates.map((i) => i.id)).size, isolates.length, "no isolate serves two runs");
    assert.deepEqual(
      isolates.slice(1).map((i) => i.how),
      [...Array(3).fill("prepared before the run"), "started for it"],
    );
  });

  test("a standby lost before its run (its stub disposed, as when the platform ends the call that made it) costs the run nothing: it goes on a fresh runner, once", async () => {
    // A server of its own (RELAY_RESTART_PORT) whose relay sessions dispose their standby's stub
    // before offering it a run (RELAY_TEST_LOSE_STANDBY): the RPC that fails is the real one.
    const stateDir = await mkdtemp(path.join(tmpdir(), "relay-edge-lost-standby-"));
    const worker = await startWorker({ port: Number(process.env.RELAY_RESTART_PORT ?? 8796), stateDir, vars: { RELAY_TEST_LOSE_STANDBY: "1" } });
    try {
      const { key: own } = await createTenant("edge-lost-standby", { executor: "edge", edge: BUDGET }, worker.url);
      const c = await connectClient(own, "default", undefined, worker.url);
      // Each run counts itself in the workspace: a run made twice would skip a number.
      const code = `import fs from "fs";
        let n = 0; try { n = Number(fs.readFileSync("/tmp/runs.txt", "utf8")); } catch {}
        fs.writeFileSync("/tmp/runs.txt", String(n + 1)); console.log(n + 1);`;
      const runs = [];
      for (let i = 0; i < 3; i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, 1000)); // each finds a standby held
        runs.push(await isolateRun(c, { code }));
      }
      await c.close();
      console.log("edge runs with their standby lost:", JSON.stringify(runs.map(({ id, how, out }) => ({ id, how, out: out.stdout }))));
      assert.deepEqual(runs.map(({ out }) => out.stdout), ["1\n", "2\n", "3\n"]);
      assert.deepEqual(runs.map(({ how }) => how), Array(3).fill("started for it"), "each on a fresh runner");
    } finally {
      await worker.stop();
      await rm(stateDir, { recursive: true, force: true });
    }
  });
});

/** A run_js at the edge through `c`: its result, and its isolate's id and how it was readied (its execute progress). */
async function isolateRun(c, args) {
  const progress = [];
  const { structuredContent: out } = await c.callTool({ name: "run_js", arguments: args }, undefined, { timeout: 120_000, onprogress: (p) => progress.push(p.message) });
  assert.equal(out.executor, "edge", JSON.stringify(out));
  const [, id, how] = progress.map((m) => /^execute \(isolate (\w+), (.+)\)$/.exec(m)).find(Boolean) ?? [];
  assert.ok(id, JSON.stringify({ progress, out }));
  return { out, id, how };
}

describe("limits the runner enforces itself; the server answers again within the run's timeout", () => {
  const limits = (timeoutMs) => ({ policy: { limits: { timeoutMs } } });

  for (const [what, code] of [
    ["while(true){}", "while (true) {}"],
    ["a busy loop with a body", "let i = 0; while (true) { i = (i * 31 + 7) % 1000003; }"],
    ["a never-ending async loop", "while (true) await null;"],
    ["a timer that never stops", "setInterval(() => {}, 1);"],
    // QuickJS's Promise executor and async functions turn its uncatchable interrupt into a
    // rejection: before the halt these two froze all of wrangler dev's workerd for good.
    ["a loop of Promise executors that loop", "for (;;) new Promise(() => { for (;;) {} });"],
    ["a loop calling an async function that loops", "async function f() { for (;;) {} }\nfor (;;) f();"],
    ["a caught loop in a loop", "for (;;) try { for (;;) {} } catch {}"],
    ["a finally that loops", "for (;;) { try { for (;;) {} } finally { for (;;) {} } }"],
  ]) {
    test(`${what} ends with Timeout, the server back within it`, async () => {
      const { result, answers } = await healthzDuring(() => atEdge(code, limits(2000)));
      assert.equal(result.error?.name, "Timeout", JSON.stringify(result));
      assert.equal(result.exitCode, 124);
      assert.ok(answers.every((a) => a.status === 200), JSON.stringify(answers));
      const worst = Math.max(...answers.map((a) => a.ms));
      assert.ok(worst < 2000 + MARGIN_MS, JSON.stringify(answers));
      console.log(`# ${what}: stopped after ${result.usage.wallMs} ms of a 2000 ms timeout; /healthz answered ${answers.length} times, the slowest in ${worst} ms`);
    });
  }

  test("a loop of host calls that move megabytes ends with Timeout at its timeout, not seconds later", async () => {
    // Few guest steps a turn, each a host call moving 8 MB: the interrupt handler's calls alone
    // came seconds apart (stopped after 5.9 s of 2 s with 4 MB), so host calls count too.
    const code = `const s = "x".repeat(8e6); for (;;) new TextEncoder().encode(s);`;
    const { result, answers } = await healthzDuring(() => atEdge(code, limits(2000)));
    assert.equal(result.error?.name, "Timeout", JSON.stringify(result));
    assert.ok(result.usage.wallMs < 2000 + 2000, `stopped after ${result.usage.wallMs} ms of a 2000 ms timeout`);
    assert.ok(answers.every((a) => a.status === 200), JSON.stringify(answers));
    console.log(`# host calls moving megabytes: stopped after ${result.usage.wallMs} ms of a 2000 ms timeout`);
  });

  test("many small host calls are not taken for a loop: 30,000 fs calls finish within a 5 s timeout", async () => {
    const code = `import fs from "fs"; let n = 0; for (let i = 0; i < 30000; i++) if (fs.existsSync("/tmp/none")) n++; console.log("done", n);`;
    const result = await atEdge(code, limits(5000));
    assert.equal(result.exitCode, 0, JSON.stringify(result).slice(0, 500));
    assert.equal(result.stdout, "done 0\n");
    console.log(`# 30,000 fs calls: ${result.usage.wallMs} ms`);
  });

  test("a 1 GiB allocation and a growing heap end with QuickJS's out-of-memory error, the server back within the timeout", async () => {
    const { result, answers } = await healthzDuring(() => atEdge("const a = new Uint8Array(1 << 30); console.log(a.length)"));
    assert.equal(result.exitCode, 1);
    assert.match(result.stderr, /out of memory/);
    const grown = await atEdge(`const a = []; while (true) a.push("x".repeat(1000));`, limits(10_000));
    assert.match(grown.stderr, /out of memory/, JSON.stringify(grown));
    assert.ok(answers.every((a) => a.status === 200));
    const worst = Math.max(...answers.map((a) => a.ms));
    assert.ok(worst < 60_000 + MARGIN_MS, JSON.stringify(answers));
    console.log(`# memory: the heap stopped at ${grown.usage.memPeakMb} MiB; /healthz's slowest answer took ${worst} ms`);
  });

  test("an output flood ends with OutputLimitExceeded at the cap", async () => {
    const { result } = await healthzDuring(() => atEdge(`for (let i = 0; ; i++) console.log("flood", i);`, { policy: { limits: { stdoutBytes: 65536, timeoutMs: 20_000 } } }));
    assert.equal(result.error?.name, "OutputLimitExceeded", JSON.stringify(result).slice(0, 500));
    assert.ok(result.stdout.length <= 65536 + 100);
    console.log(`# output flood: stopped after ${result.usage.wallMs} ms`);
  });

  test("refused displays count against the output cap: a loop of them ends OutputLimitExceeded, not at its timeout", async () => {
    const result = await atEdge(`for (;;) display(new Uint8Array(1));`, { policy: { limits: { stdoutBytes: 1000, timeoutMs: 20_000 } } });
    assert.equal(result.error?.name, "OutputLimitExceeded", JSON.stringify(result).slice(0, 500));
    assert.ok(result.stderr.length <= 1000, `${result.stderr.length} characters of stderr`);
    assert.ok(result.usage.wallMs < 20_000, `${result.usage.wallMs} ms`);
  });

  // What the runner holds outside QuickJS's heap for a busy guest (before: workerd grew until
  // it aborted at ~1.4 GB, taking the whole server with it). Each in a relay session of its own:
  // the big files they leave would make the next runs' jobs too big to send to the edge.
  test("a loop rewriting a big file, or failing denied writes of long paths, holds one copy and 16 events: it ends at its timeout", async () => {
    const own = await connectClient(key, "edge-rewrite");
    const rewrite = await atEdge(`import fs from "fs"; const b = new Uint8Array(6 << 20); for (;;) fs.writeFileSync("/tmp/rewritten.bin", b);`, limits(3000), own);
    await own.close();
    assert.equal(rewrite.error?.name, "Timeout", JSON.stringify(rewrite));
    // Every write waited to be sent after the stop before (68 s of a 3 s timeout, here).
    assert.ok(rewrite.usage.wallMs < 3000 + MARGIN_MS, JSON.stringify(rewrite.usage));
    const denials = await atEdge(`import fs from "fs"; for (;;) try { fs.writeFileSync("/host/" + "a".repeat(1e6), ""); } catch {}`, limits(3000));
    assert.equal(denials.error?.name, "Timeout", JSON.stringify(denials).slice(0, 500));
    assert.ok(denials.usage.denied > 16, JSON.stringify(denials.usage));
    console.log(`# held: ${denials.usage.denied} denied writes of 1 MB paths in ${denials.usage.wallMs} ms, ${rewrite.usage.wallMs} ms of 6 MiB rewrites`);
  });

  test("big files written faster than they are sent, past 16 MiB held, end the run as out of memory", async () => {
    const own = await connectClient(key, "edge-many-files");
    const files = await atEdge(`import fs from "fs"; const b = new Uint8Array(6 << 20); for (let i = 0; ; i++) fs.writeFileSync("/tmp/many-" + i + ".bin", b);`, limits(10_000), own);
    await own.close();
    assert.equal(files.error?.name, "RuntimeCrashed", JSON.stringify(files));
    assert.match(files.error.message, /out of memory: .* more than 16 MiB/);
    assert.equal(files.exitCode, 137);
    console.log(`# held: many files stopped after ${files.usage.wallMs} ms`);
  });

  // Before: the runner took every fetch a busy guest started (406 in one 2 s run of the first
  // loop, 23 s to end), holding each request until the loop let go.
  test("un-awaited fetches in a loop: 16 wait at once, the next throws TooManyRequests; 1 MiB bodies end at the 16 MiB held cap", async () => {
    const url = `http://localhost:${port}/hello`;
    const big = await atEdge(`const b = new Uint8Array(1 << 20); for (;;) fetch("${url}", { method: "POST", body: b });`, limits(2000));
    assert.equal(big.error?.name, "RuntimeCrashed", JSON.stringify(big));
    assert.match(big.error.message, /out of memory: .* more than 16 MiB .* of fetches/);
    assert.ok(big.usage.fetches <= 16, JSON.stringify(big.usage));
    const small = await atEdge(`for (;;) fetch("${url}");`, limits(2000));
    assert.equal(small.error?.name, "Timeout", JSON.stringify(small));
    assert.equal(small.usage.fetches, 16);
    const settled = await atEdge(`const r = await Promise.allSettled(Array.from({ length: 20 }, () => fetch("${url}")));
      console.log(r.map((x) => x.status[0]).join(""), r.find((x) => x.reason)?.reason.name);`);
    assert.equal(settled.stdout, `${"f".repeat(16)}${"r".repeat(4)} TooManyRequests\n`);
    console.log(`# fetch floods: 1 MiB bodies stopped after ${big.usage.wallMs} ms, bodiless ones at the ${small.usage.wallMs} ms timeout`);
  });

  // The relay session drops the run's event stream on a cancel (cancel_edge): the isolate's
  // guest stops with it. A guest computing in slices holds workerd a slice at a time, so
  // /healthz answers a slice late while it runs, and at once after it stopped.
  test("a run its client cancels stops computing: /healthz is answered at once again, long before the run's timeout", async () => {
    const own = await connectClient(key, "edge-cancel");
    const probes = async (n) => {
      const ms = [];
      for (let i = 0; i < n; i++) {
        const started = Date.now();
        assert.equal((await fetch(`${BASE}/healthz`)).status, 200);
        ms.push(Date.now() - started);
        await new Promise((r) => setTimeout(r, 100));
      }
      return ms.sort((a, b) => a - b)[n >> 1];
    };
    const abort = new AbortController();
    const code = "setInterval(() => { let x = 0; for (let i = 0; i < 3e6; i++) x += i; }, 0);";
    const call = own.callTool({ name: "run_js", arguments: { code, ...limits(60_000) } }, undefined, { timeout: 120_000, signal: abort.signal });
    const running = await probes(8);
    abort.abort("enough");
    await assert.rejects(call);
    await new Promise((r) => setTimeout(r, 1000)); // the slice under way ends
    const after = await probes(8);
    await own.close();
    console.log(`# cancel: /healthz p50 ${running} ms while the guest computed, ${after} ms after the cancel (timeout 60 s)`);
    assert.ok(after * 4 < running, `p50 ${running} ms while running, ${after} ms after the cancel`);
  });

  // A cancel that comes while the relay session still makes the run's job (its capsule and
  // workspace read from R2) must stop it as surely as one that comes while it runs.
  test("a run cancelled while its job is being made never starts: its guest reaches nothing", async () => {
    const own = await connectClient(key, "edge-cancel-early");
    try {
      await writeHalves(own, "/tmp/prep", 24); // 12 MiB of workspace to read first: the cancel comes meanwhile
      const before = hits();
      const abort = new AbortController();
      // Its request waits 3 s: a run stopped as it should never makes it.
      const code = `await new Promise((r) => setTimeout(r, 3000)); await fetch("http://localhost:${port}/hit"); console.log("ran")`;
      const call = own.callTool({ name: "run_js", arguments: { code } }, undefined, { timeout: 120_000, signal: abort.signal });
      await new Promise((r) => setTimeout(r, 100)); // into the R2 reads (the server's log showed it lands there)
      abort.abort("while its job is being made");
      await assert.rejects(call);
      await new Promise((r) => setTimeout(r, 6000)); // what a guest that ran would have reached by now
      assert.equal(hits() - before, 0, "the cancelled run's guest made a request");
    } finally {
      await own.close();
    }
  });

  test("after all that the edge still runs the next call", async () => {
    assert.equal((await atEdge("console.log('still here')")).stdout, "still here\n");
  });
});

describe("nothing to reach from the edge", () => {
  test("no network, no bindings, no secrets, only its own relay session's files", async () => {
    const out = await atEdge(`
      const seen = [];
      seen.push(typeof HOST, typeof env, typeof LOADER, typeof globalThis.fetch, typeof WebAssembly, typeof require);
      seen.push(Object.keys(process.env).join("|") || "(no env)");
      for (const url of ["/admin/tenants/dev", "/session", "http://127.0.0.1:${new URL(BASE).port}/healthz", "https://relay.invalid/egress"]) {
        try { await fetch(url); seen.push("REACHED " + url); } catch (e) { seen.push(e.name); }
      }
      console.log(seen.join(" "));`);
    assert.doesNotMatch(out.stdout, /REACHED/);
    assert.match(out.stdout, /^undefined undefined undefined function undefined undefined \(no env\)/);
    for (const secret of [devVars.ADMIN_TOKEN, devVars.CAPSULE_SIGNING_KEY, key]) assert.ok(!JSON.stringify(out).includes(secret));
    // Another relay session of the tenant, and another tenant, see none of these files.
    const other = await connectClient(key, "other-session");
    const otherOut = (await runJs(`import fs from "fs"; console.log(fs.existsSync("/tmp/edge/small.txt"))`, {}, other)).structuredContent;
    assert.equal(otherOut.executor, "edge");
    assert.equal(otherOut.stdout, "false\n");
    await other.close();
    const stranger = await createTenant("edge-stranger", { executor: "edge", edge: BUDGET });
    const strangerClient = await connectClient(stranger.key);
    const theirs = (await runJs(`import fs from "fs"; console.log(fs.existsSync("/tmp/edge/small.txt"))`, {}, strangerClient)).structuredContent;
    assert.equal(theirs.stdout, "false\n");
    await strangerClient.close();
  });
});

describe("where runs go", () => {
  test("a tenant on tab (no edge budget) still gets NoExecutorAttached; Python with pip packages needs a tab", async () => {
    const onTab = await createTenant("edge-none", { queue: { attachWaitMs: 300 } });
    const c = await connectClient(onTab.key);
    const res = await runJs("console.log(1)", {}, c);
    assert.equal(res.structuredContent.error.name, "NoExecutorAttached");
    const packaged = await runJs(LODASH_CODE, { npm: LODASH }, c);
    assert.equal(packaged.structuredContent.error.name, "NoExecutorAttached", "no build at the edge either");
    const wider = await runJs("console.log(1)", { executor: "edge" }, c);
    assert.equal(wider.structuredContent.error.name, "ValidationError");
    assert.match(wider.structuredContent.error.message, /defaults\.edge/);
    await c.close();
    // Python itself runs at the edge (edge-py.test.mjs); its pip packages need a tab.
    const py = await client.callTool({ name: "run_py", arguments: { code: "import attrs", pip: { requirements: ["attrs"] } } });
    assert.equal(py.structuredContent.error.name, "NoExecutorAttached");
    assert.match(py.structuredContent.error.message, /Python with pip packages needs a browser tab.*open http/);
  });

  test("a tenant over its edge budget gets EdgeBudgetExceeded naming the budget", async () => {
    const small = await createTenant("edge-small", { executor: "edge", edge: { cpuMsPerDay: 3_600_000, runsPerMinute: 1 } });
    const c = await connectClient(small.key);
    assert.equal((await runJs("console.log(1)", {}, c)).structuredContent.exitCode, 0);
    const refused = (await runJs("console.log(2)", {}, c)).structuredContent;
    assert.equal(refused.error.name, "EdgeBudgetExceeded");
    assert.match(refused.error.message, /1 runs a minute \(defaults\.edge\.runsPerMinute\).*PATCH \/admin\/tenants/);
    await c.close();
  });

  test("a workspace too big for the edge refuses runs at no cost to the budget, and the write tool shrinks it with no tab", async () => {
    const small = await createTenant("edge-full", { executor: "edge", edge: { cpuMsPerDay: 3_600_000, runsPerMinute: 2 } });
    const c = await connectClient(small.key);
    try {
      await writeHalves(c, "/tmp/full", 34); // 17 MiB
      for (let i = 0; i < 3; i++) {
        const refused = (await runJs("console.log(1)", {}, c)).structuredContent;
        assert.equal(refused.error.name, "EdgeBudgetExceeded", JSON.stringify(refused));
        assert.match(refused.error.message, /more than a run at the edge can start with \(16 MiB.*the `write` tool \(mode "overwrite", content ""\)/);
      }
      for (let i = 0; i < 3; i++) assert.equal((await writeFile(c, `/tmp/full/${i}.bin`, "")).isError, false); // 15.5 MiB
      const ran = (await runJs("console.log('fits')", {}, c)).structuredContent;
      assert.equal(ran.stdout, "fits\n", JSON.stringify(ran));
    } finally {
      await c.close();
    }
  });

  test("a deps layer a tab built earlier runs at the edge", async () => {
    const registry = await startPackageSources();
    const browser = await launchBrowser();
    try {
      const pkg = await createTenant("edge-packages", { executor: "tab-or-edge", edge: BUDGET, packages: registry.sources });
      const c = await connectClient(pkg.key);
      const tab = await openExecutor(browser, pkg.key);
      const built = (await runJs(LODASH_CODE, { npm: LODASH }, c)).structuredContent;
      assert.equal(built.executor, "tab");
      assert.equal(built.stdout, LODASH_OUT, JSON.stringify(built));
      tabLayer = await depsLayer(tab.lines, /^Built capsule ([0-9a-f]+)/, pkg.key);
      await tab.context.close();
      const reused = (await runJs(LODASH_CODE, { npm: LODASH, executor: "edge" }, c)).structuredContent;
      assert.equal(reused.executor, "edge");
      assert.equal(reused.stdout, LODASH_OUT, JSON.stringify(reused));
      await c.close();
    } finally {
      await browser.close();
      await registry.close();
    }
  });

  test("a new build with no tab runs at the edge; a tab attaching later reuses its build; past a cap it fails naming the cap", async () => {
    const registry = await startPackageSources();
    const tarball = "/npm/lodash/-/lodash-4.17.21.tgz";
    const browser = await launchBrowser();
    let c;
    try {
      const pkg = await createTenant("edge-builds", { executor: "tab-or-edge", edge: BUDGET, packages: registry.sources, queue: { attachWaitMs: 300 } });
      c = await connectClient(pkg.key);
      let started = Date.now();
      const built = (await runJs(LODASH_CODE, { npm: LODASH }, c)).structuredContent;
      console.log(`# lodash built at the edge and run: ${Date.now() - started} ms (wallMs ${built.usage?.wallMs})`);
      assert.equal(built.executor, "edge", JSON.stringify(built));
      assert.equal(built.stdout, LODASH_OUT, JSON.stringify(built));
      assert.equal(registry.hits.get(tarball), 1, "one download of lodash");
      started = Date.now();
      const again = (await runJs(LODASH_CODE, { npm: LODASH }, c)).structuredContent;
      console.log(`# the same call again at the edge (its build reused): ${Date.now() - started} ms`);
      assert.equal(again.stdout, LODASH_OUT, JSON.stringify(again));
      const tab = await openExecutor(browser, pkg.key);
      const onTab = (await runJs(LODASH_CODE, { npm: LODASH, executor: "tab" }, c)).structuredContent;
      assert.equal(onTab.executor, "tab");
      assert.equal(onTab.stdout, LODASH_OUT, JSON.stringify(onTab));
      assert.equal(registry.hits.get(tarball), 1, "no second build: the tab reused the edge's build record");
      assert.ok(!tab.lines.some((line) => /Building the dependencies/.test(line)), tab.lines.join("\n"));
      // The same packages give the same files at the edge as on a tab; the zips differ, as
      // workerd's deflate is not Chromium's (each is deterministic where it runs).
      const edgeLayer = await depsLayer(tab.lines, /^Received capsule ([0-9a-f]+)/, pkg.key);
      console.log(`# lodash's deps layer: built at the edge ${edgeLayer.sha256}, on a tab ${tabLayer?.sha256}; ${Object.keys(edgeLayer.files).length} files`);
      assert.ok(tabLayer, "the test before this one built lodash on a tab: run the file whole");
      assert.deepEqual(edgeLayer.files, tabLayer.files, "the same files at the edge as on a tab");
      await tab.context.close();

      const tooMany = (await runJs("import n from 'many-files'; console.log(n)", { npm: { dependencies: { "many-files": "1.0.0" } }, executor: "edge" }, c)).structuredContent;
      assert.equal(tooMany.error?.name, "DepsResolutionFailed", JSON.stringify(tooMany));
      assert.match(tooMany.error.message, /2001 files, past the edge's cap of 2000 files \(edge build cap treeFiles\).*a browser tab can build it/);
    } finally {
      await c?.close();
      await browser.close();
      await registry.close();
    }
  });

  test("a build at the edge stops a gzip bomb and a tarball of countless entries as they inflate, naming the cap and the package; the server answers on", async () => {
    const registry = await startPackageSources();
    const c = await connectClient((await createTenant("edge-bombs", { executor: "edge", edge: BUDGET, packages: registry.sources })).key);
    try {
      for (const [name, cap] of [
        // Stopped at its first 8 MiB file's header (package.json's bytes before it), not 1 GiB later.
        ["bomb", /stopped at bomb@1\.0\.0: its unpacked packages reached 83886\d\d bytes, past the edge's cap of 8388608 bytes \(edge build cap treeBytes\)/],
        ["many-tiny", /stopped at many-tiny@1\.0\.0: its unpacked packages reached 2001 files, past the edge's cap of 2000 files \(edge build cap treeFiles\)/],
      ]) {
        const started = Date.now();
        const stopped = (await runJs(`import m from '${name}'; console.log(m)`, { npm: { dependencies: { [name]: "1.0.0" } } }, c)).structuredContent;
        console.log(`# ${name} stopped at the edge after ${Date.now() - started} ms`);
        assert.equal(stopped.error?.name, "DepsResolutionFailed", JSON.stringify(stopped));
        assert.match(stopped.error.message, cap);
        assert.equal((await fetch(`${BASE}/healthz`)).status, 200, `the server answers after ${name}`);
      }
    } finally {
      await c.close();
      await registry.close();
    }
  });

  // A cancelled build's isolate works on until its caps end it (15 s of wall here: the source
  // never answers): the relay session's one build at the edge stays taken until then.
  test("a build at the edge cancelled by its client holds the relay session's one build until it settles, then frees it", { timeout: 120_000 }, async () => {
    const silent = await startSilentSource();
    const c = await connectClient((await createTenant("edge-build-cancel", { executor: "edge", edge: BUDGET, packages: silent.sources })).key);
    const build = (name, options) => c.callTool({ name: "run_js", arguments: { code: `import m from '${name}'; console.log(m)`, npm: { dependencies: { [name]: "1.0.0" } } } }, undefined, { timeout: 60_000, ...options });
    try {
      const abort = new AbortController();
      const started = Date.now();
      const cancelled = build("silent", { signal: abort.signal });
      await new Promise((r) => setTimeout(r, 2_000)); // its build is waiting on the source
      abort.abort("enough");
      await assert.rejects(cancelled);
      const busy = (await build("stall")).structuredContent;
      assert.equal(busy.error?.name, "DepsResolutionFailed", JSON.stringify(busy));
      assert.match(busy.error.message, /another dependency build of this relay session is running at the edge \(one at a time\); call again when it has ended \(its build stops within 15 s, then uploads the layer it built, if any\)/);
      await new Promise((r) => setTimeout(r, Math.max(0, started + 17_000 - Date.now()))); // its wall cap passed
      const after = (await build("stall")).structuredContent;
      console.log(`# after the cancelled build settled, the next build ran and ended: ${after.error?.message}`);
      assert.equal(after.error?.name, "DepsResolutionFailed", JSON.stringify(after));
      assert.doesNotMatch(after.error.message, /one at a time/, "the slot was freed once the cancelled build settled");
    } finally {
      await c.close();
      await silent.close();
    }
  });

  test("the page lists the relay session's edge runs, marked edge: those before it attached, then each as it ends", async () => {
    const own = await createTenant("edge-page", { executor: "tab-or-edge", edge: BUDGET, queue: { attachWaitMs: 300 } });
    const c = await connectClient(own.key);
    assert.equal((await runJs("console.log('before the tab')", {}, c)).structuredContent.executor, "edge");
    const browser = await launchBrowser();
    try {
      const executor = await openExecutor(browser, own.key);
      const { page } = executor;
      const listed = (count) => page.waitForFunction((n) => document.querySelectorAll('#runs li[data-executor="edge"]').length === n, count);
      await listed(1);
      const failed = (await runJs("console.error('at the edge'); process.exit(2)", { executor: "edge" }, c)).structuredContent;
      assert.equal(failed.executor, "edge");
      assert.equal((await runJs("console.log('on the tab')", {}, c)).structuredContent.executor, "tab");
      await listed(2);
      const items = await page.$$eval("#runs li", (lis) => lis.map((li) => ({ where: li.dataset.executor, status: li.dataset.status, text: li.textContent })));
      assert.deepEqual(items.map((i) => i.where), ["tab", "edge", "edge"], JSON.stringify(items));
      assert.match(items[1].text, /^run_jsJavaScriptedgefailed · exit 2 .*at the edge/, items[1].text);
      assert.match(items[2].text, /^run_jsJavaScriptedgeok · exit 0 .*before the tab/, items[2].text);
      // 20 runs of the tab's own push the edge runs off its list; a reload attaches again and
      // is told them again, older than every run listed: they stay off.
      for (let i = 0; i < 20; i++) assert.equal((await runJs(`console.log(${i})`, {}, c)).structuredContent.executor, "tab");
      const { lines } = executor;
      const from = lines.length;
      await page.reload();
      await waitForLine(lines, /^Ready\. Waiting for execution requests/, 30_000, from);
      assert.equal((await runJs("console.log('after the reload')", {}, c)).structuredContent.executor, "tab");
      await page.waitForFunction(() => document.querySelector("#runs li")?.textContent.includes("after the reload"));
      const after = await page.$$eval("#runs li", (lis) => lis.map((li) => li.dataset.executor));
      assert.deepEqual(after, Array(20).fill("tab"), "the edge runs told again came back into a full list of newer runs");
    } finally {
      await browser.close();
      await c.close();
    }
  });

  test("a tab attaching takes the next runs; once it leaves, runs wait the attach wait for it, then go to the edge", async () => {
    const browser = await launchBrowser();
    try {
      const executor = await openExecutor(browser, key);
      const onTab = (await runJs("console.log('where')")).structuredContent;
      assert.equal(onTab.executor, "tab");
      const narrowed = (await runJs("console.log('edge only')", { executor: "edge" })).structuredContent;
      assert.equal(narrowed.executor, "edge", "a call may narrow tab-or-edge to edge");
      await executor.context.close();
      const started = Date.now();
      const after = (await runJs("console.log('back at the edge')")).structuredContent;
      assert.equal(after.executor, "edge", JSON.stringify(after));
      console.log(`# with the tab just gone the run went to the edge after ${Date.now() - started} ms (attach wait 1000 ms)`);
    } finally {
      await browser.close();
    }
  });
});
