// End to end: the official SDK client calls run_js / run_py on the Worker, the Session DO sends
// the signed capsule to a real executor page in headless Chromium, QuickJS or Pyodide runs it in
// a Web Worker, and the output streams back to the client. One browser serves every test.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { ErrorCode, LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { attachedExecutor } from "./lib/attached.mjs";
import { openExecutor, waitForLine } from "./lib/browser.mjs";
import { connectClient, readRelaySession } from "./lib/mcp-client.mjs";
import { createTenant } from "./lib/relay.mjs";

let attached;
let browser;
let key;
let executor;
let client;

before(async () => {
  attached = await attachedExecutor("executor", { queue: { attachWaitMs: 500 } });
  ({ key, browser, executor, client } = attached);
});

after(() => attached?.close());

const runJs = (code, extra = {}, c = client) => c.callTool({ name: "run_js", arguments: { code, ...extra } });
const runPy = (code, extra = {}, c = client) => c.callTool({ name: "run_py", arguments: { code, ...extra } });

describe("run_js", () => {
  test("stdout, stderr and a non-zero exit code", async () => {
    const result = await runJs("console.log('out', 1 + 1); console.error('err'); process.exit(3)");
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent.exitCode, 3);
    assert.equal(result.structuredContent.stdout, "out 2\n");
    assert.equal(result.structuredContent.stderr, "err\n");
    assert.ok(result.structuredContent.usage.wallMs >= 0);
    assert.match(result.content[0].text, /out 2/);
  });

  test("a clean exit is not an error", async () => {
    const result = await runJs("console.log(JSON.stringify({a: [1, 2]}))");
    assert.equal(result.isError, false);
    assert.equal(result.structuredContent.exitCode, 0);
    assert.equal(result.structuredContent.stdout, '{"a":[1,2]}\n');
  });

  test("stdin, args and env reach the program", async () => {
    const code = "console.log(process.stdin.read().toUpperCase(), process.argv.slice(2).join(','), process.env.GREETING)";
    // Keys whose UTF-16 order differs from their code point order: the page must sort as the
    // Worker signs (docs/CAPSULE.md), or it would refuse a genuine capsule.
    const env = { GREETING: "hi", "\uFF21": "fullwidth", "\u{1F600}": "astral" };
    const result = await runJs(code, { stdin: "piped", args: ["x", "y"], env });
    assert.equal(result.structuredContent.stdout, "PIPED x,y hi\n");
  });

  test("output streams to the client as notifications before the result", async () => {
    const seen = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => seen.push(n.params));
    const progress = [];
    const result = await client.callTool(
      { name: "run_js", arguments: { code: "console.log('first'); console.error('second')" } },
      undefined,
      { onprogress: (p) => progress.push(p) },
    );
    assert.equal(result.structuredContent.exitCode, 0);
    assert.deepEqual(
      seen.map((p) => [p.logger, p.data]),
      [["stdout", "first\n"], ["stderr", "second\n"]],
    );
    assert.ok(progress.length >= 2, `progress notifications: ${JSON.stringify(progress)}`);
    assert.ok(progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress), "progress only grows");
  });

  test("new code runs without a request for its capsule: its files come inline with the announcement", async () => {
    const fetches = [];
    const onRequest = (request) => request.url().includes("/capsules/") && fetches.push(request.url());
    executor.page.on("request", onRequest);
    try {
      const result = await runJs(`console.log("new code", ${Date.now()})`);
      assert.match(result.structuredContent.stdout, /^new code \d+\n$/);
    } finally {
      executor.page.off("request", onRequest);
    }
    assert.deepEqual(fetches, []);
  });

  test("a run's results go on the tab's results socket, not in a request each", async () => {
    const posts = [];
    const onRequest = (request) => request.url().endsWith("/result") && posts.push(request.url());
    executor.page.on("request", onRequest);
    try {
      const result = await runJs("console.log('on the socket')");
      assert.equal(result.structuredContent.stdout, "on the socket\n");
    } finally {
      executor.page.off("request", onRequest);
    }
    assert.deepEqual(posts, []);
  });

  test("a run's command comes on the stream and on the socket, and runs once", async () => {
    const seen = executor.lines.length;
    const append = () => client.callTool({ name: "write", arguments: { path: "/tmp/once.txt", content: "x", mode: "append" } });
    for (let i = 0; i < 3; i++) assert.equal((await append()).isError, false);
    const read = await client.callTool({ name: "read", arguments: { path: "/tmp/once.txt" } });
    assert.equal(read.structuredContent.content, "xxx");
    const complaints = executor.lines.slice(seen).filter((line) => /refused|lost/.test(line));
    assert.deepEqual(complaints, []);
  });

  test("once the page is idle after a run, its sandbox holds its standbys again: two QuickJS workers and one Pyodide", async () => {
    // The sandbox frame's workers (blob: URLs of its opaque origin), by runtime: one URL each.
    const perRuntime = () => {
      const counts = {};
      for (const worker of executor.page.workers()) {
        if (worker.url().startsWith("blob:null/")) counts[worker.url()] = (counts[worker.url()] ?? 0) + 1;
      }
      return Object.values(counts).sort();
    };
    for (let i = 0; i < 3; i++) assert.equal((await runJs(`console.log(${i})`)).structuredContent.stdout, `${i}\n`);
    const deadline = Date.now() + 10_000;
    while (perRuntime().join() !== "1,2" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(perRuntime(), [1, 2], "the runs' workers were not replaced once the page was idle");
  });
});

describe("results by POST", () => {
  /** A tab in its own relay session whose results socket is routed by `onSocket` (Playwright's WebSocketRoute). */
  async function tabWithSocket(session, onSocket) {
    const tab = await openExecutor(browser, key, session, undefined, {
      beforeOpen: (context) => context.routeWebSocket(/\/results\?/, onSocket),
    });
    const c = await connectClient(key, session);
    return { tab, c, close: async () => (await c.close(), await tab.context.close()) };
  }

  /** Runs until one of them went over the results socket: the page opens it after attaching,
   *  and a run sent before it is open goes by POST alone (under load, the whole run could). */
  async function untilSocketCarries(c, carried) {
    for (let i = 0; i < 20 && !carried(); i++) {
      assert.equal((await runJs("console.log('warm')", {}, c)).structuredContent.stdout, "warm\n");
    }
    assert.ok(carried(), "the results socket carried a run");
  }

  test("when the results socket closes mid-run, the rest goes by POST and nothing is lost", async () => {
    // Once the socket carries runs, the next run's acknowledgement is delivered, then the socket is cut.
    let [carried, armed, cut] = [0, false, false];
    const { tab, c, close } = await tabWithSocket("socket-cut", (ws) => {
      const server = ws.connectToServer();
      ws.onMessage((message) => {
        server.send(message);
        carried++;
        if (armed && !cut && String(message).includes('"received"')) {
          cut = true;
          ws.close();
          server.close();
        }
      });
    });
    const posted = [];
    tab.page.on("request", (request) => request.url().endsWith("/result") && posted.push(request.postData()));
    try {
      await untilSocketCarries(c, () => carried > 0);
      armed = true;
      const code = "console.log('before'); const t = Date.now(); while (Date.now() - t < 300); console.log('after')";
      const result = await runJs(code, {}, c);
      assert.ok(cut, "the socket carried the acknowledgement");
      assert.equal(result.structuredContent.stdout, "before\nafter\n");
      // Playwright reports the page's requests on its own channel: the exit's may come after the answer.
      for (let i = 0; i < 40 && !posted.some((body) => body.includes('"exit"')); i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(posted.some((body) => body.includes('"exit"')), `POSTs: ${posted.length}`);
      const again = await runJs("console.log('still served')", {}, c);
      assert.equal(again.structuredContent.stdout, "still served\n");
    } finally {
      await close();
    }
  });

  test("a results socket that stops answering is given up after 5 s: its batches go by POST", async () => {
    // The socket stays open, but once it carries runs, nothing after the next run's acknowledgement arrives.
    let [carried, armed, swallowing] = [0, false, false];
    const { tab, c, close } = await tabWithSocket("socket-silent", (ws) => {
      const server = ws.connectToServer();
      ws.onMessage((message) => {
        if (swallowing) return;
        server.send(message);
        carried++;
        // The run's acknowledgement goes through; all after it is swallowed.
        if (armed && String(message).includes('"received"')) swallowing = true;
      });
    });
    try {
      await untilSocketCarries(c, () => carried > 0);
      armed = true;
      const started = performance.now();
      // Longer than a batch waits, so the acknowledgement goes first, alone, and the rest after it.
      const code = "const t = Date.now(); while (Date.now() - t < 100); console.log('through in the end')";
      const result = await runJs(code, {}, c);
      assert.equal(result.structuredContent.stdout, "through in the end\n");
      assert.ok(swallowing, "the socket carried the first batch");
      assert.ok(performance.now() - started >= 4500, "the batch waited for the socket's answer first");
    } finally {
      await close();
    }
  });

  test("a run's exit does not wait for its acknowledgement to be answered", async () => {
    // With no results socket (refused here), batches go by POST. The acknowledgement goes
    // alone (the run takes longer than a batch waits), and reaches the server 1.5 s late, after
    // the exit's batch: that batch carries the acknowledgement again, so the server has
    // everything in order at once and skips the late copy.
    const { tab, c, close } = await tabWithSocket("posts-only", (ws) => ws.close());
    const batches = [];
    const delayAck = async (route) => {
      const body = route.request().postData() ?? "";
      batches.push(body);
      if (!body.includes('"exit"')) await new Promise((resolve) => setTimeout(resolve, 1500));
      await route.continue();
    };
    await tab.page.route("**/result", delayAck);
    try {
      const started = performance.now();
      const result = await runJs("const t = Date.now(); while (Date.now() - t < 100); console.log('done')", {}, c);
      const elapsed = performance.now() - started;
      assert.equal(result.structuredContent.stdout, "done\n");
      assert.ok(elapsed < 1500, `the answer took ${elapsed} ms: the exit waited for the acknowledgement`);
      await new Promise((resolve) => setTimeout(resolve, 1600)); // the late copy arrives
      const phases = batches.map((batch) => batch.trim().split("\n").map((line) => JSON.parse(line).phase ?? JSON.parse(line).type));
      assert.equal(phases[0][0], "received");
      assert.ok(!phases[0].includes("exit"), `batches: ${JSON.stringify(phases)}`);
      assert.deepEqual(phases.at(-1).slice(0, 1), ["received"], `batches: ${JSON.stringify(phases)}`);
      assert.ok(phases.at(-1).includes("exit"));
      const complaints = tab.lines.filter((line) => /refused|lost/.test(line));
      assert.deepEqual(complaints, [], "the late copy was skipped as a duplicate, not refused");
      // The page says so: its results go by POST.
      const browserLine = await tab.page.evaluate(() => {
        const line = document.getElementById("browser");
        return line && { degraded: line.dataset.degraded, text: line.textContent };
      });
      assert.equal(browserLine?.degraded, "results", JSON.stringify(browserLine));
      assert.match(browserLine.text, /results by POST: the results socket did not open/);
    } finally {
      await close();
    }
  });
});

describe("run_py", () => {
  test("a tab warming up says so: relay://session shows Pyodide loading, and a run sent meanwhile is told why it waits", async () => {
    const c = await connectClient(key, "warming");
    const tab = await openExecutor(browser, key, "warming"); // a fresh context: Pyodide loads cold
    const executorView = async () => (await readRelaySession(c)).executor;
    try {
      let seen = await executorView();
      for (let i = 0; i < 400 && !seen.runtimes; i++) seen = await executorView();
      const pyodide = Object.keys(seen.runtimes ?? {}).find((id) => id.startsWith("pyodide@"));
      assert.equal(seen.runtimes?.[pyodide], "loading", `relay://session executor: ${JSON.stringify(seen)}`);
      assert.equal(seen.warmingUp, true);
      const progress = [];
      const result = await c.callTool({ name: "run_py", arguments: { code: "print(1)" } }, undefined, {
        onprogress: (p) => progress.push(p.message),
      });
      assert.equal(result.structuredContent.stdout, "1\n");
      assert.ok(progress.some((m) => m?.startsWith(`warming-up (the executor tab is still loading ${pyodide}`)), JSON.stringify(progress));
      await waitForLine(tab.lines, /^Runtimes ready/);
      for (let i = 0; i < 100 && (seen = await executorView()).warmingUp; i++);
      assert.equal(seen.warmingUp, false);
      assert.deepEqual(new Set(Object.values(seen.runtimes)), new Set(["ready"]));
    } finally {
      await c.close();
      await tab.context.close();
    }
  });

  test("Pyodide is loaded when the tab attaches, so not even the first run_py waits for it", async () => {
    const { lines } = attached.executor;
    await waitForLine(lines, /^Runtimes ready: quickjs@[\d.]+, pyodide@\d+/, 60_000);
    const from = lines.length;
    const result = await attached.client.callTool({ name: "run_py", arguments: { code: "print('warm')" } });
    assert.equal(result.structuredContent.stdout, "warm\n");
    assert.ok(!lines.slice(from).some((l) => /^Loading .* runtime/.test(l)), lines.slice(from).join("\n"));
  });

  test("stdout, stderr and SystemExit", async () => {
    const result = await runPy("import sys\nprint('py out')\nprint('py err', file=sys.stderr)\nsys.exit(2)");
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent.exitCode, 2);
    assert.equal(result.structuredContent.stdout, "py out\n");
    assert.equal(result.structuredContent.stderr, "py err\n");
  });

  test("an exception gives a traceback and exit code 1", async () => {
    const result = await runPy("def f():\n    raise ValueError('boom')\nf()");
    assert.equal(result.structuredContent.exitCode, 1);
    assert.match(result.structuredContent.stderr, /Traceback[\s\S]*ValueError: boom/);
  });

  test("stdin and argv", async () => {
    const code = "import sys\nprint(sys.stdin.read().strip()[::-1], sys.argv[1:])";
    const result = await runPy(code, { stdin: "abc\n", args: ["--flag"] });
    assert.equal(result.structuredContent.stdout, "cba ['--flag']\n");
  });
});

describe("limits", () => {
  test("a run past its timeout is killed as Timeout, and the next run works", async () => {
    const result = await runJs("for (;;) {}", { policy: { limits: { timeoutMs: 1000 } } });
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent.error.name, "Timeout");
    const next = await runJs("console.log('alive')");
    assert.equal(next.structuredContent.stdout, "alive\n");
  });

  test("a run longer than the client's request timeout completes when progress resets it (resetTimeoutOnProgress)", async () => {
    // The SDK's default request timeout (60 s) is the default run limit: a long run would fail
    // in the client first. While a run works, the relay session forwards a progress beat when
    // nothing was forwarded for 2 s (PROGRESS_EVERY_MS in src/run/machine.rs); each reaches a
    // client that sent a progress token as a progress notification, which resets the timeout
    // of a client that asks for it. Here: a 5 s timeout and a 12 s run.
    const code = "await new Promise((resolve) => setTimeout(resolve, 12000)); console.log('slow done')";
    const call = (options) => client.callTool({ name: "run_js", arguments: { code } }, undefined, { timeout: 5000, ...options });
    const started = Date.now();
    await assert.rejects(call({ onprogress: () => {} }), (err) => err.code === ErrorCode.RequestTimeout, "without the reset it times out");
    const gaps = [];
    let last = Date.now();
    const onprogress = () => {
      gaps.push(Date.now() - last);
      last = Date.now();
    };
    const result = await call({ resetTimeoutOnProgress: true, onprogress });
    assert.equal(result.structuredContent.stdout, "slow done\n", JSON.stringify(result.structuredContent));
    console.log(`resetTimeoutOnProgress: ${gaps.length} progress notifications, longest gap ${Math.max(...gaps)} ms, ${Date.now() - started} ms in all`);
  });

  test("output over the cap gives OutputLimitExceeded", async () => {
    const result = await runJs("for (let i = 0; i < 100; i++) console.log('x'.repeat(99))", {
      policy: { limits: { stdoutBytes: 1000 } },
    });
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent.error.name, "OutputLimitExceeded");
    assert.ok(result.structuredContent.stdout.length <= 1000);
    assert.match(result.structuredContent.error.message, /1000/);
  });

  test("a megabyte of control characters in one write reaches the client whole, in events under 1 MiB", async () => {
    // Each character escapes to 6 bytes of JSON: the page must cut it into several backchannel
    // events (one batch of it would pass the result route's 4 MiB cap), and the server into
    // several notifications and a truncated result.
    const size = 1024 * 1024 - 16;
    const seen = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => seen.push(n.params.data));
    const result = await runJs(`process.stdout.write("\\u0001".repeat(${size}))`);
    assert.equal(result.structuredContent.exitCode, 0, JSON.stringify(result.structuredContent.error));
    assert.equal(seen.join("").length, size, "the streamed output joins back to the whole");
    assert.ok(seen.length > 1);
    assert.equal(result.structuredContent.truncated.stdout, size);
    assert.ok(JSON.stringify(result).length < 1_000_000);
  });
});

describe("capsule integrity", () => {
  // The network between Worker and tab is where tampering would happen: rewrite responses there.
  async function withTampering(pattern, rewrite, fn) {
    await executor.page.route(pattern, async (route) => {
      const response = await route.fetch();
      await route.fulfill({ response, body: rewrite(await response.body()) });
    });
    try {
      return await fn();
    } finally {
      await executor.page.unroute(pattern);
    }
  }

  // Capsule files too big to travel inline in the announcement, so the page fetches them: a
  // manifest with a large stdin; code made large with a random comment, so its zip is too.
  // (runner.test.mjs checks inline files against the same tampering.)
  const bigStdin = () => ({ stdin: randomBytes(72 * 1024).toString("base64") });
  const bigCode = (code) => `${code}\n// ${randomBytes(96 * 1024).toString("base64")}`;

  test("a manifest whose signed content was changed is refused by the page", async () => {
    const result = await withTampering(
      "**/capsules/*/capsule.json*",
      (body) => Buffer.from(body.toString().replace('"timeoutMs":60000', '"timeoutMs":60001')),
      () => runJs("console.log('tampered manifest')", bigStdin()),
    );
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent.error.name, "ValidationError");
    assert.match(result.structuredContent.error.message, /refused/);
    assert.equal(result.structuredContent.stdout, "");
    await waitForLine(executor.lines, /^ERROR - .*refused/);
  });

  test("a layer whose bytes differ from its sha256 is refused by the page", async () => {
    const result = await withTampering(
      "**/capsules/*/fs.code.zip*",
      (body) => Buffer.concat([body, Buffer.from([0])]),
      () => runJs(bigCode("console.log('tampered layer ' + 1)")),
    );
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent.error.name, "ValidationError");
    assert.match(result.structuredContent.error.message, /refused: layer code (is \d+ bytes|sha256)/);
  });
});

describe("the queue and the executor's presence", () => {
  test("two clients calling at once are served one after the other", async () => {
    const other = await connectClient(key, "default", "second-client");
    try {
      const code = "const t0 = Date.now(); while (Date.now() - t0 < 300) {} console.log(t0, Date.now())";
      const [a, b] = await Promise.all([runJs(code), runJs(code, {}, other)]);
      const spans = [a, b].map((r) => r.structuredContent.stdout.trim().split(" ").map(Number));
      spans.sort((x, y) => x[0] - y[0]);
      assert.ok(spans[1][0] >= spans[0][1], `runs overlapped: ${JSON.stringify(spans)}`);
    } finally {
      await other.close();
    }
  });

  test("a full queue answers 429 and the queued runs still complete", async () => {
    const { key: own } = await createTenant("full-queue", { queue: { maxQueued: 1 } });
    const tab = await openExecutor(browser, own);
    const [a, b, c] = await Promise.all([1, 2, 3].map(() => connectClient(own)));
    try {
      const busy = "const t0 = Date.now(); while (Date.now() - t0 < 1500) {} console.log('done')";
      const running = runJs(busy, {}, a);
      await waitForLine(tab.lines, /^Executing capsule/);
      const waiting = runJs("console.log('second')", {}, b);
      await new Promise((r) => setTimeout(r, 300));
      // The SDK reports the HTTP 429 by its body: a JSON-RPC error saying the queue is full.
      await assert.rejects(runJs("console.log('third')", {}, c), /-32050.*queue full: 1 run\(s\) already waiting/);
      assert.equal((await running).structuredContent.stdout, "done\n");
      assert.equal((await waiting).structuredContent.stdout, "second\n");
    } finally {
      await Promise.all([a, b, c].map((client) => client.close()));
      await tab.context.close();
    }
  });

  test("with no tab attached the call fails with NoExecutorAttached and the page URL", async () => {
    const lonely = await connectClient(key, "no-tab-here");
    try {
      const started = Date.now();
      const result = await runJs("console.log(1)", {}, lonely);
      assert.equal(result.isError, true);
      assert.equal(result.structuredContent.error.name, "NoExecutorAttached");
      assert.match(result.structuredContent.error.message, /#session=no-tab-here/);
      assert.ok(Date.now() - started < 10_000);
    } finally {
      await lonely.close();
    }
  });

  test("a run cancelled while the tab fetches its capsule sends an exit the relay takes", async () => {
    // Code too big to come inline, so the tab fetches the capsule; held here until the client
    // has cancelled. The cancelled outcome's exit must carry only the fields the relay knows
    // (lib/exit-event.js): one it does not know would make it refuse the batch and the results
    // in it.
    const code = `// ${randomBytes(96 * 1024).toString("base64")}\nconsole.log("never")`;
    let fetching;
    const fetched = new Promise((resolve) => (fetching = resolve));
    await executor.page.route("**/capsules/**", async (route) => {
      fetching();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await route.continue().catch(() => {}); // the tab has given up on it by now
    });
    const from = executor.lines.length;
    try {
      const abort = new AbortController();
      const call = client.callTool({ name: "run_js", arguments: { code } }, undefined, { signal: abort.signal });
      await fetched;
      abort.abort();
      await assert.rejects(call);
      await waitForLine(executor.lines, /^Execution completed \(exitCode: 130/, 10_000, from);
    } finally {
      await executor.page.unroute("**/capsules/**");
    }
    const next = await runJs("console.log('next')");
    assert.equal(next.structuredContent.stdout, "next\n");
    const lost = executor.lines.slice(from).filter((line) => /results lost|result batch/.test(line));
    assert.deepEqual(lost, []);
  });

  test("a tab closed mid-run gives the client an error, not a hang", async () => {
    const tab = await openExecutor(browser, key, "closing");
    const c = await connectClient(key, "closing");
    try {
      const pending = runJs("for (;;) {}", {}, c);
      await waitForLine(tab.lines, /^Executing capsule/);
      await tab.context.close();
      const result = await pending;
      assert.equal(result.isError, true);
      assert.match(result.structuredContent.error.message, /tab went away/);
    } finally {
      await c.close();
    }
  });
});

describe("file changes the tab cannot store", () => {
  test("a run whose writes the tab's storage refuses is an error that says how many and that the workspace may lack them", async () => {
    // A real failure: the browser's storage quota for the relay's origin, lowered over CDP once
    // the runtimes are cached, so the workspace's OPFS write fails with QuotaExceededError.
    // The guest's write succeeded where it made it (the runner does not wait for the page).
    const tab = await openExecutor(browser, key, "quota");
    const c = await connectClient(key, "quota");
    const cdp = await tab.context.newCDPSession(tab.page);
    const origin = new URL(tab.page.url()).origin;
    try {
      await tab.page.waitForFunction(() => document.getElementById("runtimes").dataset.ready === "true", null, { timeout: 120_000 });
      const before = await runJs(`import fs from "fs"; fs.writeFileSync("/tmp/before", "kept")`, {}, c);
      assert.equal(before.isError, false, JSON.stringify(before.structuredContent));
      const { usage } = await tab.page.evaluate(() => navigator.storage.estimate());
      await cdp.send("Storage.overrideQuotaForOrigin", { origin, quotaSize: usage + 64 * 1024 });
      const code = `import fs from "fs"; fs.writeFileSync("/tmp/big", new Uint8Array(2 << 20)); console.log("the program saw no error")`;
      const lost = await runJs(code, {}, c);
      const { exitCode, stdout, usage: used, notStored } = lost.structuredContent;
      assert.equal(lost.isError, true, JSON.stringify(lost.structuredContent));
      assert.equal(exitCode, 0, "the program's own exit code");
      assert.equal(stdout, "the program saw no error\n");
      assert.equal(used.fileErrors, 1);
      assert.equal(notStored.changes, 1);
      assert.match(notStored.message, /^1 file change the run made was not stored .*the workspace may lack them/);
      assert.ok(lost.content[0].text.includes(notStored.message), lost.content[0].text);
    } finally {
      await cdp.send("Storage.overrideQuotaForOrigin", { origin }).catch(() => {}); // the quota back
    }
    try {
      const after = await runJs(`import fs from "fs"; console.log(fs.existsSync("/tmp/big"), fs.readFileSync("/tmp/before", "utf8"))`, {}, c);
      assert.equal(after.structuredContent.stdout, "false kept\n", JSON.stringify(after.structuredContent));
      assert.equal(after.structuredContent.usage.fileErrors, 0);
    } finally {
      await c.close();
      await tab.context.close();
    }
  });
});
