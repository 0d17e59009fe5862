// The executor page in each browser engine (miniflare-tests/lib/engines.mjs), one after another
// against the same local Worker (RELAY_URL): for each, a fresh profile (nothing cached) opens
// the page with a key, and the bench prints the time to attach and to both runtimes ready (from
// the browser's launch), the first run_py sent the moment the page says it is attached (so it waits for
// Pyodide's boot), then warm run_js and run_py (p50/p95 of N after warm-up) and tools/list, the
// floor, in the same run. The README's compatibility table quotes one run of it.
// Run it with `bash bench/run.sh engines`.

import { attachTab, pageFacts, waitForAttached } from "../miniflare-tests/lib/engines.mjs";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { createTenant } from "../miniflare-tests/lib/relay.mjs";
import { BENCH_QUOTAS, checked, timeCalls, timed } from "./timing.mjs";

const ENGINES = (process.env.BENCH_ENGINES ?? "chromium,firefox,webkit").split(",");
const N = Number(process.env.BENCH_CALLS ?? 30);
const WARMUP = 5;

const fmt = (ms) => `${ms.toFixed(0).padStart(6)} ms`;

/** Opens the page in `engine` and prints its figures. */
async function bench(engine) {
  const { key } = await createTenant(`bench-${engine}`, { quotas: BENCH_QUOTAS });
  const client = await connectClient(key);
  const t0 = performance.now();
  const tab = await attachTab(engine, key);
  try {
    const attached = performance.now() - t0;
    const firstPy = await timed(() => checked(client, "run_py", "print(1)  # the first run_py"));
    await waitForAttached(tab, { runtimes: true });
    const ready = performance.now() - t0;
    const floor = await timeCalls(() => client.listTools(), { n: N, warmup: WARMUP });
    const js = await timeCalls(() => checked(client, "run_js", "console.log(1)"), { n: N, warmup: WARMUP });
    const py = await timeCalls(() => checked(client, "run_py", "print(1)"), { n: N, warmup: WARMUP });
    const { degraded } = await pageFacts(tab);
    console.log(`${engine} (${tab.version}); degraded: ${degraded.join(", ") || "none"}`);
    console.log(`  attach ${fmt(attached)}   runtimes ready ${fmt(ready)}   first run_py at attach ${fmt(firstPy)}`);
    for (const [name, stats] of [["tools/list (floor)", floor], ["run_js warm", js], ["run_py warm", py]]) {
      console.log(`  ${name.padEnd(20)} p50 ${fmt(stats.p50)}  p95 ${fmt(stats.p95)}  (${(stats.p50 / floor.p50).toFixed(2)}x the floor at p50; n=${N})`);
    }
  } finally {
    await client.close();
    await tab.close();
  }
}

for (const engine of ENGINES) await bench(engine);
process.exit(0);
