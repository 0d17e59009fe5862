// Faults around the run lifecycle, end to end: a tab that dies while idle, a tab that quits
// without saying goodbye (it leaves by its lease), a tab busy with long page work (never taken
// for gone), the order of concurrent calls, and the relay itself restarting while a run is in
// flight.

import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { launchBrowser, openExecutor, waitForLine } from "./lib/browser.mjs";
import { startDeafProxy } from "./lib/deaf-proxy.mjs";
import { startWorker } from "./lib/local-worker.mjs";
import { connectClient, readRelaySession } from "./lib/mcp-client.mjs";
import { BASE, createTenant } from "./lib/relay.mjs";

let browser;

before(async () => {
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
});

const runJs = (client, code, policy, options) =>
  client.callTool({ name: "run_js", arguments: { code, ...(policy && { policy }) } }, undefined, options);

// A tab that stops renewing its lease is dropped once the lease lapses (10 s, run::lease) and
// the relay next looks (a tick, every 2 s, or any request such as this read): README "Tabs and
// their leases". Past this (and some slack for a loaded machine) it is a ghost. The tabs that
// quit here reach the Worker through a proxy that never tells it they went and refuses their
// goodbyes (deaf-proxy.mjs): only their leases can tell.
const TAB_LEAVES_WITHIN_MS = 12_000;
const LOADED_MACHINE_SLACK_MS = 13_000;

/** Polls relay://session until it lists `count` tabs; returns how long that took. */
async function tabsBecome(client, count, since) {
  for (;;) {
    const { executor } = await readRelaySession(client);
    const waited = Date.now() - since;
    if (executor.tabs === count) return waited;
    assert.ok(waited < TAB_LEAVES_WITHIN_MS + LOADED_MACHINE_SLACK_MS, `still ${executor.tabs} tabs listed ${waited} ms after the quit`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Waits up to `ms` for the proxy to have refused one goodbye; the caller asserts the count. */
async function goodbyeSeen(deaf, ms) {
  for (const until = Date.now() + ms; deaf.goodbyes.length === 0 && Date.now() < until; ) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test("a tab whose browser quits leaves relay://session within its lease, with no one else connected", async () => {
  const { key } = await createTenant("quit-alone");
  const client = await connectClient(key);
  const deaf = await startDeafProxy(BASE);
  const own = await launchBrowser();
  try {
    await openExecutor(own, key, "default", deaf.url);
    assert.equal((await readRelaySession(client)).executor.tabs, 1);
    const quit = Date.now();
    await own.close();
    const waited = await tabsBecome(client, 0, quit);
    console.log(`# a quit browser's tab left relay://session after ${waited} ms (goodbyes refused: ${deaf.goodbyes.length})`);
  } finally {
    await own.close();
    await deaf.close();
    await client.close();
  }
});

test("a tab closed whose goodbye fails leaves relay://session and the other tab's page within its lease", async () => {
  const { key } = await createTenant("quit-ghost");
  const client = await connectClient(key);
  const deaf = await startDeafProxy(BASE);
  const survivor = await openExecutor(browser, key);
  const ghost = await openExecutor(browser, key, "default", deaf.url);
  try {
    await survivor.page.waitForFunction(() => /^2 attached/.test(document.getElementById("tabs").textContent));
    const closed = Date.now();
    const gone = ghost.page.waitForEvent("close");
    await ghost.page.close({ runBeforeUnload: true }); // as a person closes it: pagehide says goodbye
    await gone;
    // The goodbye is a keepalive fetch sent as the page goes; closing its browser context at once
    // can cancel it before it leaves (seen under CI's load), so the context goes once it is sent.
    await goodbyeSeen(deaf, 5_000);
    await ghost.context.close();
    const waited = await tabsBecome(client, 1, closed);
    assert.equal(deaf.goodbyes.length, 1, "the tab said goodbye, and it was lost");
    await survivor.page.waitForFunction(() => document.getElementById("tabs").textContent === "1 (this tab)", null, { timeout: 5_000 });
    console.log(`# a closed tab whose goodbye failed left after ${waited} ms (goodbyes refused: ${deaf.goodbyes.length})`);
    const served = await runJs(client, "console.log('served')");
    assert.equal(served.structuredContent.stdout, "served\n", JSON.stringify(served.structuredContent));
  } finally {
    await deaf.close();
    await client.close();
    await survivor.context.close();
  }
});

test("a tab whose connections stop delivering attaches anew: a run sent meanwhile runs within seconds, not at its deadline, and its contexts live on", { timeout: 150_000 }, async () => {
  // The proxy stalls every connection the tab has open (its command stream, results socket and
  // lease socket) and closes none: the relay's writes still succeed, and the tab's lease goes
  // on by POST. Only the command stream's silence (no heartbeat) can tell the tab.
  const { key } = await createTenant("half-open");
  const client = await connectClient(key);
  const deaf = await startDeafProxy(BASE);
  const tab = await openExecutor(browser, key, "default", deaf.url);
  try {
    // A run first, so QuickJS is loaded: a runtime fetch that the browser sends on one of its
    // idle keep-alive sockets would stall with them, which is not what this test is about.
    // It runs in a context, which the page keeps through its new attach (it names its old tab id).
    const inContext = (code) => client.callTool({ name: "run_js", arguments: { code, context: "kept" } }, undefined, { timeout: 90_000 });
    const warm = await inContext("var before = 'the stall'; console.log('warm')");
    assert.equal(warm.structuredContent.stdout, "warm\n", JSON.stringify(warm.structuredContent));
    const [stalledTab] = (await readRelaySession(client)).executor.tabIds;
    const seen = tab.lines.length;
    const stalled = Date.now();
    deaf.stall();
    // Its deadline is minutes away: the call gives up long before.
    const result = await runJs(client, "console.log('served')", undefined, { timeout: 90_000 });
    const waited = Date.now() - stalled;
    assert.equal(result.structuredContent.stdout, "served\n", JSON.stringify(result.structuredContent));
    const noticed = await waitForLine(tab.lines, /the command stream brought nothing for \d+ ms/, 0, seen);
    const { tabIds } = (await readRelaySession(client)).executor;
    assert.equal(tabIds.length, 1, JSON.stringify(tabIds));
    assert.notEqual(tabIds[0], stalledTab, "the tab attached anew");
    console.log(`# a run sent as the tab's connections stalled ran ${waited} ms later (${noticed})`);
    const after = await inContext("console.log(before)");
    assert.equal(after.structuredContent.stdout, "the stall\n", JSON.stringify(after.structuredContent));
    assert.equal(after.structuredContent.context.fresh, false);
  } finally {
    await deaf.close();
    await client.close();
    await tab.context.close();
  }
});

test("a tab that attaches anew mid-run brings its workspace up to date only once the run's writes are in: a later run reads the last one", { timeout: 150_000 }, async () => {
  // Run R writes a file twice; the relay session commits the first write, and the second's
  // commit is held here while the tab's connections stall. The tab attaches anew (a new
  // `hello`) with R still running. Had it synced its copy then, the first write's bytes (the
  // relay session's latest) would overwrite the second's, and the second's commit, landing
  // after, would mark the stale bytes as the relay session's: every later run in this tab
  // would read "first", which the relay session no longer holds.
  const { key } = await createTenant("reattach-mid-run");
  const client = await connectClient(key);
  const deaf = await startDeafProxy(BASE);
  let release;
  const held = new Promise((resolve) => (release = resolve));
  let secondCommitHeld;
  const secondCommit = new Promise((resolve) => (secondCommitHeld = resolve));
  const answers = [];
  // Sent from the test's side (route.fetch), so not on a stalled connection of the browser.
  const holdSecondCommit = (context) =>
    context.route("**/workspace/commit", async (route) => {
      if (answers.push(null) === 2) {
        secondCommitHeld();
        await held;
      }
      const response = await route.fetch();
      const body = await response.text();
      answers[answers.length - 1] = `${response.status()} ${body}`;
      await route.fulfill({ response, body });
    });
  const tab = await openExecutor(browser, key, "default", deaf.url, { beforeOpen: holdSecondCommit });
  const path = "/tmp/reattached.txt";
  try {
    const warm = await runJs(client, "console.log('warm')", undefined, { timeout: 90_000 });
    assert.equal(warm.structuredContent.stdout, "warm\n", JSON.stringify(warm.structuredContent));
    const writesTwice = `import fs from "fs";
      fs.writeFileSync(${JSON.stringify(path)}, "first");
      await new Promise((resolve) => setTimeout(resolve, 1500));
      fs.writeFileSync(${JSON.stringify(path)}, "second");
      await new Promise((resolve) => setTimeout(resolve, 15000));`;
    const run = runJs(client, writesTwice, undefined, { timeout: 120_000 });
    await secondCommit;
    const seen = tab.lines.length;
    deaf.stall();
    await waitForLine(tab.lines, /^Connected to server/, 60_000, seen);
    // A sync at the new hello takes well under a second here; the fixed page waits for the run.
    await waitForLine(tab.lines, /^Workspace: \d+ file\(s\) from the relay session/, 3_000, seen).catch(() => {});
    release();
    await run; // it ends with its tab's old id (an Internal error); what matters is its files
    assert.match(answers[1] ?? "", /^200 /, `the second write's commit: ${answers[1]}`);
    assert.doesNotMatch(answers[1], /"error"/, `the second write's commit: ${answers[1]}`);
    const stored = await client.callTool({ name: "read", arguments: { path } });
    assert.equal(stored.structuredContent.content, "second", JSON.stringify(stored.structuredContent));
    const reads = await runJs(client, `import fs from "fs"; console.log(fs.readFileSync(${JSON.stringify(path)}, "utf8"))`, undefined, { timeout: 90_000 });
    assert.equal(reads.structuredContent.stdout, "second\n", JSON.stringify(reads.structuredContent));
  } finally {
    release();
    await deaf.close();
    await client.close();
    await tab.context.close();
  }
});

test("a run queued in a tab behind long page work runs late: the busy tab is never taken for gone", async () => {
  // Run A times out at the relay while its tab is still uploading A's /out file (held here):
  // the relay sends run B, which the tab acknowledges and keeps queued behind that upload for
  // longer than the relay once let an acknowledged run stay silent (10 s).
  const HOLD_MS = 35_000;
  const { key } = await createTenant("busy-tab");
  let release;
  const held = new Promise((resolve) => (release = resolve));
  const holdUploads = (context) =>
    context.route("**/files/**", async (route) => {
      if (route.request().method() === "PUT") await held;
      return route.continue();
    });
  const tab = await openExecutor(browser, key, "default", undefined, { beforeOpen: holdUploads });
  const client = await connectClient(key);
  const timer = setTimeout(release, HOLD_MS);
  try {
    const started = Date.now();
    const writesOut = 'import fs from "fs"; fs.writeFileSync("/out/a.txt", "a"); console.log("a")';
    const a = runJs(client, writesOut, { limits: { timeoutMs: 1_000 } }, { timeout: 120_000 });
    await waitForLine(tab.lines, /^Executing capsule/);
    const notes = [];
    const onprogress = ({ message }) => notes.push(message);
    const b = runJs(client, "console.log('b ran late')", undefined, { timeout: 120_000, onprogress });
    const first = await a;
    assert.equal(first.structuredContent.error?.name, "Timeout", JSON.stringify(first.structuredContent));
    const second = await b;
    const waited = Date.now() - started;
    assert.equal(second.structuredContent.stdout, "b ran late\n", JSON.stringify(second.structuredContent));
    assert.ok(notes.some((note) => /^queued \(behind run r_\w+, which is uploading its \/out files/.test(note)), JSON.stringify(notes));
    console.log(`# run B waited behind A's page work and ran ${waited} ms after A was called (upload held ${HOLD_MS} ms)`);
  } finally {
    clearTimeout(timer);
    release();
    await client.close();
    await tab.context.close();
  }
});

test("a run sent to a tab whose page thread is blocked runs once the page is free: its lease holds meanwhile", async () => {
  // The page's own thread is stuck for longer than the relay once waited for an
  // acknowledgement (10 s): the tab's lease is renewed by its lease worker all the while.
  const BLOCK_MS = 20_000;
  const { key } = await createTenant("blocked-tab");
  const tab = await openExecutor(browser, key);
  const client = await connectClient(key);
  try {
    const { tabIds } = (await readRelaySession(client)).executor;
    const blocked = tab.page.evaluate((ms) => {
      const until = Date.now() + ms;
      while (Date.now() < until);
    }, BLOCK_MS);
    blocked.catch(() => {}); // awaited below; a failure before that is the test's own
    await new Promise((resolve) => setTimeout(resolve, 500)); // the block has begun
    const started = Date.now();
    const result = await runJs(client, "console.log('after the block')", undefined, { timeout: 120_000 });
    assert.equal(result.structuredContent.stdout, "after the block\n", JSON.stringify(result.structuredContent));
    await blocked;
    console.log(`# a run sent to a blocked page finished ${Date.now() - started} ms after it was called (page blocked ${BLOCK_MS} ms)`);
    assert.deepEqual((await readRelaySession(client)).executor.tabIds, tabIds, "the same tab, never dropped");
  } finally {
    await client.close();
    await tab.context.close();
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
    // Newest first, in admission order even for runs admitted in the same millisecond.
    const admitted = (await readRelaySession(client)).recentRuns
      .slice(0, 3)
      .reverse()
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
