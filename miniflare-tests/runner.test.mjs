// Browser-side tests of the executor: real QuickJS and Pyodide, vendored by
// scripts/build-assets.mjs, running in the runner Web Worker in Debian's Chromium
// (/usr/bin/chromium, driven by playwright-core). The page is dist/test/runner-test.html (never deployed),
// served by a tiny static server; it exposes the executor's own modules as window.relayTest.
// Run: node --test miniflare-tests/runner.test.mjs

import assert from "node:assert/strict";
import { createHash, generateKeyPairSync, sign } from "node:crypto";
import { readFileSync } from "node:fs";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { crc32, deflateRawSync } from "node:zlib";
import { launchWithTabs } from "./lib/background-tab.mjs";
import { RUNTIMES, runnerJob as job, startRunnerPages } from "./lib/runner-page.mjs";
import { REFILL_AFTER_MS } from "../public/lib/standby-refill.js";

let pages;
let server;
let page;

before(async () => {
  pages = await startRunnerPages();
  server = pages.server;
  page = await openTestPage();
});

after(async () => {
  await pages?.close();
});

/** The key id of the test signing keys. */
const KID = "k1";

function openTestPage() {
  return pages.openPage();
}

function run(spec, onPage = page) {
  return onPage.evaluate((j) => window.relayTest.run(j), spec);
}

test("the build vendors both runtimes with SRI hashes under their ids", async () => {
  const catalog = await (await fetch(`${server.url}/runtimes.json`)).json();
  assert.deepEqual(Object.keys(catalog).sort(), Object.values(RUNTIMES).sort());
  for (const { files } of Object.values(catalog)) {
    for (const file of Object.values(files)) assert.match(file.integrity, /^sha384-[A-Za-z0-9+/]{64}$/);
  }
  assert.ok(catalog["pyodide@314"].files["pyodide.asm.wasm"]);
});

describe("JavaScript in QuickJS", () => {
  test("stdout, stderr and process.exit(3)", async () => {
    const result = await run(
      job(
        "js",
        `console.log("out", 1, { a: [1, "x"] });
         console.error("err");
         console.warn("warned");
         process.stdout.write("raw");
         process.exit(3);
         console.log("never");`,
      ),
    );
    assert.equal(result.exitCode, 3);
    assert.equal(result.stdout, `out 1 { a: [ 1, 'x' ] }\nraw`);
    assert.equal(result.stderr, "err\nwarned\n");
    assert.equal(result.error, undefined);
    assert.ok(result.usage.memPeakMb > 0);
  });

  test("stdin, args, env, cwd, timers and promise jobs", async () => {
    const result = await run(
      job(
        "js",
        `const input = process.stdin.read();
         await new Promise((resolve) => setTimeout(resolve, 20));
         Promise.resolve().then(() => console.log("job ran"));
         console.log(JSON.stringify({ input, args: process.argv.slice(2), foo: process.env.FOO, cwd: process.cwd() }));`,
        { entry: { stdin: "line 1\nline 2\n", argv: ["a", "b c"], env: { FOO: "bar" }, cwd: "/tmp" } },
      ),
    );
    assert.equal(result.exitCode, 0, result.stderr);
    const [first, second] = result.stdout.trim().split("\n");
    assert.deepEqual(JSON.parse(first), { input: "line 1\nline 2\n", args: ["a", "b c"], foo: "bar", cwd: "/tmp" });
    assert.equal(second, "job ran");
  });

  test("relative imports between the capsule's files", async () => {
    const result = await run(
      job("js", `import { twice } from "./lib/math.js"; console.log(twice(21));`, {
        files: { "lib/math.js": "export const twice = (n) => n * 2;" },
      }),
    );
    assert.equal(result.exitCode, 0, result.stderr);
    assert.equal(result.stdout, "42\n");
  });

  test("an uncaught exception goes to stderr and exits 1", async () => {
    const result = await run(job("js", `function f() { throw new TypeError("bad thing"); }\nf();`));
    assert.equal(result.exitCode, 1);
    assert.match(result.stderr, /^Uncaught TypeError: bad thing\n.*entry\.js/s);
    const rejected = await run(job("js", `await Promise.reject(new RangeError("nope"));`));
    assert.equal(rejected.exitCode, 1);
    assert.match(rejected.stderr, /Uncaught RangeError: nope/);
  });

  test("runs share nothing and a warm run takes a few ms", async (t) => {
    await run(job("js", `globalThis.leak = 1;`));
    const times = [];
    for (let i = 0; i < 5; i++) {
      const result = await run(job("js", `console.log(typeof globalThis.leak)`));
      assert.equal(result.stdout, "undefined\n");
      times.push(result.pageMs);
    }
    const best = Math.min(...times);
    t.diagnostic(`warm QuickJS run of console.log: best ${best.toFixed(1)} ms, all ${times.map((ms) => ms.toFixed(1)).join(", ")} ms`);
    assert.ok(best < 50, `a warm run took ${best} ms`);
  });

  test("the output cap stops the run with OutputLimitExceeded", async () => {
    const result = await run(
      job("js", `for (let i = 0; ; i++) console.log("line " + i + " ".padEnd(90, "x"));`, { limits: { stdoutBytes: 1000 } }),
    );
    assert.notEqual(result.exitCode, 0);
    assert.equal(result.error.name, "OutputLimitExceeded");
    assert.match(result.error.message, /1000 bytes/);
    assert.equal(Buffer.byteLength(result.stdout + result.stderr), 1000);
  });

  test("memMb caps the wasm heap: a runaway allocation fails cleanly", async () => {
    const hog = await run(job("js", `const a = []; while (true) a.push(new Array(1e5).fill(1));`, { limits: { memMb: 64 } }));
    assert.equal(hog.exitCode, 1);
    assert.match(hog.stderr, /^Uncaught InternalError: out of memory/);
    assert.ok(hog.usage.memPeakMb > 16 && hog.usage.memPeakMb <= 64, `memPeakMb ${hog.usage.memPeakMb}`);
    const next = await run(job("js", `console.log("fine")`));
    assert.equal(next.stdout, "fine\n");
    assert.equal(next.usage.memPeakMb, 16, "the next run starts on a fresh, small heap");
  });

  test("an infinite loop is killed at timeoutMs, and the next run works", async () => {
    const looping = await run(job("js", `console.log("spinning"); while (true) {}`, { limits: { timeoutMs: 500 } }));
    assert.equal(looping.exitCode, 124);
    assert.equal(looping.error.name, "Timeout");
    assert.match(looping.error.message, /500 ms/);
    assert.equal(looping.stdout, "spinning\n");
    const next = await run(job("js", `console.log("alive")`));
    assert.equal(next.exitCode, 0);
    assert.equal(next.stdout, "alive\n");
    assert.equal(next.loaded, false, "the runtime stays loaded: the next run takes a fresh worker");
  });

  // QuickJS's interrupt is uncatchable, but its Promise executor and async functions turn it
  // into a rejection: before the halt a loop around them ran on after process.exit() until the
  // page killed it at its timeout (Timeout, 124).
  test("process.exit() in a Promise executor or an async function a loop calls again ends the run, not its timeout", async (t) => {
    for (const code of [
      "for (;;) new Promise(() => { try { process.exit(3); } catch {} for (;;) {} });",
      "async function f() { try { process.exit(3); } catch {} for (;;) {} }\nfor (;;) f();",
      "for (;;) { try { process.exit(3); } catch {} try { for (;;) {} } catch {} finally { for (;;) {} } }",
    ]) {
      const result = await run(job("js", code, { limits: { timeoutMs: 10_000 } }));
      t.diagnostic(`${code.split("\n").pop()}: exit ${result.exitCode} after ${result.usage.wallMs} ms of 10000`);
      assert.equal(result.error, undefined, `${code}: ${JSON.stringify(result.error)}`);
      assert.equal(result.exitCode, 3, code);
    }
    assert.equal((await run(job("js", `console.log("alive")`))).stdout, "alive\n");
  });

  test("cancel stops a running run", async () => {
    const result = await run(job("js", `while (true) {}`, { cancelAfterMs: 300 }));
    assert.equal(result.exitCode, 130);
    assert.equal(result.error.name, "Cancelled");
  });
});

describe("Python in Pyodide", () => {
  test("stdout, stderr and SystemExit(2)", async (t) => {
    const result = await run(
      job(
        "py",
        `import sys
print("hello", 42)
print("oops", file=sys.stderr)
sys.exit(2)
print("never")`,
      ),
    );
    t.diagnostic(`cold Pyodide (network, SRI-checked, cached) load + run: ${result.pageMs.toFixed(0)} ms; run alone ${result.usage.wallMs} ms`);
    assert.equal(result.loaded, true);
    assert.equal(result.exitCode, 2, result.stderr);
    assert.equal(result.stdout, "hello 42\n");
    assert.equal(result.stderr, "oops\n");
    assert.ok(result.usage.memPeakMb > 0);
  });

  test("a write the guest makes as its run ends (a __del__ of what it left) is still judged by the run's policy", async () => {
    const code = `class Leftover:
    def __del__(self):
        try:
            open("/etc/written-at-the-end", "w")
            print("written")
        except PermissionError as e:
            print("refused:", str(e).split(":")[0])
leftover = Leftover()`;
    const result = await run(job("py", code));
    assert.equal(result.stdout, "refused: PolicyDenied\n", result.stderr);
  });

  test("an uncaught exception prints its traceback and exits 1", async () => {
    const result = await run(job("py", `def f():\n    return 1 / 0\n\nf()\n`));
    assert.equal(result.exitCode, 1);
    assert.match(result.stderr, /^Traceback \(most recent call last\):\n {2}File "\/entry\.py", line 4/);
    assert.match(result.stderr, /ZeroDivisionError: division by zero\n$/);
    assert.doesNotMatch(result.stderr, /runpy|relay_run/);
  });

  test("stdin, argv, env and cwd; the next run starts clean", async (t) => {
    const code = `import os, sys, json, helper
print(json.dumps({"argv": sys.argv, "foo": os.environ.get("FOO"), "cwd": os.getcwd(), "stdin": sys.stdin.read(), "helper": helper.NAME}))`;
    const first = await run(
      job("py", code, {
        files: { "helper.py": `NAME = "one"` },
        entry: { stdin: "a\nb\n", argv: ["x", "y z"], env: { FOO: "bar" }, cwd: "/work" },
      }),
    );
    assert.equal(first.exitCode, 0, first.stderr);
    assert.deepEqual(JSON.parse(first.stdout), { argv: ["/entry.py", "x", "y z"], foo: "bar", cwd: "/work", stdin: "a\nb\n", helper: "one" });
    const second = await run(job("py", code, { files: { "helper.py": `NAME = "two"` } }));
    t.diagnostic(`warm Pyodide run: ${second.pageMs.toFixed(1)} ms`);
    assert.equal(second.exitCode, 0, second.stderr);
    assert.deepEqual(JSON.parse(second.stdout), { argv: ["/entry.py"], foo: null, cwd: "/", stdin: "", helper: "two" });
  });

  test("pure-Python wheels in the capsule are importable", async () => {
    const wheel = makeZip([
      { name: "greet/__init__.py", data: `def hello(name):\n    return f"hello {name}"\n`, deflate: true },
      { name: "greet-1.0.dist-info/METADATA", data: "Name: greet\nVersion: 1.0\n", deflate: false },
    ]);
    const result = await run(
      job("py", `import greet\nprint(greet.hello("wheel"))`, {
        files: { "wheels/greet-1.0-py3-none-any.whl": { base64: wheel.toString("base64") } },
      }),
    );
    assert.equal(result.exitCode, 0, result.stderr);
    assert.equal(result.stdout, "hello wheel\n");
  });

  test("the output cap stops a printing loop", async () => {
    const result = await run(job("py", `i = 0\nwhile True:\n    print("line", i)\n    i += 1\n`, { limits: { stdoutBytes: 500 } }));
    assert.equal(result.error?.name, "OutputLimitExceeded");
    assert.notEqual(result.exitCode, 0);
    assert.equal(Buffer.byteLength(result.stdout + result.stderr), 500);
    const next = await run(job("py", `print("fine")`));
    assert.equal(next.stdout, "fine\n");
  });

  test("the output cap stops a flood of warnings, though Python swallows the error writing raises", async (t) => {
    // warnings.showwarning drops any OSError from stderr: only the page's own count can stop it.
    const flood = `import warnings\nwarnings.simplefilter("always")\ni = 0\nwhile True:\n    warnings.warn(f"careful {i}")\n    i += 1\n`;
    const result = await run(job("py", flood, { limits: { stdoutBytes: 1000, timeoutMs: 20_000 } }));
    t.diagnostic(`stopped after ${result.usage.wallMs} ms of a 20000 ms limit`);
    assert.equal(result.error?.name, "OutputLimitExceeded", JSON.stringify(result.error));
    assert.equal(Buffer.byteLength(result.stdout + result.stderr), 1000);
    assert.match(result.stderr, /^\/entry\.py:5: UserWarning: careful 0\n/);
  });
});

test("a run cancelled while its runtime loads does not take the sandbox from the run after it", async () => {
  const fresh = await openTestPage(); // its sandbox has no runtime loaded yet
  try {
    const cancelled = run(job("py", `print("never")`, { cancelAfterMs: 100 }), fresh);
    assert.equal((await cancelled).error?.name, "Cancelled");
    // Pyodide finishes loading while this run goes on: the cancelled run must not get a worker.
    const busy = await run(
      job("js", `const t = Date.now(); while (Date.now() - t < 3000) {} console.log("done")`, { limits: { timeoutMs: 20_000 } }),
      fresh,
    );
    assert.equal(busy.error, undefined, JSON.stringify(busy.error));
    assert.equal(busy.stdout, "done\n");
  } finally {
    await fresh.close();
  }
});

/** Resolves once `condition()` (sync or async) is true, polling every 20 ms. */
async function until(condition) {
  while (!(await condition())) await new Promise((resolve) => setTimeout(resolve, 20));
}

/**
 * `evaluate(expression)` and `runIn(job)` in `page` over CDP: once a frame's process is gone
 * Playwright counts the whole page as crashed and evaluates nothing more in it (the page itself
 * runs on).
 */
async function overCdp(context, page) {
  const cdp = await context.newCDPSession(page);
  const evaluate = async (expression) => {
    const { result, exceptionDetails } = await cdp.send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true });
    assert.equal(exceptionDetails, undefined, JSON.stringify(exceptionDetails));
    return result.value;
  };
  return { evaluate, runIn: (spec) => evaluate(`window.relayTest.run(${JSON.stringify(spec)})`) };
}

test("a sandbox frame whose process dies is replaced: a load then goes on in the new frame, a run then ends RuntimeCrashed", async (t) => {
  // A context of its own: the sandbox frames of one context's pages may share a process, and
  // this test kills that process.
  const isolated = await pages.browser.newContext();
  const fresh = await pages.openPage(isolated); // its sandbox has no runtime loaded yet
  const { evaluate, runIn } = await overCdp(isolated, fresh);
  const state = () => evaluate("window.relayTest.sandboxState()");
  // What a guest filling its worker's JavaScript heap does to it (sandbox.test.mjs), at once.
  const crashFrame = async () => {
    const frame = fresh.frames().find((f) => f.url().endsWith("/sandbox.html"));
    (await isolated.newCDPSession(frame)).send("Page.crash").catch(() => {}); // never answered
  };
  try {
    await until(async () => (await state()).listening);
    const loading = runIn(job("py", `print("in the new frame")`));
    await new Promise((resolve) => setTimeout(resolve, 300)); // Pyodide takes seconds to load
    assert.equal((await state()).running, false, "the frame must die while the runtime loads");
    await crashFrame();
    const loaded = await loading;
    assert.equal(loaded.stdout, "in the new frame\n", JSON.stringify(loaded));

    const looping = runIn(job("js", "while (true) {}", { limits: { timeoutMs: 60_000 } }));
    await until(async () => (await state()).running);
    await crashFrame();
    const crashed = await looping;
    assert.equal(crashed.error?.name, "RuntimeCrashed", JSON.stringify(crashed));
    assert.equal(crashed.exitCode, 137);
    const next = await runIn(job("js", `console.log("next")`));
    assert.equal(next.stdout, "next\n");
    t.diagnostic(`a load across the crash: ${loaded.pageMs.toFixed(0)} ms; the crashed run ended after ${crashed.usage.wallMs} ms; the next run took ${next.pageMs.toFixed(0)} ms`);
  } finally {
    await isolated.close();
  }
});

test("a sandbox frame that never says hello is replaced: one that failed to load, then one killed before its hello", { timeout: 90_000 }, async (t) => {
  // The first sandbox.html fails to load (a network error); the second is a page that never
  // says hello, and its process is killed; the third is the real frame. A run sent at once
  // waits for them all and runs in the third.
  const isolated = await pages.browser.newContext();
  const served = [];
  await isolated.route("**/sandbox.html", (route) => {
    served.push(performance.now());
    if (served.length === 1) return route.abort("connectionreset");
    if (served.length === 2) return route.fulfill({ contentType: "text/html", body: "<!doctype html><p>no hello from here" });
    return route.continue();
  });
  try {
    const fresh = await pages.openPage(isolated);
    const { runIn } = await overCdp(isolated, fresh);
    const running = runIn(job("js", `console.log("in the third frame")`, { limits: { timeoutMs: 60_000 } }));
    running.catch(() => {}); // awaited below, unless the test failed first
    const deadline = performance.now() + 30_000;
    let stub;
    while (!(stub = fresh.frames().find((f) => f.url().endsWith("/sandbox.html") && served.length === 2)) && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.ok(stub, `no second frame was opened (sandbox.html served ${served.length} times)`);
    (await isolated.newCDPSession(stub)).send("Page.crash").catch(() => {}); // never answered
    const result = await running;
    assert.equal(result.stdout, "in the third frame\n", JSON.stringify(result));
    assert.equal(served.length, 3);
    t.diagnostic(`frames opened at ${served.map((at) => Math.round(at - served[0])).join(", ")} ms; the run took ${result.pageMs.toFixed(0)} ms`);
  } finally {
    await isolated.close();
  }
});

test("in a background tab the sandbox's watchdog still notices a dead frame within seconds", { timeout: 180_000 }, async (t) => {
  // Chrome runs a hidden page's chained timers once a minute once it has been hidden 5 minutes
  // (intensive wake-up throttling): a watchdog on the page's own timers would notice a crash up
  // to a minute late. It ticks from a worker (lib/clock.js), whose timers are not throttled so.
  // The flag shortens those 5 minutes to 10 s; the throttled wake-ups fall on whole minutes, so
  // 75 s hidden see at least one. Nothing here touches the hidden tab meanwhile (a DevTools
  // call wakes its thread, and its timers with it): its run starts before it is hidden, and the
  // frame is crashed through its own process.
  const HIDDEN_MS = 75_000;
  // The watchdog's own bound is 3.5 s (a ping every 500 ms, 3 s of silence); a throttled one
  // would take up to two minutes.
  const NOTICE_WITHIN_MS = 20_000;
  const chrome = await launchWithTabs(["--enable-features=IntensiveWakeUpThrottling:grace_period_seconds/10"]);
  // A page of another site (a process of its own) with only a timer, hidden beside it, shows
  // how Chrome throttled (an http page: about: and data: pages are not throttled so).
  const blank = http.createServer((req, res) => res.end("<!doctype html><title>a page with a timer</title>"));
  await new Promise((resolve) => blank.listen(0, "127.0.0.1", resolve));
  try {
    const tab = await chrome.open(`${server.url}/runner-test.html`);
    await until(() => tab.evaluate("Boolean(window.relayTest?.sandboxState().listening)"));
    const looping = job("js", "while (true) {}", { limits: { timeoutMs: 300_000 } });
    const running = tab.evaluate(`window.relayTest.run(${JSON.stringify(looping)})`);
    await until(() => tab.evaluate("window.relayTest.sandboxState().running"));
    const probe = await chrome.open(`http://localhost:${blank.address().port}/`);
    await probe.evaluate(`{
      window.gaps = [];
      let last = performance.now();
      const chain = () => (gaps.push(performance.now() - last), (last = performance.now()), setTimeout(chain, 500));
      chain();
    }`);
    await chrome.open("about:blank"); // in front of both
    assert.deepEqual(await Promise.all([tab, probe].map((p) => p.evaluate("document.visibilityState"))), ["hidden", "hidden"]);
    await new Promise((resolve) => setTimeout(resolve, HIDDEN_MS));
    const frame = (await chrome.targets()).find((target) => target.type === "iframe" && target.url.endsWith("/sandbox.html"));
    assert.ok(frame, "the sandbox frame has a process of its own");
    const crashedAt = performance.now();
    (await chrome.attach(frame.targetId)).send("Page.crash").catch(() => {}); // never answered
    const crashed = await Promise.race([running, new Promise((resolve) => setTimeout(resolve, NOTICE_WITHIN_MS, null))]);
    const noticedMs = Math.round(performance.now() - crashedAt);
    const throttledMs = Math.round(Math.max(...(await probe.evaluate("gaps"))));
    t.diagnostic(`hidden ${HIDDEN_MS} ms: a hidden page's 500 ms timer waited up to ${throttledMs} ms; the watchdog ${crashed ? `noticed the crash after ${noticedMs}` : `had not noticed the crash after ${NOTICE_WITHIN_MS}`} ms`);
    assert.ok(throttledMs > 10_000, `Chrome did not throttle the hidden pages' timers (longest wait ${throttledMs} ms): this test shows nothing then`);
    assert.ok(crashed, `the crash was not noticed within ${NOTICE_WITHIN_MS} ms`);
    assert.equal(crashed.error?.name, "RuntimeCrashed", JSON.stringify(crashed));
  } finally {
    await chrome.close();
    blank.close();
  }
});

test("after a reload the runtimes come from the Cache API, not the network", async (t) => {
  const reloaded = await openTestPage();
  const before = server.requests.length;
  const js = await run(job("js", `console.log("js")`), reloaded);
  const py = await run(job("py", `print("py")`), reloaded);
  t.diagnostic(`reload: QuickJS load + run ${js.pageMs.toFixed(0)} ms, Pyodide load + run ${py.pageMs.toFixed(0)} ms`);
  assert.equal(js.stdout, "js\n");
  assert.equal(py.stdout, "py\n");
  const fetched = server.requests.slice(before).filter((path) => path.startsWith("/vendor/"));
  assert.deepEqual(fetched, []);
  await reloaded.close();
});

describe("capsule manifest signatures", () => {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const keySet = { keys: [{ ...publicKey.export({ format: "jwk" }), kid: KID, alg: "EdDSA" }] };
  const unsigned = {
    version: "1",
    language: "js",
    runtime: { id: "quickjs@0.32" },
    entry: { path: "/entry.js", argv: ["é", "𝔘"], env: { Z: "1", a: "\u0001\"\\" }, cwd: "/" },
    fsLayers: [{ id: "code", sha256: "ab".repeat(32), path: "fs.code.zip", size: 123 }],
    policy: { limits: { timeoutMs: 60000, memMb: 256, stdoutBytes: 1048576 } },
    // Keys that sort differently by UTF-16 unit and by code point.
    ordering: { "\uff61": 1, "\u{1d518}": 2, b: 3, B: 4 },
  };

  const verify = (manifest, keys = keySet) => page.evaluate(([m, k]) => window.relayTest.verify(m, k), [manifest, keys]);

  test("the page canonicalizes tests/canonical_cases.json as the table says (the Rust core reads it too)", async () => {
    const { cases } = JSON.parse(readFileSync(new URL("../tests/canonical_cases.json", import.meta.url), "utf8"));
    const results = await page.evaluate((texts) => texts.map((text) => window.relayTest.canonicalOfText(text)), cases.map((c) => c.json));
    assert.ok(cases.length >= 20, "the table was not read whole");
    cases.forEach((testCase, i) => {
      // `page`: where JSON.parse has lost a difference (1.0 is the number 1) before canonicalJson runs.
      const { canonical, refused } = testCase.page ?? testCase;
      if (canonical !== undefined) assert.deepEqual(results[i], { canonical }, testCase.name);
      else assert.ok(results[i].refused?.includes(refused), `${testCase.name}: ${JSON.stringify(results[i])}`);
    });
  });

  test("the page's canonical JSON matches an independent one", async () => {
    assert.equal(await page.evaluate((m) => window.relayTest.canonicalJson(m), unsigned), canonical(unsigned));
  });

  test("a correctly signed manifest verifies, whatever its key order", async () => {
    const signed = signWith(privateKey, unsigned);
    assert.equal(await verify(signed), "ok");
    const reordered = Object.fromEntries(Object.entries(signed).reverse());
    assert.equal(await verify(reordered), "ok");
  });

  test("tampering, foreign keys and unknown key ids are refused", async () => {
    const signed = signWith(privateKey, unsigned);
    const tampered = { ...signed, fsLayers: [{ ...signed.fsLayers[0], sha256: "cd".repeat(32) }] };
    assert.match(await verify(tampered), /^ValidationError: JWS payload differs/);
    const foreign = signWith(generateKeyPairSync("ed25519").privateKey, unsigned);
    assert.match(await verify(foreign), /^ValidationError: bad signature/);
    const unknownKid = signWith(privateKey, unsigned, { alg: "EdDSA", kid: "k9" });
    assert.match(await verify(unknownKid), /^ValidationError: signed with unknown key id "k9"/);
    assert.match(await verify({ ...unsigned }), /^ValidationError: manifest has no signature/);
    const withFloat = signWith(privateKey, { ...unsigned, extra: 1.5 });
    assert.match(await verify(withFloat), /^ValidationError: manifest has no canonical form/);
    const withHugeInteger = signWith(privateKey, { ...unsigned, fsLayers: [{ ...unsigned.fsLayers[0], size: 2 ** 53 }] });
    assert.match(await verify(withHugeInteger), /^ValidationError: manifest has no canonical form: .* at \/fsLayers\/0\/size/);
  });
});

describe("standby workers offered ahead", () => {
  const offerOf = (runtime, options) => page.evaluate(([r, o]) => window.relayTest.offerOf(r, o), [runtime, options]);
  const holdsOffer = (runtime, id) => page.evaluate(([r, i]) => window.relayTest.holdsOffer(r, i), [runtime, id]);
  const offerCurrent = (runtime) => page.evaluate((r) => window.relayTest.offerCurrent(r), runtime);
  /** How the page asked for the run's worker: "took" an offer, or "take" through the frame (after a "discard"). */
  const howTaken = async () => {
    const sent = await page.evaluate(() => window.relayTest.sentToFrame());
    return sent.filter((type) => ["took", "take", "discard"].includes(type)).join(" ");
  };

  test("an idle page is offered a ready worker, and the next run starts in it", async () => {
    await run(job("js", "1"));
    const offer = await offerOf(RUNTIMES.js);
    assert.ok(offer, "no standby was offered after the page went idle");
    const result = await run(job("js", "globalThis.seen = (globalThis.seen ?? 0) + 1; console.log(seen)"));
    assert.equal(result.stdout, "1\n");
    // The reserve standby may be offered as soon as the run ends: the one offered before is gone.
    assert.equal(await holdsOffer(RUNTIMES.js, offer), false, "the offer was used");
  });

  test("an idle page keeps two QuickJS workers ready and one Pyodide worker; back to back, each run finds one", async () => {
    const readyWorkers = (runtime, count, timeoutMs) =>
      page.evaluate(([r, c, t]) => window.relayTest.readyWorkers(r, c, t), [runtime, count, timeoutMs]);
    await run(job("js", "1"));
    assert.equal(await readyWorkers(RUNTIMES.js, 2), 2, "QuickJS keeps two standbys: one offered, one in reserve");
    // A stale offer sends the run to `take`, which finds the reserve: still a fresh worker.
    assert.ok(await offerOf(RUNTIMES.js));
    const result = await run({ ...job("js", "console.log(typeof globalThis.seen)"), killFirst: true });
    assert.equal(result.stdout, "undefined\n");
    assert.equal(await readyWorkers(RUNTIMES.js, 2), 2, "refilled once idle");
    await run(job("py", "print(1)"));
    assert.equal(await readyWorkers(RUNTIMES.py, 1), 1);
    assert.equal(await readyWorkers(RUNTIMES.py, 2, 1_500), 1, "Pyodide keeps one: each holds ~100 MB");
  });

  test("the executor page's refill timing works on a browser's own clock", async () => {
    // On the page's own clock (a browser's setTimeout, which throws when called as another
    // object's method): null would mean the taken standbys are never replaced.
    const delay = await page.evaluate(() => window.relayTest.refillDelay());
    assert.notEqual(delay, null, "the page never had the sandbox refill");
    assert.ok(delay >= REFILL_AFTER_MS - 2, `refilled after ${delay} ms, before the answer had time to leave`);
  });

  test("an offer the page holds across a run of another runtime is confirmed current again, not thrown away", async () => {
    await run(job("py", "print(1)"));
    const offer = await offerOf(RUNTIMES.py);
    assert.ok(offer, "no Pyodide standby was offered");
    await run(job("js", "1")); // its kill makes every offer held older than the kills sent
    // Were it left stale, the next run_py would discard a ready Pyodide worker and load another.
    assert.equal(await offerCurrent(RUNTIMES.py), true, "the frame did not confirm the Pyodide offer after the kill");
    await howTaken();
    assert.equal((await run(job("py", "print(2)"))).stdout, "2\n");
    assert.equal(await howTaken(), "took", "the run did not start in the offered worker");
  });

  test("an offer made before a kill it did not count is discarded: the run takes a worker the slow way", async () => {
    await run(job("js", "1"));
    const stale = await offerOf(RUNTIMES.js);
    assert.ok(stale);
    await howTaken();
    const result = await run({ ...job("js", "console.log(typeof globalThis.seen)"), killFirst: true });
    assert.equal(await howTaken(), "discard take", "the stale offer was used");
    assert.equal(result.exitCode, 0);
    assert.equal(result.stdout, "undefined\n", "a fresh worker all the same");
    assert.equal(await holdsOffer(RUNTIMES.js, stale), false, "the stale offer was discarded");
  });

  test("a run cancelled while the frame loads its worker leaves no worker running: the idle page is offered a standby", async () => {
    await run(job("py", "print(1)")); // takes the ready Pyodide worker: the next take loads one
    const cancelled = await run({ ...job("py", "print('never')", { cancelAfterMs: 50 }), killFirst: true });
    assert.equal(cancelled.error?.name, "Cancelled");
    assert.equal(cancelled.stdout, "");
    // Were the worker the frame finished loading left running with no run, the frame would
    // offer no standby (one is offered only while none runs) until the next run's take.
    assert.ok(await offerOf(RUNTIMES.py, { timeoutMs: 15_000 }), "no Pyodide standby offered after the cancelled run");
    assert.equal((await run(job("py", "print(2)"))).stdout, "2\n");
  });
});

describe("a capsule's files inline in its announcement", () => {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const keySet = { keys: [{ ...publicKey.export({ format: "jwk" }), kid: KID, alg: "EdDSA" }] };
  const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

  /** A signed capsule of `code`, announced with its manifest and layer inline. */
  function announce(code) {
    const zip = makeZip([{ name: "entry.js", data: code, deflate: true }]);
    const unsigned = {
      version: "1",
      language: "js",
      runtime: { id: "quickjs@0.32" },
      entry: { path: "/entry.js", argv: [], env: {}, cwd: "/" },
      fsLayers: [{ id: "code", sha256: sha256(zip), path: "fs.code.zip", size: zip.length }],
      policy: { limits: { timeoutMs: 60000, memMb: 256, stdoutBytes: 1048576 } },
    };
    const manifest = signWith(privateKey, unsigned, { alg: "EdDSA", kid: KID, typ: "relay-capsule+jws" });
    const hash = sha256(canonical(unsigned));
    // The static server has no /capsules: anything not taken from `inline` fails to fetch.
    const inline = { manifest: JSON.stringify(manifest), layers: { "fs.code.zip": zip.toString("base64") } };
    return { runId: "r_inline", hash, language: "js", manifestUrl: `/capsules/${hash}/capsule.json`, token: "t", inline };
  }
  const load = (announced) => page.evaluate(([a, k]) => window.relayTest.loadCapsule(a, k), [announced, keySet]);

  test("a genuine one loads without a request", async () => {
    assert.deepEqual(await load(announce("console.log('inline')")), { files: { "entry.js": "console.log('inline')" } });
  });

  test("a changed manifest or layer is refused as a fetched one would be", async () => {
    const changed = announce("console.log('changed manifest')");
    changed.inline.manifest = changed.inline.manifest.replace('"timeoutMs":60000', '"timeoutMs":60001');
    assert.match(await load(changed), /^ValidationError: JWS payload differs/);
    const extended = announce("console.log('extended layer')");
    const bytes = Buffer.from(extended.inline.layers["fs.code.zip"], "base64");
    extended.inline.layers["fs.code.zip"] = Buffer.concat([bytes, Buffer.from([0])]).toString("base64");
    assert.match(await load(extended), /^ValidationError: layer code is \d+ bytes, the manifest says/);
    const flipped = announce("console.log('flipped layer')");
    const other = Buffer.from(flipped.inline.layers["fs.code.zip"], "base64");
    other[other.length - 30] ^= 1;
    flipped.inline.layers["fs.code.zip"] = other.toString("base64");
    assert.match(await load(flipped), /^ValidationError: layer code has sha256 [0-9a-f]{64}, the manifest says/);
  });
});

describe("capsule layers", () => {
  const unzipInPage = (bytes) => page.evaluate((b64) => window.relayTest.unzip(b64), bytes.toString("base64"));

  test("stored and deflated entries unzip; directories are skipped", async () => {
    const big = "hello ".repeat(1000);
    const zip = makeZip([
      { name: "entry.js", data: "console.log(1)", deflate: false },
      { name: "lib/", data: "", deflate: false },
      { name: "lib/big.txt", data: big, deflate: true },
    ]);
    assert.deepEqual(await unzipInPage(zip), { "entry.js": "console.log(1)", "lib/big.txt": big });
  });

  test("a deflated entry that is not deflate data, or inflates to another size, is refused", async () => {
    const garbage = makeZip([{ name: "a.js", data: "console.log(1)", deflate: true, body: Buffer.alloc(8, 0xff) }]);
    assert.match(await unzipInPage(garbage), /^ValidationError: zip entry a\.js is not valid deflate data/);
    const longer = makeZip([{ name: "a.js", data: "abc", deflate: true, body: deflateRawSync("abcd") }]);
    assert.match(await unzipInPage(longer), /^ValidationError: zip entry a\.js inflates to the wrong size/);
  });

  test("entries that escape the capsule are refused", async () => {
    for (const name of ["../evil.js", "/etc/passwd", "a//b"]) {
      const result = await unzipInPage(makeZip([{ name, data: "x", deflate: false }]));
      assert.match(result, /^ValidationError: zip entry .* escapes/);
    }
  });
});

/** `manifest` with its `sig`: a compact JWS over its canonical JSON, signed with `key`. */
function signWith(key, manifest, header = { alg: "EdDSA", kid: KID, typ: "JWT" }) {
  const encode = (bytes) => Buffer.from(bytes).toString("base64url");
  const signingInput = `${encode(JSON.stringify(header))}.${encode(canonical(manifest))}`;
  return { ...manifest, sig: `${signingInput}.${encode(sign(null, Buffer.from(signingInput), key))}` };
}

/** Canonical JSON as docs/CAPSULE.md and the Rust side define it: keys in UTF-16 code unit order. */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    const keys = Object.keys(value).sort(compareCodeUnits);
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function compareCodeUnits(a, b) {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a.charCodeAt(i) !== b.charCodeAt(i)) return a.charCodeAt(i) - b.charCodeAt(i);
  }
  return a.length - b.length;
}

/**
 * A minimal zip writer (no zip64, no data descriptors), as capsule layers are built. An entry's
 * `body`, if given, replaces its stored or deflated bytes (to make a bad one).
 */
function makeZip(entries) {
  const locals = [];
  const centrals = [];
  let offset = 0;
  for (const { name, data, deflate, body: given } of entries) {
    const raw = Buffer.from(data);
    const body = given ?? (deflate ? deflateRawSync(raw) : raw);
    const nameBytes = Buffer.from(name);
    const local = header(30, 0x04034b50);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(deflate ? 8 : 0, 8);
    local.writeUInt32LE(crc32(raw), 14);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(raw.length, 22);
    local.writeUInt16LE(nameBytes.length, 26);
    const central = header(46, 0x02014b50);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(deflate ? 8 : 0, 10);
    central.writeUInt32LE(crc32(raw), 16);
    central.writeUInt32LE(body.length, 20);
    central.writeUInt32LE(raw.length, 24);
    central.writeUInt16LE(nameBytes.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, nameBytes, body);
    centrals.push(central, nameBytes);
    offset += local.length + nameBytes.length + body.length;
  }
  const directory = Buffer.concat(centrals);
  const end = header(22, 0x06054b50);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

function header(size, signature) {
  const bytes = Buffer.alloc(size);
  bytes.writeUInt32LE(signature, 0);
  return bytes;
}
