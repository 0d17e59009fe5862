// What a warm run costs against the floor, in one run (issue 32's "extra hop"): `tools/list`
// (the floor), `read` (a trip to the tab, no runtime) and `run_js` in a warm context, in turns
// back to back, then the floor and the warm `run_js` `BENCH_PAUSE_MS` apart. Prints p50s and
// their ratios to the floor of the same run, so that builds can be compared in paired runs on a
// shared machine (`bash bench/run.sh hop`).

import { launchBrowser, openExecutor } from "../miniflare-tests/lib/browser.mjs";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { createTenant } from "../miniflare-tests/lib/relay.mjs";
import { BENCH_QUOTAS, checked, percentiles, timeInTurns, timed } from "./timing.mjs";

const N = Number(process.env.BENCH_CALLS ?? 60);
const PAUSED_N = Number(process.env.BENCH_PAUSED_CALLS ?? 20);
const PAUSE_MS = Number(process.env.BENCH_PAUSE_MS ?? 1000);

const fmt = (ms) => `${ms.toFixed(1).padStart(6)} ms`;
const line = (label, s, floor) =>
  console.log(`${label.padEnd(28)} p50 ${fmt(s.p50)}  p95 ${fmt(s.p95)}${floor ? `  ${(s.p50 / floor.p50).toFixed(2)}x` : ""}`);

const { key } = await createTenant("bench", { quotas: BENCH_QUOTAS });
const browser = await launchBrowser();
try {
  await openExecutor(browser, key);
  const client = await connectClient(key);
  const list = () => client.listTools();
  const read = () => client.callTool({ name: "read", arguments: { path: "/missing.txt" } });
  const warm = () => checked(client, "run_js", "console.log(1)", { context: "bench" });
  const [floor, reads, runs] = await timeInTurns([list, read, warm], { n: N, warmup: 10 });
  console.log(`back to back, in turns (n=${N})`);
  line("tools/list", floor);
  line("read", reads, floor);
  line("run_js, warm context", runs, floor);
  const paused = { list: [], warm: [] };
  for (let i = 0; i < PAUSED_N; i++) {
    await new Promise((r) => setTimeout(r, PAUSE_MS));
    paused.list.push(await timed(list));
    await new Promise((r) => setTimeout(r, PAUSE_MS));
    paused.warm.push(await timed(warm));
  }
  const pausedFloor = percentiles(paused.list);
  console.log(`${PAUSE_MS} ms apart (n=${PAUSED_N})`);
  line("tools/list", pausedFloor);
  line("run_js, warm context", percentiles(paused.warm), pausedFloor);
  await client.close();
} finally {
  await browser.close();
}
