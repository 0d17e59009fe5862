// Faults around the run lifecycle, end to end: a tab that dies while idle, the order of
// concurrent calls, and the relay itself restarting while a run is in flight.

import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { launchBrowser, openExecutor, waitForLine } from "./lib/browser.mjs";
import { startWorker } from "./lib/local-worker.mjs";
import { connectClient, readRelaySession } from "./lib/mcp-client.mjs";
import { createTenant } from "./lib/relay.mjs";

let browser;

before(async () => {
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
});

const runJs = (client, code, policy) =>
  client.callTool({ name: "run_js", arguments: { code, ...(policy && { policy }) } });

test("a tab killed while idle is not a mid-run failure: the run goes to another tab, or NoExecutorAttached", async () => {
  const { key } = await createTenant("idle-kill", { queue: { attachWaitMs: 500 } });
  const client = await connectClient(key);
  const survivor = await openExecutor(browser, key);
  const victim = await openExecutor(browser, key); // the newest tab gets the next run
  try {
    await victim.context.close();
    const served = await runJs(client, "console.log('served')");
    assert.equal(served.structuredContent.stdout, "served\n", JSON.stringify(served.structuredContent));
    await survivor.context.close();
    const result = await runJs(client, "console.log('nobody')");
    assert.equal(result.structuredContent.error?.name, "NoExecutorAttached", JSON.stringify(result.structuredContent));
    assert.doesNotMatch(result.structuredContent.error.message, /went away mid-run/);
  } finally {
    await client.close();
  }
});

test("concurrent calls run in the order the relay session admitted them", async () => {
  const { key } = await createTenant("fifo");
  const tab = await openExecutor(browser, key);
  const client = await connectClient(key);
  try {
    // Calls sent together may reach the relay in any order (the network, the Worker's key
    // lookup): what holds is that they start in the order the Session DO admitted them, which
    // the audit records. The first capsule is new (it must be stored before it can start).
    const busy = (label) => `const t = Date.now(); while (Date.now() - t < 50) {} console.log("${label}")`;
    const calls = [];
    for (const label of [`first-${Date.now()}`, "second", "third"]) {
      calls.push(runJs(client, busy(label)));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await Promise.all(calls);
    const admitted = (await readRelaySession(client)).recentRuns
      .slice(0, 3)
      .sort((a, b) => a.queuedMs - b.queuedMs)
      .map((run) => run.capsuleHash);
    const started = tab.lines.map((line) => /^Received capsule ([0-9a-f]{64})/.exec(line)?.[1]).filter(Boolean);
    assert.deepEqual(started.slice(-3), admitted);
  } finally {
    await client.close();
    await tab.context.close();
  }
});

test("a restart mid-run: the client resumes its stream and gets one clear error, the tab stops the run and serves again", async () => {
  const stateDir = await mkdtemp(path.join(tmpdir(), "relay-restart-"));
  const port = Number(process.env.RELAY_RESTART_PORT ?? 8796);
  let worker = await startWorker({ port, stateDir });
  try {
    const { key } = await createTenant("restart", undefined, worker.url);
    const tab = await openExecutor(browser, key, "default", worker.url);
    const client = await connectClient(key, "default", "before-restart", worker.url);
    const pending = runJs(client, "for (;;) {}", { limits: { timeoutMs: 60_000 } });
    await waitForLine(tab.lines, /^Executing capsule/);

    const killed = Date.now();
    const seen = tab.lines.length;
    await worker.stop();
    worker = await startWorker({ port, stateDir });
    // The SDK resumes the stream (GET + Last-Event-ID) after the retry the server gave it.
    const result = await pending;
    const waited = Date.now() - killed;
    assert.ok(waited < 20_000, `the client waited ${waited} ms, the run's timeout is 60 s`);
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent.error.name, "Internal");
    assert.match(result.structuredContent.error.message, /relay restarted/);

    // The tab reconnects by itself; its results for the forgotten run are refused, so it stops it.
    await waitForLine(tab.lines, /refused results of run .*; stopping it/, 60_000);
    await waitForLine(tab.lines, /^Ready\./, 60_000, seen);
    const after = await connectClient(key, "default", "after-restart", worker.url);
    try {
      const [run] = (await readRelaySession(after)).recentRuns;
      assert.equal(run.errorName, "Internal", JSON.stringify(run));
      assert.match(run.errorMessage, /relay restarted/);
      const again = await runJs(after, "console.log('served again')");
      assert.equal(again.structuredContent.stdout, "served again\n", JSON.stringify(again.structuredContent));
    } finally {
      await after.close();
      await client.close();
      await tab.context.close();
    }
  } finally {
    await worker.stop();
    await rm(stateDir, { recursive: true, force: true });
  }
});
