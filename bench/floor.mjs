// Where the floor goes: the same keep-alive client times, in turns (one call of each per round,
// so the ratios hold while the shared machine's speed drifts), a hello-world Worker under its
// own `wrangler dev` (bench/bare-worker), relay-edge's `GET /healthz` (the Worker, no storage,
// no log line at the bench's `LOG_LEVEL=warn`), a 404 from the Worker (the same path with its
// warn line written: what one line costs under `wrangler dev`), `tools/list` in the 2026-07-28
// era (raw HTTP: key lookup, then answered) and in the 2025-11-25 era (the SDK client: its
// session lives in the relay session's DO), then a `run_js` on an attached tab. Prints
// p50/p95/p99, each one's ratio to the bare Worker and to `tools/list`, the SDK client's own
// CPU per `listTools` and what its output-schema validators take of it, issue 33's targets, and
// what the `tools/list` answer costs a client part by part (bench/list-cost.mjs).
// Run it with `bash bench/run.sh floor`.

import { spawn } from "node:child_process";
import { loadavg } from "node:os";
import path from "node:path";
import { launchBrowser, openExecutor } from "../miniflare-tests/lib/browser.mjs";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { modernBody, modernCall, modernHeaders } from "../miniflare-tests/lib/mcp-http.mjs";
import { BASE, ROOT, createTenant } from "../miniflare-tests/lib/relay.mjs";
import { printListCost } from "./list-cost.mjs";
import { BENCH_QUOTAS, percentiles, timeCalls, timeInTurns } from "./timing.mjs";

const N = Number(process.env.BENCH_CALLS ?? 200);
const WARMUP = 20;
const NEW_CLIENTS = 5;
const BARE_PORT = Number(process.env.BENCH_BARE_PORT ?? 8796);

async function startBare() {
  const dir = path.join(ROOT, "bench/bare-worker");
  const child = spawn("wrangler", ["dev", "--ip", "127.0.0.1", "--port", String(BARE_PORT), "--log-level", "error", "--show-interactive-dev-session=false"], { cwd: dir, stdio: "ignore", detached: true });
  const url = `http://127.0.0.1:${BARE_PORT}/`;
  for (let i = 0; i < 240 && !(await fetch(url).then((r) => r.ok, () => false)); i++) await new Promise((r) => setTimeout(r, 250));
  return { url, stop: () => process.kill(-child.pid, "SIGKILL") };
}

const text = (status) => async (res) => {
  if (res.status !== status) throw new Error(`${res.url}: ${res.status}`);
  return res.text();
};

/**
 * `client.listTools()`, timed from inside the client: its CPU for the whole call (HTTP, JSON,
 * the SDK's checks) and the part spent in `cacheToolMetadata`, where the SDK compiles (or
 * finds) a validator for each tool's `outputSchema`. Both are kept per call.
 */
function clientSide(client) {
  const figures = { cpu: [], validators: [] };
  const cache = client.cacheToolMetadata.bind(client);
  let spent = 0;
  client.cacheToolMetadata = (tools) => {
    const t0 = performance.now();
    try {
      return cache(tools);
    } finally {
      spent += performance.now() - t0;
    }
  };
  const list = async () => {
    spent = 0;
    const before = process.cpuUsage();
    await client.listTools();
    const { user, system } = process.cpuUsage(before);
    figures.cpu.push((user + system) / 1000);
    figures.validators.push(spent);
  };
  return { list, figures };
}

/** What the validators take on the first `listTools` of each of `count` new clients (median). */
async function firstListings(key, count) {
  const spent = [];
  for (let i = 0; i < count; i++) {
    const fresh = await connectClient(key, "default", `bench-floor-${i}`);
    const { list, figures } = clientSide(fresh);
    await list();
    await fresh.close();
    spent.push(figures.validators[0]);
  }
  return percentiles(spent).p50;
}

const load = () => loadavg().map((l) => l.toFixed(2)).join(" ");
const loadBefore = load();
const bare = await startBare();
const { key } = await createTenant("bench-floor", { quotas: BENCH_QUOTAS });
const browser = await launchBrowser();
await openExecutor(browser, key);
const client = await connectClient(key);
const sdk = clientSide(client);
const listRequest = modernBody("tools/list");
const listHeaders = modernHeaders(key, listRequest);
const listBody = JSON.stringify(listRequest);

const calls = [
  ["bare Worker (hello world)", () => fetch(bare.url).then(text(200))],
  ["GET /healthz", () => fetch(`${BASE}/healthz`).then(text(200))],
  ["GET /admin/none: 404, a log line", () => fetch(`${BASE}/admin/none`).then(text(404))],
  ["tools/list, 2026-07-28 (raw)", () => fetch(`${BASE}/mcp`, { method: "POST", headers: listHeaders, body: listBody }).then(text(200))],
  ["tools/list, 2025-11-25 (SDK)", sdk.list],
];
const timed = await timeInTurns(calls.map(([, call]) => call), { n: N, warmup: WARMUP });
const rows = calls.map(([label], i) => [label, timed[i]]);
const first = await firstListings(key, NEW_CLIENTS);
rows.push(["run_js console.log(1)", await timeCalls(() => client.callTool({ name: "run_js", arguments: { code: "console.log(1)" } }), { n: N, warmup: WARMUP })]);

const [base, healthz, , raw, viaSdk] = rows;
const fmt = (ms) => `${ms.toFixed(1).padStart(6)} ms`;
const ratio = (row, to) => row[1].p50 / to[1].p50;
for (const row of rows) {
  const [label, s] = row;
  console.log(`${label.padEnd(34)} p50 ${fmt(s.p50)}  p95 ${fmt(s.p95)}  p99 ${fmt(s.p99)}   ${ratio(row, base).toFixed(2)}x bare   ${ratio(row, raw).toFixed(2)}x tools/list`);
}
const cpu = percentiles(sdk.figures.cpu.slice(WARMUP));
const validators = percentiles(sdk.figures.validators.slice(WARMUP));
console.log(`SDK client's own CPU per listTools  p50 ${fmt(cpu.p50)}  p95 ${fmt(cpu.p95)}   (round trip p50 ${fmt(viaSdk[1].p50)})`);
console.log(`  of which output-schema validators p50 ${validators.p50.toFixed(3)} ms  p95 ${validators.p95.toFixed(3)} ms; a new client's first listing ${first.toFixed(2)} ms (median of ${NEW_CLIENTS})`);
printListCost((await modernCall(key, "tools/list")).message.result);
const targets = [
  ["/healthz <= 1.2x bare", ratio(healthz, base), 1.2],
  ["raw tools/list <= 1.5x bare", ratio(raw, base), 1.5],
  ["SDK tools/list <= 2.5x bare", ratio(viaSdk, base), 2.5],
  ["validators per listTools < 1 ms", validators.p50, 1],
];
const missed = targets.filter(([, value, bound]) => value > bound);
console.log(`load ${loadBefore} -> ${load()}`);
console.log(`score: ${targets.length - missed.length}/${targets.length} targets met${missed.length ? `; missed: ${missed.map(([name, value]) => `${name} (${value.toFixed(2)})`).join(", ")}` : ""}`);
await client.close();
await browser.close();
bare.stop();
