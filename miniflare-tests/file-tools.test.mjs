// End to end, the relay session's workspace: the official SDK client calls read, write and
// search, and run_js / run_py read and write the same files, on a real executor page in headless
// Chromium (OPFS). Files persist across runs and a page reload; the filesystem policy is
// enforced at the edge (the call's paths) and in the tab (the runner's writes).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { attachedExecutor } from "./lib/attached.mjs";
import { openExecutor, waitForLine } from "./lib/browser.mjs";
import { readRelaySession } from "./lib/mcp-client.mjs";
import { modernBody, modernHeaders } from "./lib/mcp-http.mjs";
import { BASE, devVars } from "./lib/relay.mjs";

let attached;
let key;
let executor;
let client;

before(async () => {
  attached = await attachedExecutor("file-tools", { queue: { attachWaitMs: 500 } });
  ({ key, executor, client } = attached);
});

after(() => attached?.close());

const call = (name, args) => client.callTool({ name, arguments: args });
const runJs = (code) => call("run_js", { code });
const runPy = (code) => call("run_py", { code });

/** Resolves once `agent`'s relay session has one tab attached (a closed one let go), or after 30 s. */
async function untilOneTab(agent) {
  for (let i = 0; i < 300 && (await readRelaySession(agent)).executor.tabs > 1; i++) await new Promise((r) => setTimeout(r, 100));
}

describe("read, write and search", () => {
  test("a file written with write is read back whole, with its size", async () => {
    const written = await call("write", { path: "/tmp/notes/hello.txt", content: "héllo\nworld\n" });
    assert.equal(written.isError, false, JSON.stringify(written));
    assert.deepEqual(written.structuredContent, { path: "/tmp/notes/hello.txt", bytesWritten: 13, size: 13 });
    const read = await call("read", { path: "/tmp/notes/hello.txt" });
    assert.equal(read.isError, false, JSON.stringify(read));
    assert.equal(read.structuredContent.content, "héllo\nworld\n");
    assert.equal(read.structuredContent.size, 13);
    assert.equal(read.structuredContent.truncated, false);
    assert.equal(read.content[0].text, "héllo\nworld\n");
  });

  test("reading a directory lists its files and subdirectories with their sizes", async () => {
    await call("write", { path: "/tmp/listed/a.txt", content: "12345", mode: "overwrite" });
    await call("write", { path: "/tmp/listed/sub/b.txt", content: "123", mode: "overwrite" });
    await call("write", { path: "/tmp/listed/sub/c.txt", content: "1", mode: "overwrite" });
    const listed = await call("read", { path: "/tmp/listed" });
    assert.equal(listed.isError, false, JSON.stringify(listed));
    assert.equal(listed.structuredContent.content, "a.txt\t5\nsub/\t4");
    assert.deepEqual(listed.structuredContent.entries, [
      { name: "a.txt", type: "file", size: 5 },
      { name: "sub/", type: "directory", size: 4 },
    ]);
  });

  test("modes: create refuses an existing file, append adds, overwrite replaces", async () => {
    await call("write", { path: "/tmp/modes.txt", content: "a" });
    const again = await call("write", { path: "/tmp/modes.txt", content: "b" });
    assert.equal(again.isError, true);
    assert.equal(again.structuredContent.error.name, "ValidationError");
    assert.match(again.structuredContent.error.message, /already exists.*overwrite.*append/);
    await call("write", { path: "/tmp/modes.txt", content: "b", mode: "append" });
    assert.equal((await call("read", { path: "/tmp/modes.txt" })).structuredContent.content, "ab");
    await call("write", { path: "/tmp/modes.txt", content: "c", mode: "overwrite" });
    assert.equal((await call("read", { path: "/tmp/modes.txt" })).structuredContent.content, "c");
  });

  test("base64 in and out, maxBytes and offset, and a binary file refused as utf-8", async () => {
    const bytes = Buffer.from([0, 1, 2, 250, 251, 252, 253, 254, 255]);
    await call("write", { path: "/out/blob.bin", content: bytes.toString("base64"), encoding: "base64", mode: "overwrite" });
    const whole = await call("read", { path: "/out/blob.bin", encoding: "base64" });
    assert.equal(whole.structuredContent.content, bytes.toString("base64"));
    const part = await call("read", { path: "/out/blob.bin", encoding: "base64", maxBytes: 3, offset: 3 });
    assert.equal(part.structuredContent.content, bytes.subarray(3, 6).toString("base64"));
    assert.equal(part.structuredContent.truncated, true);
    assert.equal(part.structuredContent.nextOffset, 6);
    const text = await call("read", { path: "/out/blob.bin" });
    assert.equal(text.isError, true);
    assert.match(text.structuredContent.error.message, /not UTF-8 text.*base64/);
  });

  test("search finds matching lines with line and column, counts past maxResults", async () => {
    const lines = Array.from({ length: 30 }, (_, i) => `line ${i} ${i % 3 === 0 ? "needle" : "hay"}`);
    await call("write", { path: "/tmp/search/a.log", content: lines.join("\n"), mode: "overwrite" });
    await call("write", { path: "/tmp/search/b.txt", content: "NEEDLE in caps\n", mode: "overwrite" });
    const found = await call("search", { pattern: "needle", paths: ["/tmp/search"], filePattern: "*.log", maxResults: 4 });
    assert.equal(found.isError, false, JSON.stringify(found));
    const { matches, totalMatches, truncated } = found.structuredContent;
    assert.equal(totalMatches, 10);
    assert.equal(truncated, true);
    assert.deepEqual(matches[0], { path: "/tmp/search/a.log", line: 1, column: 8, text: "line 0 needle" });
    assert.equal(matches.length, 4);
    const insensitive = await call("search", { pattern: "needle", paths: ["/tmp/search"], caseSensitive: false });
    assert.equal(insensitive.structuredContent.totalMatches, 11);
  });

  test("a catastrophic pattern returns at once; backreferences are refused by name", async () => {
    await call("write", { path: "/tmp/search/aaa.txt", content: `${"a".repeat(5000)}!`, mode: "overwrite" });
    const started = Date.now();
    const slow = await call("search", { pattern: "(a+)+$", paths: ["/tmp/search"] });
    assert.equal(slow.isError, false, JSON.stringify(slow));
    assert.ok(Date.now() - started < 10_000);
    const backref = await call("search", { pattern: "(a)\\1", paths: ["/tmp"] });
    assert.equal(backref.isError, true);
    assert.equal(backref.structuredContent.error.name, "ValidationError");
    assert.match(backref.structuredContent.error.message, /backreference/i);
  });

  test("the policy: a write outside the writable prefixes and path escapes are PolicyDenied", async () => {
    for (const path of ["/host/x.txt", "/tmp/../host/x.txt", "/etc/passwd", "/tmp/%2e%2e/x", "/tmp\\x"]) {
      const result = await call("write", { path, content: "x" });
      assert.equal(result.isError, true, path);
      assert.equal(result.structuredContent.error.name, "PolicyDenied", `${path}: ${JSON.stringify(result.structuredContent)}`);
    }
    const missing = await call("read", { path: "/tmp/never-written.txt" });
    assert.equal(missing.structuredContent.error.name, "ValidationError");
    assert.match(missing.structuredContent.error.message, /no file or directory \/tmp\/never-written.txt/);
  });
});

describe("the runtimes share the workspace", () => {
  test("run_py writes, run_js reads it, read and search see it, and it survives a reload", async () => {
    const py = await runPy("import pathlib\npathlib.Path('/tmp/shared').mkdir(exist_ok=True)\nopen('/tmp/shared/from-py.txt', 'w').write('written by python 42\\n')\nprint('ok')");
    assert.equal(py.structuredContent.exitCode, 0, JSON.stringify(py.structuredContent));
    const js = await runJs("import fs from 'fs';\nconsole.log(fs.readFileSync('/tmp/shared/from-py.txt', 'utf8').trim());\nfs.writeFileSync('/out/from-js.json', JSON.stringify({ n: 42 }));");
    assert.equal(js.structuredContent.stdout, "written by python 42\n", JSON.stringify(js.structuredContent));
    assert.equal((await call("read", { path: "/tmp/shared/from-py.txt" })).structuredContent.content, "written by python 42\n");
    const found = await call("search", { pattern: "python \\d+", paths: ["/tmp/shared"] });
    assert.equal(found.structuredContent.totalMatches, 1);

    const from = executor.lines.length;
    await executor.page.reload();
    await waitForLine(executor.lines, /^Ready\. Waiting for execution requests/, 30_000, from);
    const after = await runPy("import json\nprint(json.load(open('/out/from-js.json'))['n'], open('/tmp/shared/from-py.txt').read().split()[-1])");
    assert.equal(after.structuredContent.stdout, "42 42\n", JSON.stringify(after.structuredContent));
  });

  test("a runtime's write outside the writable prefixes raises PolicyDenied in the program", async () => {
    const js = await runJs("import fs from 'fs';\ntry { fs.writeFileSync('/host/x.txt', 'x') } catch (e) { console.log(e.name, e.code) }");
    assert.equal(js.structuredContent.stdout, "PolicyDenied EACCES\n", JSON.stringify(js.structuredContent));
    const py = await runPy("try:\n    open('/host/x.txt', 'w').write('x')\nexcept PermissionError as e:\n    print(str(e).split(':')[0])");
    assert.match(py.structuredContent.stdout, /PolicyDenied/, JSON.stringify(py.structuredContent));
    const read = await call("read", { path: "/host/x.txt" });
    assert.equal(read.structuredContent.error.name, "ValidationError", "nothing was persisted");
  });

  test("writes made before a timeout are kept", async () => {
    const result = await call("run_py", {
      code: "open('/tmp/before-timeout.txt', 'w').write('kept')\nwhile True: pass",
      policy: { limits: { timeoutMs: 2000 } },
    });
    assert.equal(result.structuredContent.error.name, "Timeout");
    assert.equal((await call("read", { path: "/tmp/before-timeout.txt" })).structuredContent.content, "kept");
  });
});

describe("a run's command carries its workspace (issue 28)", () => {
  // The tab's own round trip before a run (GET /session/<id>/workspace) is what the command's
  // `workspace` field saves: counted here as the page makes it.
  const syncs = [];
  const counted = (request) => {
    const url = new URL(request.url());
    if (request.method() === "GET" && /^\/session\/[^/]+\/workspace$/.test(url.pathname)) syncs.push(url.search);
  };
  before(() => executor.page.on("request", counted));
  after(() => executor.page.off("request", counted));

  const chained = (n) => `import fs from "node:fs";
const last = fs.existsSync("/tmp/chain.txt") ? fs.readFileSync("/tmp/chain.txt", "utf8") : "none";
fs.writeFileSync("/tmp/chain.txt", "${n}");
console.log(last, fs.existsSync("/tmp/agent.txt") ? fs.readFileSync("/tmp/agent.txt", "utf8") : "-");`;

  async function auditRuns(count) {
    const { contents } = await client.readResource({ uri: "relay://audit" });
    return JSON.parse(contents[0].text).records.slice(-count);
  }

  test("back to back, no sync after the first run; each run reads what the last wrote, and an agent's write between runs", async () => {
    const first = await runJs(chained(0));
    assert.equal(first.structuredContent.exitCode, 0, JSON.stringify(first));
    const afterFirst = syncs.length;
    for (let n = 1; n <= 4; n++) {
      const result = await runJs(chained(n));
      assert.equal(result.structuredContent.stdout, `${n - 1} -\n`, JSON.stringify(result));
    }
    await call("write", { path: "/tmp/agent.txt", content: "agent", mode: "overwrite" });
    const seen = await runJs(chained(5));
    assert.equal(seen.structuredContent.stdout, "4 agent\n", JSON.stringify(seen));
    console.log(`workspace syncs: ${afterFirst} for the first run, ${syncs.length - afterFirst} over the next five`);
    assert.deepEqual(syncs.slice(afterFirst), [], "the runs after the first asked for the workspace");
    // Each run's audit has the workspace it ran on: where the call before it left it.
    const records = await auditRuns(7);
    assert.deepEqual(records.map((r) => r.tool), ["run_js", "run_js", "run_js", "run_js", "run_js", "write", "run_js"]);
    for (let i = 1; i < records.length; i++) {
      assert.equal(records[i].workspaceBefore, records[i - 1].workspaceAfter, `call ${i} starts where call ${i - 1} ended`);
      assert.match(records[i].workspaceBefore, /^[0-9a-f]{64}$/);
    }
    assert.notEqual(records[0].workspaceBefore, records[0].workspaceAfter, "a run's write changes the root");
  });

  test("a second tab's writes reach the first tab's next run through its command", async () => {
    await runJs(chained(6)); // the first tab is given the workspace
    const second = await openExecutor(attached.browser, key);
    try {
      const wrote = await runJs(`import fs from "node:fs"; fs.writeFileSync("/tmp/second.txt", "from the second tab".repeat(400));`);
      assert.equal(wrote.structuredContent.exitCode, 0, JSON.stringify(wrote));
      assert.ok(second.lines.some((l) => l.startsWith("Executing capsule")), "the newest tab ran it");
    } finally {
      await second.context.close();
    }
    await untilOneTab(client);
    const from = syncs.length;
    const read = await runJs(`import fs from "node:fs"; console.log(fs.readFileSync("/tmp/second.txt", "utf8").length, fs.readFileSync("/tmp/chain.txt", "utf8"));`);
    assert.equal(read.structuredContent.stdout, "7600 6\n", JSON.stringify(read));
    assert.deepEqual(syncs.slice(from), [], "the first tab took the second's write from the command (its body fetched by hash)");
  });
});

describe("a write the relay session refused", () => {
  // A tenant of its own, whose storedBytes quota a run's write will pass: the refusal is the
  // server's (429 on the body's upload), after the tab already holds the run's bytes.
  const QUOTA = 1 << 20; // the least a tenant's storedBytes may be
  const writing = `import fs from "node:fs"; fs.writeFileSync("/tmp/s.txt", "tab " + "t".repeat(20000) + Date.now());`;
  const reading = `import fs from "node:fs"; console.log(fs.readFileSync("/tmp/s.txt", "utf8").slice(0, 6));`;

  /**
   * A tenant whose tab `first` holds /tmp/s.txt = "server" (the relay session's, its hash
   * cached by the tab's sync) and whose quota has 5,000 bytes of room: `writing` runs and is
   * refused, `reading` runs (both capsules stored while there was room).
   */
  async function nearlyFull(name) {
    const own = await attachedExecutor(name, { quotas: { storedBytes: QUOTA } }, { browser: attached.browser });
    const { key: quotaKey, tenant, executor: first, client: agent, close } = own;
    const run = async (code) => (await agent.callTool({ name: "run_js", arguments: { code } })).structuredContent;
    assert.equal((await run(writing)).exitCode, 0);
    await agent.callTool({ name: "write", arguments: { path: "/tmp/s.txt", content: "server", mode: "overwrite" } });
    assert.equal((await run(reading)).stdout, "server\n");
    const admin = { authorization: `Bearer ${devVars.ADMIN_TOKEN}` };
    const { usage } = await (await fetch(`${BASE}/admin/tenants/${tenant.id}/usage`, { headers: admin })).json();
    const half = Math.floor((QUOTA - usage.storedBytes.used - 5000) / 2);
    for (const path of ["/tmp/fill1", "/tmp/fill2"]) {
      const fill = await agent.callTool({ name: "write", arguments: { path, content: path.at(-1).repeat(half) } });
      assert.equal(fill.isError, false, JSON.stringify(fill));
    }
    const refusedRun = async () => {
      const refused = await run(writing);
      assert.match(refused.stderr, /\/tmp\/s\.txt was not kept in the workspace: QuotaExceeded/, JSON.stringify(refused));
      assert.equal((await agent.callTool({ name: "read", arguments: { path: "/tmp/s.txt" } })).structuredContent.content, "server");
    };
    return { quotaKey, first, agent, run, refusedRun, close };
  }

  test("is not what the tab's next run reads: the tab takes the relay session's bytes again", async () => {
    const { run, refusedRun, close } = await nearlyFull("refused-write");
    try {
      await refusedRun();
      // The tab had the relay session's "server" before that run, and its hash: trusting it
      // after the refusal kept the refused bytes, and this run read "tab tt".
      assert.equal((await run(reading)).stdout, "server\n", "the next run reads what the relay session holds");
    } finally {
      await close();
    }
  });

  test("made by another tab of the same browser, is not what this tab's next run reads", async () => {
    // The two tabs share the browser's storage (OPFS): the first takes in what the second
    // stored, the refused bytes too, when it next stores a file of its own.
    const { quotaKey, first, agent, run, refusedRun, close } = await nearlyFull("refused-sibling");
    try {
      const sameBrowser = { newContext: async () => first.context };
      const second = await openExecutor(sameBrowser, quotaKey);
      try {
        await refusedRun();
        assert.ok(second.lines.some((l) => l.startsWith("Executing capsule")), "the newest tab ran it");
      } finally {
        await second.page.close();
      }
      await untilOneTab(agent);
      await agent.callTool({ name: "write", arguments: { path: "/tmp/q", content: "q" } }); // stored by the first tab's sync
      assert.equal((await run(reading)).stdout, "server\n", "the first tab's run read the second tab's refused bytes");
    } finally {
      await close();
    }
  });
});

describe("a tab catching up on another tab's removals", () => {
  test("applies them before the files: a file renamed under a tight cap, and a file that became a directory", async () => {
    // A 64 KiB workspace: a file of 40 KiB renamed by another tab fits the relay session, never
    // both copies at once; the first tab got "/tmp/b" written before "/tmp/a" gone, and its
    // runs failed to sync (OutputLimitExceeded, and "/tmp/d is a file") until its storage was cleared.
    const own = await attachedExecutor("sync-order", { workspace: { maxBytes: 65536 } }, { browser: attached.browser });
    const { key: capKey, client: agent } = own;
    try {
      const run = async (code) => (await agent.callTool({ name: "run_js", arguments: { code } })).structuredContent;
      const made = await run(`import fs from "node:fs"; fs.writeFileSync("/tmp/a", "a".repeat(40000)); fs.writeFileSync("/tmp/d", "file");`);
      assert.equal(made.exitCode, 0, JSON.stringify(made));
      const second = await openExecutor(attached.browser, capKey);
      try {
        const moved = await run(`import fs from "node:fs";
const a = fs.readFileSync("/tmp/a"); fs.unlinkSync("/tmp/a"); fs.writeFileSync("/tmp/b", a);
fs.unlinkSync("/tmp/d"); fs.mkdirSync("/tmp/d"); fs.writeFileSync("/tmp/d/x", "in a directory");`);
        assert.equal(moved.exitCode, 0, JSON.stringify(moved));
        assert.ok(second.lines.some((l) => l.startsWith("Executing capsule")), "the newest tab ran it");
      } finally {
        await second.context.close();
      }
      await untilOneTab(agent);
      const seen = await run(`import fs from "node:fs"; console.log(fs.existsSync("/tmp/a"), fs.readFileSync("/tmp/b").length, fs.readFileSync("/tmp/d/x", "utf8"));`);
      assert.equal(seen.exitCode, 0, JSON.stringify(seen));
      assert.equal(seen.stdout, "false 40000 in a directory\n");
    } finally {
      await own.close();
    }
  });
});

describe("the person's own tab as MCP client", () => {
  test("the executor page calls write and read through POST /mcp on its own workspace", async () => {
    const write = modernBody("tools/call", { name: "write", arguments: { path: "/tmp/from-page.txt", content: "mine", mode: "overwrite" } });
    const read = modernBody("tools/call", { name: "read", arguments: { path: "/tmp/from-page.txt" } });
    const answers = await executor.page.evaluate(
      async (calls) => {
        const out = [];
        for (const { headers, body } of calls) {
          const res = await fetch("/mcp", { method: "POST", headers: { ...headers, accept: "*/*" }, body: JSON.stringify(body) });
          out.push(await res.json());
        }
        return out;
      },
      [write, read].map((body) => ({ headers: modernHeaders(key, body), body })),
    );
    assert.equal(answers[0].result.isError, false, JSON.stringify(answers[0]));
    assert.equal(answers[1].result.structuredContent.content, "mine");
  });
});
