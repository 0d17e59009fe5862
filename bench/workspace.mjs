// The workspace the relay session owns (issue 26): `read` and `write` of a 1 KiB file with no
// tab and with a tab attached, each p50 against `tools/list` in the same run (target: <= 1.3x);
// and a tab's attach time (its first sync: the index, then every body it lacks, each checked
// against its hash) with a 10 MiB and a 60 MiB workspace, cold (a new browser context: nothing
// cached) and warm (the same context reloaded: every body held). Printed, never asserted.
// Run it with `bash bench/run.sh workspace` (a fresh server).

import { launchBrowser, openExecutor, waitForLine } from "../miniflare-tests/lib/browser.mjs";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { createTenant } from "../miniflare-tests/lib/relay.mjs";
import { BENCH_QUOTAS, timeCalls } from "./timing.mjs";

const N = Number(process.env.BENCH_CALLS ?? 50);
const WARMUP = 5;
const KIB = "k".repeat(1024);

const line = (label, s, floor) =>
  console.log(`${label.padEnd(34)} p50 ${s.p50.toFixed(1)} ms  p95 ${s.p95.toFixed(1)} ms  (${(s.p50 / floor.p50).toFixed(2)}x tools/list)  (n=${N})`);

async function fileTools(client, label) {
  const call = (name, args) => client.callTool({ name, arguments: args });
  await call("write", { path: "/tmp/bench-1k.txt", content: KIB, mode: "overwrite" });
  const floor = await timeCalls(() => client.listTools(), { n: N, warmup: WARMUP });
  const read = await timeCalls(() => call("read", { path: "/tmp/bench-1k.txt" }), { n: N, warmup: WARMUP });
  const write = await timeCalls(() => call("write", { path: "/tmp/bench-1k.txt", content: KIB, mode: "overwrite" }), { n: N, warmup: WARMUP });
  line(`tools/list (${label})`, floor, floor);
  line(`read 1 KiB (${label})`, read, floor);
  line(`write 1 KiB (${label})`, write, floor);
}

/** Fills relay session `session` with `mib` files of 1 MiB (distinct bodies), through a run in a tab. */
async function fill(browser, key, session, mib) {
  const tab = await openExecutor(browser, key, session);
  const client = await connectClient(key, session);
  const code = `import fs from 'fs'; fs.mkdirSync('/tmp/fill', { recursive: true });
    for (let i = 0; i < ${mib}; i++) { const b = new Uint8Array(1 << 20); b.fill(i); b[0] = ${mib}; fs.writeFileSync('/tmp/fill/f' + i, b); }`;
  const result = await client.callTool({ name: "run_js", arguments: { code, policy: { limits: { timeoutMs: 300000 } } } }, undefined, { timeout: 600_000 });
  if (result.structuredContent.exitCode !== 0) throw new Error(JSON.stringify(result.structuredContent));
  await client.close();
  await tab.context.close();
}

/** The attach sync's figures, as the page prints them, and the time from opening the page. */
async function attach(browser, key, session, mib) {
  const opened = performance.now();
  const tab = await openExecutor(browser, key, session);
  const cold = await waitForLine(tab.lines, /^Workspace: \d+ file\(s\) from the relay session/, 120_000);
  const coldWall = performance.now() - opened;
  const from = tab.lines.length;
  const reloaded = performance.now();
  await tab.page.reload();
  const warm = await waitForLine(tab.lines, /^Workspace: \d+ file\(s\) from the relay session/, 120_000, from);
  const warmWall = performance.now() - reloaded;
  console.log(`attach, ${mib} MiB, cold: ${cold} (page open to synced: ${Math.round(coldWall)} ms)`);
  console.log(`attach, ${mib} MiB, warm: ${warm} (reload to synced: ${Math.round(warmWall)} ms)`);
  await tab.context.close();
}

const { key } = await createTenant("bench-workspace", { queue: { attachWaitMs: 500 }, quotas: BENCH_QUOTAS });
const browser = await launchBrowser();
try {
  const client = await connectClient(key);
  await fileTools(client, "no tab");
  const tab = await openExecutor(browser, key);
  await fileTools(client, "a tab attached");
  await tab.context.close();
  await client.close();
  for (const mib of [10, 60]) {
    await fill(browser, key, `ws${mib}`, mib);
    await attach(browser, key, `ws${mib}`, mib);
  }
} finally {
  await browser.close();
}
