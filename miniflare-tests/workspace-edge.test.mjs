// End to end, the workspace the relay session owns (issue 26; docs/ARCHITECTURE.md "The
// workspace"): read, write and search answered with no tab; a file a run writes in one tab read
// by a run in another tab (another browser context: its own OPFS) and by `read` with both
// closed; files surviving the tab's site data cleared; a run's many files and a large one; a run
// that times out keeps what it wrote; the audit's workspace roots and relay://workspace; the
// routes' refusals.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { launchBrowser, openExecutor, waitForLine } from "./lib/browser.mjs";
import { connectClient } from "./lib/mcp-client.mjs";
import { BASE, attach, createTenant, mintRunToken, relayCapsule } from "./lib/relay.mjs";

let key;
let tenant;
let client;
let browser;

before(async () => {
  ({ key, tenant } = await createTenant("workspace-edge", { queue: { attachWaitMs: 500 } }));
  client = await connectClient(key);
  browser = await launchBrowser();
});

after(async () => {
  await client?.close();
  await browser?.close();
});

const call = (name, args) => client.callTool({ name, arguments: args });
const runJs = (code, policy) => call("run_js", policy ? { code, policy } : { code });
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

async function auditRecords() {
  const { contents } = await client.readResource({ uri: "relay://audit" });
  return JSON.parse(contents[0].text).records;
}

describe("with no tab attached", () => {
  test("read, write and search are answered by the relay session", async () => {
    const started = performance.now();
    const written = await call("write", { path: "/tmp/no-tab/a.txt", content: "no tab here\nsecond line\n" });
    assert.equal(written.isError, false, JSON.stringify(written));
    assert.deepEqual(written.structuredContent, { path: "/tmp/no-tab/a.txt", bytesWritten: 24, size: 24 });
    const read = await call("read", { path: "/tmp/no-tab/a.txt" });
    assert.equal(read.structuredContent.content, "no tab here\nsecond line\n");
    const listed = await call("read", { path: "/tmp/no-tab" });
    assert.equal(listed.structuredContent.content, "a.txt\t24");
    const found = await call("search", { pattern: "second", paths: ["/tmp/no-tab"] });
    assert.equal(found.structuredContent.totalMatches, 1, JSON.stringify(found.structuredContent));
    assert.equal(found.structuredContent.matches[0].line, 2);
    const missing = await call("read", { path: "/tmp/no-tab/none" });
    assert.equal(missing.structuredContent.error.name, "ValidationError");
    console.log(`# four file tools with no tab: ${Math.round(performance.now() - started)} ms`);
  });

  test("a run still needs a tab", async () => {
    const result = await runJs("console.log(1)");
    assert.equal(result.structuredContent.error.name, "NoExecutorAttached");
  });
});

describe("one workspace per relay session, whatever the tabs", () => {
  test("a file a run writes in tab A is read by a run in tab B, and by read with both closed", async () => {
    const a = await openExecutor(browser, key);
    const wrote = await runJs("import fs from 'fs'; fs.mkdirSync('/tmp/ab', { recursive: true }); fs.writeFileSync('/tmp/ab/from-a.txt', 'written in tab A');");
    assert.equal(wrote.structuredContent.exitCode, 0, JSON.stringify(wrote.structuredContent));
    const b = await openExecutor(browser, key); // the newest tab takes the next run
    await a.context.close();
    const read = await call("run_py", { code: "print(open('/tmp/ab/from-a.txt').read())" });
    assert.equal(read.structuredContent.stdout, "written in tab A\n", JSON.stringify(read.structuredContent));
    // Tab B's copy came from the relay session: the line says it fetched the file.
    assert.ok(b.lines.some((l) => /^Workspace: \d+ file\(s\) from the relay session/.test(l)), b.lines.join("\n"));
    await b.context.close();
    const closed = await call("read", { path: "/tmp/ab/from-a.txt" });
    assert.equal(closed.structuredContent.content, "written in tab A");
  });

  test("files survive clearing the tab's site data", async () => {
    const tab = await openExecutor(browser, key);
    await runJs("import fs from 'fs'; fs.writeFileSync('/tmp/cleared.txt', 'still here');");
    const cdp = await tab.context.newCDPSession(tab.page);
    await cdp.send("Storage.clearDataForOrigin", { origin: new URL(BASE).origin, storageTypes: "all" });
    const from = tab.lines.length;
    // The key went with the site data: open the page with it again (a new query: a new document).
    await tab.page.goto(`${BASE}/?cleared#key=${key}`);
    await waitForLine(tab.lines, /^Ready\. Waiting for execution requests/, 30_000, from);
    assert.ok(tab.lines.slice(from).includes('Workspace of relay session "default": 0 files (opfs)'), tab.lines.join("\n"));
    const read = await runJs("import fs from 'fs'; console.log(fs.readFileSync('/tmp/cleared.txt', 'utf8'));");
    assert.equal(read.structuredContent.stdout, "still here\n", JSON.stringify(read.structuredContent));
    await tab.context.close();
  });
});

describe("files from before the relay session kept the workspace", () => {
  test("a tab that holds them uploads them once on attach, and says so", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${BASE}/healthz`); // the relay's origin, before the executor page runs
    // The tab's old layout (a directory per segment), as a tab before issue 26 left it.
    await page.evaluate(async () => {
      const root = await navigator.storage.getDirectory();
      const all = await root.getDirectoryHandle("relay-workspace", { create: true });
      const dir = await all.getDirectoryHandle("legacy", { create: true });
      const tmp = await dir.getDirectoryHandle("tmp", { create: true });
      for (const [name, text] of [["old.txt", "from before"], ["big.txt", "x".repeat(10_000)]]) {
        const writable = await (await tmp.getFileHandle(name, { create: true })).createWritable();
        await writable.write(text);
        await writable.close();
      }
    });
    const lines = [];
    page.on("console", (msg) => msg.text().startsWith("relay-mcp: ") && lines.push(msg.text().slice(11)));
    await page.goto(`${BASE}/#key=${key}&session=legacy`);
    await waitForLine(lines, /^Uploaded 2 of 2 file\(s\) this tab held from before/);
    const legacy = await connectClient(key, "legacy");
    try {
      const read = await legacy.callTool({ name: "read", arguments: { path: "/tmp/old.txt" } });
      assert.equal(read.structuredContent.content, "from before");
      const big = await legacy.callTool({ name: "read", arguments: { path: "/tmp/big.txt" } });
      assert.equal(big.structuredContent.size, 10_000);
      const from = lines.length;
      await page.reload();
      await waitForLine(lines, /^Workspace: 2 file\(s\) from the relay session, 0 fetched/, 30_000, from);
      assert.ok(!lines.slice(from).some((l) => l.startsWith("Uploaded")), "once: " + lines.join("\n"));
    } finally {
      await legacy.close();
      await context.close();
    }
  });
});

describe("the cap", () => {
  test("a write past the tenant's workspace.maxBytes is refused, naming what to delete", async () => {
    const small = await createTenant("workspace-cap", { workspace: { maxBytes: 65536 } });
    const capped = await connectClient(small.key);
    try {
      const first = await capped.callTool({ name: "write", arguments: { path: "/tmp/a", content: "a".repeat(60_000) } });
      assert.equal(first.isError, false, JSON.stringify(first));
      const over = await capped.callTool({ name: "write", arguments: { path: "/tmp/b", content: "b".repeat(10_000) } });
      assert.equal(over.structuredContent.error.name, "OutputLimitExceeded");
      assert.match(over.structuredContent.error.message, /70000 bytes, over its limit .*65536 bytes.*delete files under \/tmp or \/out/);
      const gone = await capped.callTool({ name: "read", arguments: { path: "/tmp/b" } });
      assert.equal(gone.structuredContent.error.name, "ValidationError", "nothing was stored");
      // A run on a tab is held to the tenant's cap by the tab too, in the program.
      const tab = await openExecutor(browser, small.key);
      const run = await capped.callTool({
        name: "run_js",
        arguments: { code: "import fs from 'fs'; try { fs.writeFileSync('/tmp/c', new Uint8Array(10000)); } catch (e) { console.log(e.code, e.message) }" },
      });
      assert.match(run.structuredContent.stdout, /^ENOSPC writing \/tmp\/c would make the workspace \d+ bytes, over its limit of 0\.0625 MiB \(65536 bytes\)/);
      await tab.context.close();
    } finally {
      await capped.close();
    }
  });
});

describe("a run's writes", () => {
  test("100 files of 64 KiB and one of 10 MiB are all kept with their hashes", async () => {
    const tab = await openExecutor(browser, key);
    const started = performance.now();
    const result = await runJs(
      "import fs from 'fs'; fs.mkdirSync('/tmp/bulk', { recursive: true });" +
        "for (let i = 0; i < 100; i++) fs.writeFileSync(`/tmp/bulk/f${i}`, new Uint8Array(65536).fill(i));" +
        "fs.writeFileSync('/tmp/big.bin', new Uint8Array(10 * 1024 * 1024).fill(7));",
      { limits: { timeoutMs: 120000 } },
    );
    assert.equal(result.structuredContent.exitCode, 0, JSON.stringify(result.structuredContent));
    console.log(`# 100 x 64 KiB + 10 MiB written and committed: ${Math.round(performance.now() - started)} ms`);
    await tab.context.close();
    const listing = await call("read", { path: "/tmp/bulk" });
    assert.equal(listing.structuredContent.entries.length, 100);
    assert.ok(listing.structuredContent.entries.every((e) => e.size === 65536));
    const f42 = await call("read", { path: "/tmp/bulk/f42", encoding: "base64" });
    assert.equal(sha256(Buffer.from(f42.structuredContent.content, "base64")), sha256(Buffer.alloc(65536, 42)));
    const big = await call("read", { path: "/tmp/big.bin", encoding: "base64", offset: 10 * 1024 * 1024 - 3 });
    assert.equal(big.structuredContent.size, 10 * 1024 * 1024);
    assert.deepEqual([...Buffer.from(big.structuredContent.content, "base64")], [7, 7, 7]);
  });

  test("a body that cannot reach the relay session: the files before it are kept, it and those after are not", async () => {
    const tab = await openExecutor(browser, key);
    // The network drops every body upload of this tab (as a tab going away mid-upload).
    await tab.context.route("**/workspace/bodies/**", (route) => (route.request().method() === "PUT" ? route.abort() : route.continue()));
    const result = await runJs(
      // x.txt's commit is on its way while a, b and c wait: they go up as one commit, cut at b.
      "import fs from 'fs'; fs.mkdirSync('/tmp/cut', { recursive: true }); fs.writeFileSync('/tmp/cut/x.txt', 'first');" +
        "fs.writeFileSync('/tmp/cut/a.txt', 'small, before');" +
        "fs.writeFileSync('/tmp/cut/b.bin', new Uint8Array(10000).fill(1)); fs.writeFileSync('/tmp/cut/c.txt', 'small, after');",
    );
    assert.equal(result.structuredContent.exitCode, 0, JSON.stringify(result.structuredContent));
    assert.ok(tab.lines.some((l) => /file changes did not reach the relay session/.test(l)), tab.lines.join("\n"));
    await tab.context.close();
    const listed = await call("read", { path: "/tmp/cut" });
    assert.deepEqual(listed.structuredContent.entries.map((e) => e.name), ["a.txt", "x.txt"], "as it was before b.bin");
  });

  test("a run that times out keeps what it wrote before the timeout", async () => {
    const tab = await openExecutor(browser, key);
    await call("run_py", { code: "print('Pyodide loaded before the timed run')" });
    const result = await call("run_py", {
      code: "open('/tmp/before-timeout.txt', 'w').write('kept')\nwhile True: pass",
      policy: { limits: { timeoutMs: 3000 } },
    });
    assert.equal(result.structuredContent.error.name, "Timeout");
    await tab.context.close();
    assert.equal((await call("read", { path: "/tmp/before-timeout.txt" })).structuredContent.content, "kept");
  });
});

describe("the audit", () => {
  test("a run's workspace roots before and after change exactly when it writes", async () => {
    const tab = await openExecutor(browser, key);
    await runJs("console.log('reads nothing, writes nothing')");
    await runJs("import fs from 'fs'; fs.writeFileSync('/tmp/audited.txt', String(Date.now()));");
    await call("read", { path: "/tmp/audited.txt" });
    await call("write", { path: "/tmp/audited.txt", content: "by write", mode: "overwrite" });
    await tab.context.close();
    const records = (await auditRecords()).slice(-4);
    assert.deepEqual(records.map((r) => r.tool), ["run_js", "run_js", "read", "write"]);
    const roots = records.map((r) => [r.workspaceBefore, r.workspaceAfter]);
    for (const [before, after] of roots) assert.match(`${before} ${after}`, /^[0-9a-f]{64} [0-9a-f]{64}$/);
    assert.equal(roots[0][0], roots[0][1], "a run that writes nothing leaves the root");
    assert.notEqual(roots[1][0], roots[1][1], "a run that writes changes it");
    assert.equal(roots[1][1], roots[2][0], "the next call starts where it ended");
    assert.equal(roots[2][0], roots[2][1], "read changes nothing");
    assert.notEqual(roots[3][0], roots[3][1], "write changes it");
  });
});

describe("relay://workspace", () => {
  test("lists every file with its size and hash, as read gives it, under a root an operator recomputes", async () => {
    const { contents } = await client.readResource({ uri: "relay://workspace" });
    const listing = JSON.parse(contents[0].text);
    assert.ok(listing.files.length >= 100, `${listing.files.length} files`);
    for (const file of listing.files.filter((f) => f.size < 100_000)) {
      const read = await call("read", { path: file.path, encoding: "base64", maxBytes: 16_777_216 });
      const bytes = Buffer.from(read.structuredContent.content, "base64");
      assert.equal(bytes.length, file.size, file.path);
      assert.equal(sha256(bytes), file.sha256, file.path);
    }
    assert.equal(relayCapsule(["workspace-root"], contents[0].text).trim(), listing.root);
    const latest = (await auditRecords()).at(-1);
    assert.equal(latest.workspaceAfter, listing.root, "the last call's root is the workspace's");
  });
});

describe("the routes refuse what they must", () => {
  test("a body under a malformed hash, a commit of a run that is not running, and no token", async () => {
    const token = mintRunToken({ tenant: tenant.id, run: "r_ended", capsule: "c".repeat(64) });
    const auth = { authorization: `Bearer ${token}` };
    const malformed = await fetch(`${BASE}/workspace/bodies/NOT-A-HASH`, { method: "PUT", headers: auth, body: "x" });
    assert.equal(malformed.status, 400);
    const ended = await fetch(`${BASE}/workspace/bodies/${sha256("x")}`, { method: "PUT", headers: auth, body: "x" });
    assert.equal(ended.status, 409);
    assert.match((await ended.json()).error.message, /has ended/);
    const commit = await fetch(`${BASE}/workspace/commit`, { method: "POST", headers: auth, body: '{"changes":[]}' });
    assert.equal(commit.status, 409);
    const anonymous = await fetch(`${BASE}/session/default/workspace`);
    assert.equal(anonymous.status, 401);
  });

  test("a tampered body is refused and nothing is stored", async () => {
    const { attachToken } = await attach(key, "default");
    const tab = { authorization: `Bearer ${attachToken}` };
    const claimed = sha256("what the tab said it sends");
    const put = await fetch(`${BASE}/session/default/workspace/bodies/${claimed}`, { method: "PUT", headers: tab, body: "something else" });
    assert.equal(put.status, 400);
    assert.match((await put.json()).error.message, /sha256 is [0-9a-f]{64}, not [0-9a-f]{64}; nothing was stored/);
    const get = await fetch(`${BASE}/session/default/workspace/bodies/${claimed}`, { headers: tab });
    assert.equal(get.status, 404);
    const commit = { changes: [{ path: "/tmp/tampered", sha256: claimed, size: 14 }] };
    const upload = await fetch(`${BASE}/session/default/workspace/upload`, { method: "POST", headers: tab, body: JSON.stringify(commit) });
    assert.match((await upload.json()).results[0].error.message, /is not stored; upload it/);
    assert.equal((await call("read", { path: "/tmp/tampered" })).structuredContent.error.name, "ValidationError");
  });
});
