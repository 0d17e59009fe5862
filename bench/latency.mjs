// Latency benchmark: the official SDK client against a local Worker (RELAY_URL) with headless
// Chromium attached as executor. Prints p50/p95/p99 of N sequential calls after warm-up for
// tools/list (the floor: one round trip through Worker and DO), run_js `console.log(1)` and
// run_py `print(1)`, their ratios to the floor, and Pyodide's first run cold and after a reload.
// Run it with `bash bench/run.sh` (starts a fresh server); figures vary with the machine's load,
// so compare the ratios, which are measured in the same run.

import { launchBrowser, openExecutor, waitForLine } from "../miniflare-tests/lib/browser.mjs";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { createTenant } from "../miniflare-tests/lib/relay.mjs";

const N = Number(process.env.BENCH_CALLS ?? 200);
const WARMUP = 20;

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function measure(label, call) {
  for (let i = 0; i < WARMUP; i++) await call();
  const times = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await call();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const stats = { label, p50: percentile(times, 50), p95: percentile(times, 95), p99: percentile(times, 99) };
  console.log(`${label.padEnd(28)} p50 ${fmt(stats.p50)}  p95 ${fmt(stats.p95)}  p99 ${fmt(stats.p99)}  (n=${N})`);
  return stats;
}

const fmt = (ms) => `${ms.toFixed(1).padStart(7)} ms`;

async function timed(fn) {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function checked(client, name, code) {
  const result = await client.callTool({ name, arguments: { code } });
  if (result.structuredContent?.stdout !== "1\n") throw new Error(`${name} gave ${JSON.stringify(result)}`);
}

const { key } = await createTenant("bench");
const browser = await launchBrowser();
const executor = await openExecutor(browser, key);
const client = await connectClient(key);

const pyCold = await timed(() => checked(client, "run_py", "print(1)"));
await executor.page.reload();
await waitForLine(executor.lines.splice(0), /^Ready\. Waiting/).catch(() => {});
await waitForLine(executor.lines, /^Ready\. Waiting/);
const pyReload = await timed(() => checked(client, "run_py", "print(1)"));
console.log(`${"run_py first after page load".padEnd(28)} ${fmt(pyCold)}  (Pyodide cold: network, SRI check, Cache API fill)`);
console.log(`${"run_py first after reload".padEnd(28)} ${fmt(pyReload)}  (Pyodide from the Cache API)`);

const floor = await measure("tools/list (floor)", () => client.listTools());
const js = await measure("run_js console.log(1)", () => checked(client, "run_js", "console.log(1)"));
const py = await measure("run_py print(1)", () => checked(client, "run_py", "print(1)"));
for (const [name, stats] of [["run_js", js], ["run_py", py]]) {
  const ratio = (p) => (stats[p] / floor[p]).toFixed(2);
  console.log(`${`${name} / floor`.padEnd(28)} p50 ${ratio("p50")}x  p95 ${ratio("p95")}x  p99 ${ratio("p99")}x`);
}

await client.close();
await browser.close();
