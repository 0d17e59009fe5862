// Throughput and memory on one relay session with one tab: 8 SDK clients making 50 `run_js`
// calls each at once (below the queue's 429 limit), every answer checked to be its own call's
// (nothing lost, nothing crossed), against 1 / the single-call latency measured in the same run;
// then 1,000 runs in a row with the resident memory of workerd and of Chromium (all its
// processes: the page, its runner workers, the GPU and network processes) and the page's JS
// heap reported after 20 and after 1,000, and the wasm memory of the relay session's isolate
// (the Rust heap's high-water mark, from /admin/metrics), which RSS under wrangler dev hides.
// Run it with `bash bench/run.sh throughput`.

import { readdirSync, readFileSync } from "node:fs";
import { launchBrowser, openExecutor } from "../miniflare-tests/lib/browser.mjs";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { BASE, createTenant, devVars } from "../miniflare-tests/lib/relay.mjs";
import { BENCH_QUOTAS, timeCalls } from "./timing.mjs";

const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 8);
const CALLS = Number(process.env.BENCH_CALLS ?? 50);
const LONG_RUN = Number(process.env.BENCH_LONG_RUN ?? 1000);

/** A run_js whose stdout must be `tag`: a crossed or lost answer cannot pass. */
async function echo(client, tag) {
  const result = await client.callTool({ name: "run_js", arguments: { code: `console.log(${JSON.stringify(tag)})` } });
  if (result.structuredContent?.stdout !== `${tag}\n`) throw new Error(`${tag}: ${JSON.stringify(result)}`);
}

/** The processes below `root` (pid), by their parent links in /proc. */
function descendants(root) {
  const parent = new Map();
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      // Field 4 of stat is the parent; the command name before it may hold spaces, in ().
      parent.set(pid, readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[1]);
    } catch {
      // the process ended while we read
    }
  }
  const below = (pid) => [...parent].filter(([, ppid]) => ppid === pid).flatMap(([child]) => [child, ...below(child)]);
  return below(String(root));
}

/** Resident memory (MiB) of those of `pids` whose command line matches `pattern`. */
function rssMiB(pids, pattern) {
  let kib = 0;
  for (const pid of pids) {
    try {
      if (!pattern.test(readFileSync(`/proc/${pid}/cmdline`, "utf8"))) continue;
      kib += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
    } catch {
      // the process ended while we read
    }
  }
  return kib / 1024;
}

async function memory(page) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("HeapProfiler.collectGarbage"); // the heap that is live, not what awaits a GC
  await cdp.send("Performance.enable");
  const { metrics } = await cdp.send("Performance.getMetrics");
  await cdp.detach();
  const heap = metrics.find((m) => m.name === "JSHeapUsedSize")?.value ?? 0;
  // workerd runs under the wrangler that scripts/with-server.sh (this bench's parent) started;
  // Chromium under this bench. Other servers and browsers on the machine are not counted.
  const workerd = rssMiB(descendants(process.ppid), /workerd/);
  const chromium = rssMiB(descendants(process.pid), /chrom/);
  return { workerd, chromium, pageHeap: heap / 2 ** 20, wasm: await wasmMemory() };
}

/** The relay session isolate's wasm memory (MiB), from the tenant's metrics. */
async function wasmMemory() {
  const res = await fetch(`${BASE}/admin/metrics?tenant=${tenant.id}`, { headers: { authorization: `Bearer ${devVars.ADMIN_TOKEN}` } });
  const sample = /^relay_wasm_memory_bytes\{[^}]*\} (\d+)$/m.exec(await res.text());
  return Number(sample?.[1] ?? NaN) / 2 ** 20;
}

const mib = (m) => `workerd ${m.workerd.toFixed(0)} MiB (its wasm memory ${m.wasm.toFixed(1)} MiB), Chromium ${m.chromium.toFixed(0)} MiB, page JS heap ${m.pageHeap.toFixed(1)} MiB`;

const { key, tenant } = await createTenant("bench-throughput", { quotas: BENCH_QUOTAS });
const browser = await launchBrowser();
const { page } = await openExecutor(browser, key);
const single = await connectClient(key);
console.log(`one relay session, one tab (${new Date().toISOString()})`);

const latency = await timeCalls(() => echo(single, "1"), { n: 50, warmup: 20 });
const floorRate = 1000 / latency.p50;
console.log(`single-call run_js p50 ${latency.p50.toFixed(1)} ms: 1 / latency = ${floorRate.toFixed(1)} runs/s`);

const clients = await Promise.all(Array.from({ length: CLIENTS }, (_, i) => connectClient(key, "default", `bench-${i}`)));
const t0 = performance.now();
const outcomes = await Promise.allSettled(
  clients.map(async (client, c) => {
    for (let i = 0; i < CALLS; i++) await echo(client, `c${c}-${i}`);
  }),
);
const seconds = (performance.now() - t0) / 1000;
const failed = outcomes.filter((o) => o.status === "rejected");
const done = CLIENTS * CALLS - failed.length * CALLS;
const rate = (CLIENTS * CALLS) / seconds;
console.log(
  `${CLIENTS} clients x ${CALLS} calls: ${seconds.toFixed(1)} s, ${rate.toFixed(1)} runs/s = ${(rate / floorRate).toFixed(2)}x 1/latency (target >= 0.8x); ` +
    `${failed.length ? `${failed.length} clients failed: ${failed[0].reason}` : `all ${done} answers right`}`,
);

await Promise.all(clients.map((client) => client.close()));
let at20 = null;
for (let i = 1; i <= LONG_RUN; i++) {
  await echo(single, `r${i}`);
  if (i === 20) at20 = await memory(page);
}
const atEnd = await memory(page);
console.log(`after 20 runs:    ${mib(at20)}`);
console.log(`after ${LONG_RUN} runs: ${mib(atEnd)}`);
console.log(
  `growth 20 -> ${LONG_RUN}: workerd ${(atEnd.workerd - at20.workerd).toFixed(0)} MiB (wasm ${(atEnd.wasm - at20.wasm).toFixed(1)} MiB), Chromium ${(atEnd.chromium - at20.chromium).toFixed(0)} MiB, page heap ${(atEnd.pageHeap - at20.pageHeap).toFixed(1)} MiB`,
);

await single.close();
await browser.close();
