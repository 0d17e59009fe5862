// What an idle tab costs (issue 32): a real executor page attached and left alone for a minute
// (RELAY_IDLE_MS to change it). The relay session's DO counts why it ran code
// (`relay_do_wakeups_total{kind}`, `wakeups` in the JSON of /admin/metrics); over the idle
// minute it may run only for requests: the metrics request that reads the counter and the
// page's own reads of relay://session (the Worker holds the tab's SSE stream and writes its
// keep-alives, the lease socket's pings are answered by the runtime, and no deadline is due:
// no tick, no alarm, no socket message). Then a run starts on that tab at
// once, and a tab whose browser quits while idle, unheard of since, is gone at the next call
// after its lease (10 s): nothing needs to wake the DO to find that out.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { launchBrowser, openExecutor } from "./lib/browser.mjs";
import { startDeafProxy } from "./lib/deaf-proxy.mjs";
import { connectClient, readRelaySession } from "./lib/mcp-client.mjs";
import { LEGACY, initialize, legacyHeaders, mcpUrl, modernCall, readUntil } from "./lib/mcp-http.mjs";
import { BASE, createTenant, devVars } from "./lib/relay.mjs";

const IDLE_MS = Number(process.env.RELAY_IDLE_MS ?? 60_000);
// Over the idle time, by kind: the metrics request that reads the counter after it, and the
// page's own read of relay://session for its list of clients (executor.js, every 30 s); no
// tick, no alarm, no socket message (lease pings are answered by the runtime).
const PAGE_READS_EVERY_MS = 30_000;
const IDLE_BOUND = { request: 1 + Math.ceil(IDLE_MS / PAGE_READS_EVERY_MS), socket_message: 0, alarm: 0, tick: 0 };
const TAB_LEASE_MS = 10_000;
// How long a relay session is left idle for workerd to evict its DO (RELAY_EVICTION_WAIT_MS).
const EVICTION_WAIT_MS = Number(process.env.RELAY_EVICTION_WAIT_MS ?? 40_000);

let browser;
let tenant;
let key;
let client;

before(async () => {
  ({ key, tenant } = await createTenant("idle"));
  browser = await launchBrowser();
});

after(async () => {
  await client?.close();
  await browser?.close();
});

/** Tenant `id`'s metrics (JSON), merged over its relay sessions. */
async function metrics(id) {
  const res = await fetch(`${BASE}/admin/metrics?tenant=${id}`, {
    headers: { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, accept: "application/json" },
  });
  assert.equal(res.status, 200);
  return res.json();
}

/** The relay session's wake-ups by kind. */
const wakeups = async () => (await metrics(tenant.id)).wakeups;

/** A run_js call over 2026-07-28 HTTP (stateless: no stream is left open between calls). */
async function runJs(code) {
  const { message } = await modernCall(key, "tools/call", { name: "run_js", arguments: { code } });
  return message.result;
}

test("an attached tab left idle wakes its relay session no more than the bound, and a run starts on it at once after", async () => {
  const tab = await openExecutor(browser, key);
  try {
    const warm = await runJs("console.log('warm')");
    assert.equal(warm.structuredContent.stdout, "warm\n", JSON.stringify(warm.structuredContent));
    // Its runtimes loaded (their readiness reported), so the tab has nothing left to say.
    await tab.page.waitForFunction(() => document.getElementById("runtimes").dataset.ready === "true", null, { timeout: 120_000 });
    // The run's own wake-ups (the ticks that keep the DO awake while a run is in hand, the
    // tab's batches) settle first.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const start = await wakeups();
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    const end = await wakeups();
    const sent = Date.now();
    const again = await runJs("console.log('after the idle minute')");
    console.log(`# run_js after the idle minute answered in ${Date.now() - sent} ms`);
    const perMinute = Object.fromEntries(
      Object.keys(end).map((kind) => [kind, Math.round(((end[kind] - (start[kind] ?? 0)) * 60_000) / IDLE_MS)]),
    );
    console.log(`# wake-ups of the relay session's DO per idle minute, by kind: ${JSON.stringify(perMinute)} (bound ${JSON.stringify(IDLE_BOUND)})`);
    for (const [kind, bound] of Object.entries(IDLE_BOUND)) {
      const woke = end[kind] - (start[kind] ?? 0);
      assert.ok(woke <= bound, `${kind}: ${woke} wake-ups in ${IDLE_MS} ms idle, bound ${bound}`);
    }
    assert.equal(again.structuredContent.stdout, "after the idle minute\n", JSON.stringify(again.structuredContent));
    assert.equal(again.structuredContent.executor, "tab");
  } finally {
    await tab.context.close();
  }
});

test("a run answered within a tick writes no alarm; a run in hand past a tick sets it, and lets it go at its end", async () => {
  // An alarm moved earlier (from none, at every run's admission) held the run's command for the
  // alarm scheduler (docs/BENCHMARKS.md): the vigil ticks a short run's deadlines instead.
  const own = await createTenant("alarm-writes");
  const tab = await openExecutor(browser, own.key);
  const run = async (code) => (await modernCall(own.key, "tools/call", { name: "run_js", arguments: { code } })).message.result.structuredContent;
  const alarmWrites = async () => (await metrics(own.tenant.id)).alarmWrites;
  try {
    assert.equal((await run("console.log('warm')")).stdout, "warm\n");
    await tab.page.waitForFunction(() => document.getElementById("runtimes").dataset.ready === "true", null, { timeout: 120_000 });
    await new Promise((resolve) => setTimeout(resolve, 3_000)); // the warm-up's ticks end
    const start = await alarmWrites();
    // Each run alone: a tick that fell while another run of a burst was in hand would set it.
    for (let i = 0; i < 3; i++) {
      assert.equal((await run(`console.log(${i})`)).stdout, `${i}\n`);
      await new Promise((resolve) => setTimeout(resolve, 2_500));
    }
    const quick = await alarmWrites();
    console.log(`# alarm writes: before ${JSON.stringify(start)}, after 3 quick runs ${JSON.stringify(quick)}`);
    assert.deepEqual(quick, start, "runs answered within a tick write no alarm");
    const slow = await run("const t = Date.now(); while (Date.now() - t < 3000); console.log('slow')");
    assert.equal(slow.stdout, "slow\n", JSON.stringify(slow));
    const end = await alarmWrites();
    console.log(`# alarm writes after a 3 s run: ${JSON.stringify(end)}`);
    assert.ok(end.set > quick.set, "a run in hand past a tick sets the alarm");
    assert.ok(end.delete > quick.delete, "and it is let go when no run is in hand");
  } finally {
    await tab.context.close();
  }
});

test("a tab whose browser quits while idle is gone at the next call after its lease, with nothing ticking", async () => {
  client = await connectClient(key);
  const deaf = await startDeafProxy(BASE);
  const own = await launchBrowser();
  try {
    await openExecutor(own, key, "default", deaf.url);
    assert.equal((await readRelaySession(client)).executor.tabs, 1);
    await own.close();
    const quit = Date.now();
    await new Promise((resolve) => setTimeout(resolve, TAB_LEASE_MS + 2_000));
    const start = await wakeups();
    const { executor } = await readRelaySession(client);
    const end = await wakeups();
    console.log(`# the quit tab was gone at the first call ${Date.now() - quit} ms after the quit; that call woke the DO ${end.request - start.request} times`);
    assert.equal(executor.tabs, 0, "the lease lapsed: the next call drops the tab");
    const fresh = await openExecutor(browser, key);
    try {
      const ran = await runJs("console.log('on the fresh tab')");
      assert.equal(ran.structuredContent.stdout, "on the fresh tab\n", JSON.stringify(ran.structuredContent));
    } finally {
      await fresh.context.close();
    }
  } finally {
    await own.close();
    await deaf.close();
  }
});

test("a deadline with nothing open to tick the machine is kept by the DO itself", async () => {
  // A task waits for a tab that never comes: its attach wait is the only deadline, and no
  // stream is open (the task's handle is answered at once). The run must end at that deadline,
  // not at the next request: the metrics read after it does not tick the machine.
  const lonely = await createTenant("alarm", { queue: { attachWaitMs: 1000 } });
  const declaring = { "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } } };
  const { message } = await modernCall(lonely.key, "tools/call", { name: "run_js", arguments: { code: "1" }, _meta: declaring });
  assert.equal(message.result.resultType, "task", JSON.stringify(message));
  await new Promise((resolve) => setTimeout(resolve, 4_000));
  const { runs, wakeups: woke } = await metrics(lonely.tenant.id);
  console.log(`# a task's attach wait, kept with nothing open: runs ${JSON.stringify(runs)}, wake-ups ${JSON.stringify(woke)}`);
  assert.equal(runs["js|NoExecutorAttached"], 1, "the run ended at its deadline");
  assert.ok(woke.alarm + woke.tick >= 1, "woken by its alarm, or kept awake while the run was in hand");
});

test("a legacy client's standalone GET stream keeps no DO awake: the Worker holds it", async () => {
  // A 2025-era client's server stream carries nothing but keep-alives (we send nothing
  // unprompted), every 15 s: written by the Worker, they wake no DO.
  const legacy = await createTenant("legacy-stream");
  const { sessionId } = await initialize(legacy.key);
  const controller = new AbortController();
  const headers = { ...legacyHeaders(legacy.key, sessionId, LEGACY), accept: "text/event-stream" };
  const res = await fetch(mcpUrl(), { headers, signal: controller.signal });
  try {
    assert.equal(res.status, 200);
    assert.match(await readUntil(res, (text) => text.includes("\n\n")), /^: keepalive\n\n/);
    const start = (await metrics(legacy.tenant.id)).wakeups;
    await readUntil(res, (text) => text.includes(": keepalive\n\n"), 20_000); // the next one, 15 s on
    const end = (await metrics(legacy.tenant.id)).wakeups;
    const woke = Object.fromEntries(Object.keys(end).map((kind) => [kind, end[kind] - start[kind]]));
    console.log(`# over a legacy GET stream's keep-alive interval the DO woke ${JSON.stringify(woke)}`);
    assert.equal(end.tick - start.tick, 0, "no timer in the DO for the stream");
    assert.equal(end.alarm - start.alarm, 0);
  } finally {
    controller.abort();
  }
});

test("a relay session whose DO is evicted while its tab idles keeps the tab, its context, its readiness and the edge runs", async () => {
  // The DO sleeps while its tab idles, and workerd evicts a DO whose only connections are
  // hibernatable sockets after some seconds with nothing to do: the next request starts a new
  // instance (counted as `start`), which has only its storage and its sockets' attachments.
  const own = await createTenant("evicted", { executor: "tab-or-edge", edge: { cpuMsPerDay: 3_600_000, runsPerMinute: 600 }, queue: { attachWaitMs: 300 } });
  const c = await connectClient(own.key);
  const run = async (code, extra = {}) => (await c.callTool({ name: "run_js", arguments: { code, ...extra } }, undefined, { timeout: 120_000 })).structuredContent;
  // The live contexts, less their ages (which the wait changes).
  const contexts = async () =>
    JSON.parse((await c.readResource({ uri: "relay://contexts" })).contents[0].text).contexts.map(({ ageMs, idleMs, ...kept }) => kept);
  const own2 = await launchBrowser();
  try {
    assert.equal((await run("console.log('at the edge')")).executor, "edge");
    const tab = await openExecutor(own2, own.key);
    await tab.page.waitForFunction(() => document.getElementById("runtimes").dataset.ready === "true", null, { timeout: 120_000 });
    const first = await run("globalThis.n = 41; console.log(n)", { context: "nb" });
    assert.equal(first.executor, "tab", JSON.stringify(first));
    await new Promise((resolve) => setTimeout(resolve, 3_000)); // the run's own wake-ups settle
    const before = { session: (await readRelaySession(c)).executor, contexts: await contexts() };
    assert.equal(before.session.tabs, 1);
    assert.equal(before.contexts.length, 1, JSON.stringify(before.contexts));
    assert.ok(before.session.runtimes, "the tab said what it has ready");
    const started = (await metrics(own.tenant.id)).wakeups.start;
    await new Promise((resolve) => setTimeout(resolve, EVICTION_WAIT_MS));
    const after = { session: (await readRelaySession(c)).executor, contexts: await contexts() };
    const starts = (await metrics(own.tenant.id)).wakeups.start - started;
    console.log(`# new instances of the relay session's DO over ${EVICTION_WAIT_MS} ms idle: ${starts}`);
    assert.ok(starts >= 1, "the DO was evicted: a new instance serves");
    assert.deepEqual(after, before, "the tab, what it has ready and its context, as before");
    const sent = Date.now();
    const again = await run("console.log(n + 1)", { context: "nb" });
    console.log(`# a run in the context after the eviction answered in ${Date.now() - sent} ms`);
    assert.equal(again.executor, "tab", JSON.stringify(again));
    assert.equal(again.stdout, "42\n", JSON.stringify(again));
    // A tab attaching now is told of the edge run from before the eviction.
    const second = await openExecutor(own2, own.key);
    await second.page.waitForFunction(() => document.querySelectorAll('#runs li[data-executor="edge"]').length === 1, null, { timeout: 30_000 });
  } finally {
    await own2.close();
    await c.close();
  }
});
