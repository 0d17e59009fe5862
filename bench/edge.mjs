// The edge executor (issue 27): `run_js` with no tab, each run in a fresh dynamic Worker,
// against `tools/list` (the floor) in the same run, in turns (one of each per round, so a load
// that comes and goes weighs on both alike), back to back and with a pause between calls
// (BENCH_PAUSE_MS, as an agent that reads each result first); then a tab's warm `run_js` on a
// tenant whose runs go to the tab, for comparison. Target (issue 27): edge p50 <= 1.5x the
// floor's. Run with `bash bench/run.sh edge`; compare the ratios, which share a run.

import { launchBrowser, openExecutor } from "../miniflare-tests/lib/browser.mjs";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { createTenant } from "../miniflare-tests/lib/relay.mjs";
import { checked, percentiles, timeInTurns, timed } from "./timing.mjs";

const N = Number(process.env.BENCH_CALLS ?? 100);
const PAUSED_N = Number(process.env.BENCH_PAUSED_CALLS ?? 30);
const PAUSE_MS = Number(process.env.BENCH_PAUSE_MS ?? 1000);
const WARMUP = 10;

const fmt = (ms) => `${ms.toFixed(1).padStart(7)} ms`;
const line = (label, s, floor) =>
  console.log(`${label.padEnd(36)} p50 ${fmt(s.p50)}  p95 ${fmt(s.p95)}${floor ? `  (${(s.p50 / floor.p50).toFixed(2)}x the floor's p50)` : ""}`);

const budget = { cpuMsPerDay: 86_400_000, runsPerMinute: 6_000 };
const edge = await createTenant("bench-edge", { executor: "edge", edge: budget });
const edgeClient = await connectClient(edge.key);
const list = () => edgeClient.listTools();
const runAtEdge = () => checked(edgeClient, "run_js", "console.log(1)");

console.log(`edge run_js, back to back (n=${N}, in turns with tools/list)`);
const [floor, edgeRun] = await timeInTurns([list, runAtEdge], { n: N, warmup: WARMUP });
line("tools/list", floor);
line("run_js at the edge", edgeRun, floor);

console.log(`\nwith ${PAUSE_MS} ms between calls (n=${PAUSED_N})`);
const paused = { list: [], edge: [] };
for (let i = 0; i < PAUSED_N; i++) {
  await new Promise((r) => setTimeout(r, PAUSE_MS));
  paused.list.push(await timed(list));
  await new Promise((r) => setTimeout(r, PAUSE_MS));
  paused.edge.push(await timed(runAtEdge));
}
const pausedFloor = percentiles(paused.list);
line("tools/list, paused", pausedFloor);
line("run_js at the edge, paused", percentiles(paused.edge), pausedFloor);

// A tab's run_js beside it: a tenant on tabs with Chromium attached.
const tab = await createTenant("bench-tab");
const browser = await launchBrowser();
try {
  await openExecutor(browser, tab.key);
  const tabClient = await connectClient(tab.key);
  const [tabFloor, tabRun] = await timeInTurns(
    [() => tabClient.listTools(), () => checked(tabClient, "run_js", "console.log(1)")],
    { n: N, warmup: WARMUP },
  );
  console.log(`\na tab's run_js, back to back (n=${N})`);
  line("tools/list", tabFloor);
  line("run_js on a tab", tabRun, tabFloor);
  await tabClient.close();
} finally {
  await browser.close();
  await edgeClient.close();
}
