// What an idle tab costs (issue 32): a real executor page attached and left alone for a minute
// (RELAY_IDLE_MS to change it). The relay session's DO counts why it ran code
// (`relay_do_wakeups_total{kind}`, `wakeups` in the JSON of /admin/metrics); over the idle
// minute it may run only for the metrics requests that read the counter (the lease socket's
// pings are answered by the runtime, and nothing else is due). Then a run starts on that tab at
// once, and a tab whose browser quits while idle, unheard of since, is gone at the next call
// after its lease (10 s): nothing needs to wake the DO to find that out.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { launchBrowser, openExecutor } from "./lib/browser.mjs";
import { startDeafProxy } from "./lib/deaf-proxy.mjs";
import { connectClient, readRelaySession } from "./lib/mcp-client.mjs";
import { BASE, createTenant, devVars } from "./lib/relay.mjs";

const IDLE_MS = Number(process.env.RELAY_IDLE_MS ?? 60_000);
// Over the idle time, by kind: the metrics request that reads the counter after it, and the
// page's own read of relay://session for its list of clients (executor.js, every 30 s); no
// tick, no alarm, no socket message (lease pings are answered by the runtime).
const PAGE_READS_EVERY_MS = 30_000;
const IDLE_BOUND = { request: 1 + Math.ceil(IDLE_MS / PAGE_READS_EVERY_MS), socket_message: 0, alarm: 0, tick: 0 };
const TAB_LEASE_MS = 10_000;

let browser;
let tenant;
let key;
let client;

before(async () => {
  ({ key, tenant } = await createTenant("idle"));
  browser = await launchBrowser();
  client = await connectClient(key);
});

after(async () => {
  await client?.close();
  await browser?.close();
});

/** The relay sessions' wake-ups by kind, summed over the tenant's relay sessions. */
async function wakeups() {
  const res = await fetch(`${BASE}/admin/metrics?tenant=${tenant.id}`, {
    headers: { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, accept: "application/json" },
  });
  assert.equal(res.status, 200);
  return (await res.json()).wakeups;
}

const runJs = (code) => client.callTool({ name: "run_js", arguments: { code } });

test("an attached tab left idle wakes its relay session no more than the bound, and a run starts on it at once after", async () => {
  const tab = await openExecutor(browser, key);
  try {
    const warm = await runJs("console.log('warm')");
    assert.equal(warm.structuredContent.stdout, "warm\n", JSON.stringify(warm.structuredContent));
    // Its runtimes loaded (their readiness reported), so the tab has nothing left to say.
    await tab.page.waitForFunction(() => document.getElementById("runtimes").dataset.ready === "true", null, { timeout: 120_000 });
    // Only the tab stays: the client's legacy GET stream would keep the DO awake on its own
    // (counted as ticks). Then the run's own wake-ups (its stream's ticks, the tab's batches) settle.
    await client.close();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const start = await wakeups();
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    const end = await wakeups();
    client = await connectClient(key);
    const perMinute = Object.fromEntries(
      Object.keys(end).map((kind) => [kind, Math.round(((end[kind] - (start[kind] ?? 0)) * 60_000) / IDLE_MS)]),
    );
    console.log(`# wake-ups of the relay session's DO per idle minute, by kind: ${JSON.stringify(perMinute)} (bound ${JSON.stringify(IDLE_BOUND)})`);
    for (const [kind, bound] of Object.entries(IDLE_BOUND)) {
      const woke = end[kind] - (start[kind] ?? 0);
      assert.ok(woke <= bound, `${kind}: ${woke} wake-ups in ${IDLE_MS} ms idle, bound ${bound}`);
    }
    const sent = Date.now();
    const again = await runJs("console.log('after the idle minute')");
    console.log(`# run_js after the idle minute answered in ${Date.now() - sent} ms`);
    assert.equal(again.structuredContent.stdout, "after the idle minute\n", JSON.stringify(again.structuredContent));
    assert.equal(again.structuredContent.executor, "tab");
  } finally {
    await tab.context.close();
  }
});

test("a tab whose browser quits while idle is gone at the next call after its lease, with nothing ticking", async () => {
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
