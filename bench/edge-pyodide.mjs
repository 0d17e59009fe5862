// Issue 27 item 4: Pyodide in a Worker Loader dynamic worker, measured outside the product.
// Builds bench/edge-pyodide/build/ (guest.js bundled with Pyodide's JS; Pyodide's wasm, stdlib
// and lock file copied as module files), starts that Worker under its own `wrangler dev`, and
// times from here, in turns so the shared machine's drift hits all alike:
// - cold: a fresh dynamic worker per request (LOADER.load), `print(1)`, without and with the
//   memory snapshot (made once by a first dynamic worker, as the page makes its own);
// - the stages of a cold one: the isolate alone (modules evaluated, the wasm compiled), Pyodide
//   ready, `print(1)` run;
// - warm: the same dynamic worker again (LOADER.get with one id), only to see what reuse gives.
// Prints p50/p95 of each and the guest's own clock, where it moves.
// Run it with `source scripts/env.sh && node bench/edge-pyodide.mjs` (BENCH_EDGE_PY_PORT, default
// 8865; BENCH_CALLS rounds, default 20).

import { loadavg } from "node:os";
import { startWorker } from "./dev-worker.mjs";
import { build, DIR, READY, timed } from "./edge-pyodide/harness.mjs";
import { percentiles } from "./timing.mjs";

const PORT = Number(process.env.BENCH_EDGE_PY_PORT ?? 8865);
const N = Number(process.env.BENCH_CALLS ?? 20);
const WARM_N = N * 3;

// A failed sample is counted and shown, not fatal: it is a result too.
const sample = (url) => timed(url).catch((err) => ({ error: err.message }));

const fmt = (ms) => `${ms.toFixed(0).padStart(6)} ms`;
function report(label, all) {
  const failed = all.filter((x) => x.error);
  if (failed.length) console.log(`${label}: ${failed.length} of ${all.length} failed, the first: ${failed[0].error.slice(0, 300)}`);
  const samples = all.filter((x) => !x.error);
  if (!samples.length) return;
  const s = percentiles(samples.map((x) => x.ms));
  const guest = samples.map((x) => x.body.guestMs);
  const ready = percentiles(guest.map((g) => g.ready ?? 0)).p50;
  const run = percentiles(guest.map((g) => g.run ?? 0)).p50;
  const heap = samples[0].body.heapMiB ? `, wasm memory ${samples[0].body.heapMiB} MiB` : "";
  console.log(`${label.padEnd(44)} p50 ${fmt(s.p50)}  p95 ${fmt(s.p95)}   guest clock p50: ready ${ready} ms, run ${run} ms${heap}  (n=${samples.length})`);
}

await build();
const loadBefore = loadavg().map((l) => l.toFixed(2)).join(" ");
const server = await startWorker({ dir: DIR, port: PORT, ready: READY, portVariable: "BENCH_EDGE_PY_PORT" });
try {
  const { url } = server;
  const first = await timed(`${url}/cold?stage=run`);
  console.log(`first cold run (workerd's first load of the modules): ${fmt(first.ms)}, printed ${JSON.stringify(first.body.out)}`);
  const boot = await timed(`${url}/bootstrap`);
  const mib = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  console.log(`memory snapshot made by a dynamic worker in ${fmt(boot.ms)}: ${mib(boot.body.snapshotBytes)}, ${mib(boot.body.gzipBytes)} gzipped`);
  const kinds = [
    ["cold: isolate only (modules, wasm compiled)", `${url}/cold?stage=load`],
    ["cold: Pyodide ready, no snapshot", `${url}/cold?stage=ready`],
    ["cold: print(1), no snapshot", `${url}/cold?stage=run`],
    ["cold: Pyodide ready, from the snapshot", `${url}/cold?stage=ready&snapshot=1`],
    ["cold: print(1), from the snapshot", `${url}/cold?stage=run&snapshot=1`],
  ];
  const samples = kinds.map(() => []);
  for (let i = 0; i < N; i++) {
    for (const [k, [, u]] of kinds.entries()) samples[k].push(await sample(u));
  }
  for (const [k, [label]] of kinds.entries()) report(label, samples[k]);
  const warmUrl = `${url}/warm?id=warm&stage=run&snapshot=1`;
  const warmFirst = await sample(warmUrl);
  const warm = [];
  for (let i = 0; i < WARM_N; i++) warm.push(await sample(warmUrl));
  const booted = warm.filter((w) => w.body?.guestMs.warm).length;
  console.log(`warm: its first call ${warmFirst.error ?? fmt(warmFirst.ms)}; calls that found Pyodide booted: ${booted} of ${WARM_N}`);
  report("warm: print(1), the same dynamic worker", warm);
} finally {
  server.stop();
}
console.log(`load average before: ${loadBefore}; after: ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
