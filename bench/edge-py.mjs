// run_py at the edge (issue 27 item 4): each run in a fresh dynamic Worker booted from Pyodide's
// memory snapshot, against `tools/list` (the floor) and the edge's `run_js` in the same run, in
// turns. Three kinds of cold, since the snapshot lives in R2 and the Worker's isolate caches it
// and Pyodide's files:
// - the first run_py of a fresh server (no snapshot yet: a dynamic Worker makes it, R2 keeps it);
// - the first run_py of a restarted server whose R2 holds the snapshot (a fresh Worker isolate:
//   Pyodide's files read from the assets, the snapshot from R2), on a second wrangler dev with
//   persisted state (RELAY_RESTART_PORT), restarted BENCH_RESTARTS times;
// - every later run_py (a fresh dynamic Worker still, the files and snapshot in the Worker's
//   memory), back to back and with a pause between calls (BENCH_PAUSE_MS).
// Run with `RELAY_TEST_PORT=<port> RELAY_RESTART_PORT=<port> bash bench/run.sh edge-py`.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { startWorker } from "../miniflare-tests/lib/local-worker.mjs";
import { createTenant } from "../miniflare-tests/lib/relay.mjs";
import { checked, percentiles, timeInTurns, timed } from "./timing.mjs";

const N = Number(process.env.BENCH_CALLS ?? 60);
const PAUSED_N = Number(process.env.BENCH_PAUSED_CALLS ?? 20);
const PAUSE_MS = Number(process.env.BENCH_PAUSE_MS ?? 1000);
const RESTARTS = Number(process.env.BENCH_RESTARTS ?? 3);
const RESTART_PORT = Number(process.env.RELAY_RESTART_PORT ?? 8796);
const WARMUP = 5;

const fmt = (ms) => `${ms.toFixed(1).padStart(7)} ms`;
const line = (label, s, floor) =>
  console.log(`${label.padEnd(40)} p50 ${fmt(s.p50)}  p95 ${fmt(s.p95)}${floor ? `  (${(s.p50 / floor.p50).toFixed(2)}x the floor's p50)` : ""}`);

const budget = { cpuMsPerDay: 86_400_000, runsPerMinute: 6_000 };
// A call that fails is counted and timed as it failed (the SDK's 60 s timeout, say), not fatal.
const failures = [];
const counted = (call) => () => call().catch((err) => failures.push(err.message));
const py = (client) => counted(() => checked(client, "run_py", "print(1)"));

/** A client of a new tenant whose runs go to the edge, on `base`. */
async function edgeClient(base) {
  const { key } = await createTenant("bench-edge-py", { executor: "edge", edge: budget }, base);
  return connectClient(key, "default", undefined, base);
}

// The server scripts/with-server.sh started, with an empty state: no snapshot anywhere.
const client = await edgeClient();
const first = await timed(py(client));
console.log(`first run_py of a fresh server (the snapshot made by a dynamic Worker, kept in R2): ${fmt(first)}`);

console.log(`\nedge run_py, back to back (n=${N}, in turns with tools/list and the edge's run_js)`);
const [floor, pyRun, jsRun] = await timeInTurns([() => client.listTools(), py(client), counted(() => checked(client, "run_js", "console.log(1)"))], { n: N, warmup: WARMUP });
line("tools/list", floor);
line("run_py at the edge", pyRun, floor);
line("run_js at the edge", jsRun, floor);

console.log(`\nwith ${PAUSE_MS} ms between calls (n=${PAUSED_N})`);
const paused = { list: [], py: [] };
for (let i = 0; i < PAUSED_N; i++) {
  await new Promise((r) => setTimeout(r, PAUSE_MS));
  paused.list.push(await timed(() => client.listTools()));
  await new Promise((r) => setTimeout(r, PAUSE_MS));
  paused.py.push(await timed(py(client)));
}
const pausedFloor = percentiles(paused.list);
line("tools/list, paused", pausedFloor);
line("run_py at the edge, paused", percentiles(paused.py), pausedFloor);
await client.close();

// A server restarted over the same state: R2 holds the snapshot, the Worker's isolate is new.
const stateDir = await mkdtemp(path.join(tmpdir(), "relay-edge-py-"));
try {
  let worker = await startWorker({ port: RESTART_PORT, stateDir });
  const made = await edgeClient(worker.url);
  const making = await timed(py(made));
  await made.close();
  await worker.stop();
  const restarted = [];
  for (let i = 0; i < RESTARTS; i++) {
    worker = await startWorker({ port: RESTART_PORT, stateDir });
    const fresh = await edgeClient(worker.url);
    restarted.push(await timed(py(fresh)));
    await fresh.close();
    await worker.stop();
  }
  console.log(`\nfirst run_py of a second fresh server: ${fmt(making)} (the snapshot made)`);
  console.log(`first run_py after each of ${RESTARTS} restarts (snapshot read from R2): ${restarted.map((ms) => fmt(ms).trim()).join(", ")}`);
} finally {
  await rm(stateDir, { recursive: true, force: true });
}
console.log(`\ncalls that failed: ${failures.length}${failures.length ? `: ${failures.join("; ")}` : ""}`);
