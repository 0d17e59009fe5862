// Contexts end to end (run::contexts, lib/sandbox.js takeContext): the official SDK client
// calls run_js / run_py naming a `context`, and headless Chromium runs them in that context's
// long-lived runner worker. What one call defines the next sees, in both runtimes; nothing
// else sees it (another context, a run without one); a timeout, `reset`, idle expiry and a
// reloaded tab end it, and the next call says why; the limit and bad names are refused.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { attachedExecutor } from "./lib/attached.mjs";
import { waitForLine } from "./lib/browser.mjs";
import { patchTenant } from "./lib/relay.mjs";

let attached;
let client;
let executor;
let tenant;

before(async () => {
  attached = await attachedExecutor("contexts");
  ({ client, executor, tenant } = attached);
  // Both runtimes loaded first: a cold Pyodide on a loaded machine can outlast the client's
  // 60 s request timeout, and that is not what these tests are about.
  await waitForLine(executor.lines, /^Runtimes ready/, 180_000);
});

after(() => attached?.close());

const call = (name, code, extra = {}) => client.callTool({ name, arguments: { code, ...extra } });
const runJs = (code, extra) => call("run_js", code, extra);
const runPy = (code, extra) => call("run_py", code, extra);
const shown = (result) => JSON.stringify(result.structuredContent ?? result);

async function liveContexts() {
  const { contents } = await client.readResource({ uri: "relay://contexts" });
  return JSON.parse(contents[0].text);
}

async function patchContexts(contexts) {
  const res = await patchTenant(tenant.id, { defaults: { contexts } });
  assert.equal(res.status, 200, await res.text());
}

describe("state survives between the runs of one context", () => {
  test("Python: variables, imports and definitions", async () => {
    const first = await runPy("import json\nx = 41\ndef twice(v):\n    return 2 * v\nprint('set')", { context: "py-a" });
    assert.equal(first.structuredContent.stdout, "set\n", shown(first));
    assert.deepEqual(first.structuredContent.context, { name: "py-a", runtime: "pyodide@314", fresh: true, kept: true });
    assert.equal(first.structuredContent.usage.contextRuns, 0);

    const second = await runPy("print(x + 1, twice(x), json.dumps([x]))", { context: "py-a" });
    assert.equal(second.structuredContent.stdout, "42 82 [41]\n", shown(second));
    assert.deepEqual(second.structuredContent.context, { name: "py-a", runtime: "pyodide@314", fresh: false, kept: true });
    assert.equal(second.structuredContent.usage.contextRuns, 1);
    // The runner's own setup (the cwd's makedirs) is no write of the run's: none was denied.
    assert.equal(second.structuredContent.usage.denied, 0, "the context's second run reported a denied write it never made");

    // A cell's last expression is shown, as a notebook shows it; a trailing `;` hides it.
    const cell = await runPy("y = x * 2\n{'y': y}", { context: "py-a" });
    assert.deepEqual(cell.structuredContent.displays, [{ mimeType: "application/json", value: { y: 82 } }], shown(cell));
    assert.equal(cell.content.at(-1).text, '{"y": 82}');
    const hidden = await runPy("y;", { context: "py-a" });
    assert.equal(hidden.structuredContent.displays, undefined, shown(hidden));
  });

  test("JavaScript: top-level declarations of a script, and globalThis from a module", async () => {
    const first = await runJs("var y = 5; let z = 2; function triple(v) { return 3 * v }\nconsole.log('set')", { context: "js-a" });
    assert.equal(first.structuredContent.stdout, "set\n", shown(first));
    assert.equal(first.structuredContent.context.fresh, true);
    const second = await runJs("console.log(y * z, triple(z))", { context: "js-a" });
    assert.equal(second.structuredContent.stdout, "10 6\n", shown(second));
    assert.equal(second.structuredContent.context.fresh, false);
    const cell = await runJs("[y, z].map(triple)", { context: "js-a" });
    assert.deepEqual(cell.structuredContent.displays, [{ mimeType: "application/json", value: [15, 6] }], shown(cell));

    // A module (top-level await): its own declarations stay its own, globalThis carries over.
    const module = await runJs("await Promise.resolve();\nglobalThis.fromModule = y + 1;\nconsole.log('module')", { context: "js-a" });
    assert.equal(module.structuredContent.stdout, "module\n", shown(module));
    const third = await runJs("console.log(fromModule)", { context: "js-a" });
    assert.equal(third.structuredContent.stdout, "6\n", shown(third));
    assert.equal(third.structuredContent.usage.contextRuns, 4);
  });

  test("the workspace a context's run sees is the relay session's, as it is now", async () => {
    await runPy("open('/tmp/ctx.txt', 'w').write('one')", { context: "py-a" });
    await client.callTool({ name: "write", arguments: { path: "/tmp/ctx.txt", content: "two", mode: "overwrite" } });
    const read = await runPy("print(open('/tmp/ctx.txt').read(), x)", { context: "py-a" });
    assert.equal(read.structuredContent.stdout, "two 41\n", shown(read));
  });
});

describe("a context shares nothing with other runs", () => {
  test("another context and a run without one see none of its names", async () => {
    const other = await runPy("print('x' in globals(), 'twice' in globals())", { context: "py-b" });
    assert.equal(other.structuredContent.stdout, "False False\n", shown(other));
    const none = await runPy("print('x' in globals(), 'twice' in globals())");
    assert.equal(none.structuredContent.stdout, "False False\n", shown(none));
    assert.equal(none.structuredContent.context, undefined);

    const jsNone = await runJs("console.log(typeof y, typeof triple, typeof fromModule)");
    assert.equal(jsNone.structuredContent.stdout, "undefined undefined undefined\n", shown(jsNone));

    // The same name in the other runtime is another context, and sees nothing of js-a either.
    const crossed = await runJs("console.log(typeof x, typeof y, typeof triple, typeof fromModule)", { context: "py-a" });
    assert.equal(crossed.structuredContent.stdout, "undefined undefined undefined undefined\n", shown(crossed));
    assert.equal(crossed.structuredContent.context.runtime, "quickjs@0.32");
  });

  test("relay://contexts lists the live ones", async () => {
    const { contexts, maxPerSession, idleMs } = await liveContexts();
    assert.equal(maxPerSession, 4);
    assert.equal(idleMs, 15 * 60 * 1000);
    const names = contexts.map((c) => `${c.runtime}/${c.name}`).sort();
    assert.deepEqual(names, ["pyodide@314/py-a", "pyodide@314/py-b", "quickjs@0.32/js-a", "quickjs@0.32/py-a"]);
    const pyA = contexts.find((c) => c.name === "py-a" && c.runtime === "pyodide@314");
    assert.ok(pyA.runs >= 3 && pyA.ageMs >= pyA.idleMs && typeof pyA.tab === "string" && pyA.memPeakMb > 0, JSON.stringify(pyA));
  });
});

describe("a context's end", () => {
  test("the limit: a new context past contexts.maxPerSession (4) is refused, a live one still runs", async () => {
    assert.equal((await liveContexts()).contexts.length, 4);
    try {
      const refused = await runPy("print(1)", { context: "one-too-many" });
      assert.equal(refused.isError, true);
      assert.equal(refused.structuredContent.error.name, "ValidationError");
      assert.match(refused.structuredContent.error.message, /contexts\.maxPerSession/);
      assert.match(refused.structuredContent.error.message, /reset: true/);
      assert.match(refused.structuredContent.error.message, /py-a/);
      const still = await runPy("print(x)", { context: "py-a" });
      assert.equal(still.structuredContent.stdout, "41\n", shown(still));
    } finally {
      await patchContexts({ maxPerSession: 8 }); // room for the tests below
    }
  });

  test("reset: true starts the context afresh", async () => {
    const reset = await runPy("print('x' in globals())", { context: "py-a", reset: true });
    assert.equal(reset.structuredContent.stdout, "False\n", shown(reset));
    assert.deepEqual(reset.structuredContent.context, { name: "py-a", runtime: "pyodide@314", fresh: true, kept: true, reset: true });
    assert.equal(reset.structuredContent.usage.contextRuns, 0);
  });

  test("a timeout kills the context; the next call starts afresh and says why", async () => {
    await runJs("var kept = 'yes'", { context: "js-t" });
    const timedOut = await runJs("for (;;) {}", { context: "js-t", policy: { limits: { timeoutMs: 1500 } } });
    assert.equal(timedOut.structuredContent.error.name, "Timeout", shown(timedOut));
    assert.equal(timedOut.structuredContent.context.kept, false);
    assert.match(timedOut.content[0].text, /next run in it starts afresh/);

    const next = await runJs("console.log(typeof kept)", { context: "js-t" });
    assert.equal(next.structuredContent.stdout, "undefined\n", shown(next));
    assert.equal(next.structuredContent.context.fresh, true);
    assert.match(next.structuredContent.context.lost, /Timeout/);
    assert.match(next.content[0].text, /context "js-t" was lost/);
    // Told once: the run after that is an ordinary one of the new context.
    const again = await runJs("console.log(1)", { context: "js-t" });
    assert.equal(again.structuredContent.context.lost, undefined, shown(again));
  });

  test("an exception or an exit code keeps the context", async () => {
    const raised = await runPy("kept = 7\nraise ValueError('boom')", { context: "py-b" });
    assert.equal(raised.structuredContent.exitCode, 1);
    assert.equal(raised.structuredContent.context.kept, true);
    const next = await runPy("print(kept)", { context: "py-b" });
    assert.equal(next.structuredContent.stdout, "7\n", shown(next));
  });

  test("idle expiry: a context unused for contexts.idleMs ends, and the next call says so", async () => {
    await runPy("idle = 1", { context: "py-idle" });
    await patchContexts({ idleMs: 1000 });
    try {
      await new Promise((resolve) => setTimeout(resolve, 2500));
      const next = await runPy("print('idle' in globals())", { context: "py-idle" });
      assert.equal(next.structuredContent.stdout, "False\n", shown(next));
      assert.match(next.structuredContent.context.lost, /idle for \d+ s/);
    } finally {
      await patchContexts({ idleMs: 15 * 60 * 1000 });
    }
  });

  test("a run admitted before its context's idle time, waiting behind a long run, still finds it", async () => {
    // The page ends a context on its own clock (idle time + 5 s), and the relay sends one run
    // at a time: a run it admitted while the context was live waits in its queue while the
    // page runs the long one, and must not find the context ended when it comes.
    await patchContexts({ idleMs: 2000 });
    try {
      await runJs("var held = 'kept'", { context: "js-wait" });
      const long = runJs("await new Promise((resolve) => setTimeout(resolve, 9000)); console.log('long done')");
      await new Promise((resolve) => setTimeout(resolve, 800));
      const waiting = await runJs("console.log(typeof held === 'undefined' ? 'gone' : held)", { context: "js-wait" });
      assert.equal((await long).structuredContent.stdout, "long done\n");
      assert.equal(waiting.structuredContent.stdout, "kept\n", shown(waiting));
      assert.equal(waiting.structuredContent.context.fresh, false, shown(waiting));
    } finally {
      await patchContexts({ idleMs: 15 * 60 * 1000 });
    }
  });

  test("bad names and a reset without a context are refused with ValidationError", async () => {
    for (const context of ["", "-lead", "a b", "x".repeat(65), "caf\u00e9", "a/b"]) {
      const refused = await runPy("print(1)", { context });
      assert.equal(refused.structuredContent?.error?.name, "ValidationError", `${JSON.stringify(context)}: ${shown(refused)}`);
      assert.match(refused.structuredContent.error.message, /1 to 64 characters/);
    }
    const reset = await runJs("console.log(1)", { reset: true });
    assert.equal(reset.structuredContent.error.name, "ValidationError");
    assert.match(reset.structuredContent.error.message, /reset: only means something with `context`/);
  });

  test("a context is lost with its tab: after a reload the next call says so", async () => {
    await runPy("here = 1", { context: "py-tab" });
    const from = executor.lines.length;
    await executor.page.reload();
    await waitForLine(executor.lines, /^Ready\. Waiting for execution requests/, 30_000, from);
    const next = await runPy("print('here' in globals())", { context: "py-tab" });
    assert.equal(next.structuredContent.stdout, "False\n", shown(next));
    assert.equal(next.structuredContent.context.fresh, true);
    assert.match(next.structuredContent.context.lost, /its tab \S+ went away/);
  });
});

describe("a context's code cannot reach outside it", () => {
  test("what it patches and what it leaves running stay in its own worker", async () => {
    const code = [
      "import asyncio, builtins",
      "builtins.print = lambda *a, **k: None",
      "def late():",
      "    open('/tmp/late.txt', 'w').write('late')",
      "asyncio.get_event_loop().call_later(0.3, late)",
    ].join("\n");
    const attack = await runPy(code, { context: "py-attack" });
    assert.equal(attack.structuredContent.exitCode, 0, shown(attack));
    // (A JavaScript run lasts while it has timers, as a Node program does: nothing lingers.)
    await runJs("globalThis.console.log = () => {}; Object.prototype.polluted = 1", { context: "js-attack" });
    await new Promise((resolve) => setTimeout(resolve, 1000));

    // Runs without a context print, and the late write reached no workspace.
    const py = await runPy("import os\nprint('visible', os.path.exists('/tmp/late.txt'))");
    assert.equal(py.structuredContent.stdout, "visible False\n", shown(py));
    const js = await runJs("console.log('visible', ({}).polluted)");
    assert.equal(js.structuredContent.stdout, "visible undefined\n", shown(js));
    const read = await client.callTool({ name: "read", arguments: { path: "/tmp/late.txt" } });
    assert.equal(read.isError, true, shown(read));
    // Nor does the context's own next run see it: its workspace is the relay session's.
    const again = await runPy("import os, sys\nsys.stdout.write(str(os.path.exists('/tmp/late.txt')))", { context: "py-attack" });
    assert.equal(again.structuredContent.stdout, "False", shown(again));
  });
});
