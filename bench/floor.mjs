// Where the floor goes: the same keep-alive client times, in one run, a hello-world Worker under
// its own `wrangler dev` (bench/bare-worker), relay-edge's `GET /healthz` (the Worker, no
// storage), `tools/list` in the 2026-07-28 era (raw HTTP: key lookup, then answered) and in the
// 2025-11-25 era (the SDK client: its session lives in the relay session's DO), and a `run_js`
// on an attached tab. Prints p50/p95/p99 and each one's ratio to the bare Worker and to
// `tools/list`. Run it with `bash bench/run.sh floor`.

import { spawn } from "node:child_process";
import path from "node:path";
import { launchBrowser, openExecutor } from "../miniflare-tests/lib/browser.mjs";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { modernBody, modernHeaders } from "../miniflare-tests/lib/mcp-http.mjs";
import { BASE, ROOT, createTenant } from "../miniflare-tests/lib/relay.mjs";
import { timeCalls } from "./timing.mjs";

const N = Number(process.env.BENCH_CALLS ?? 200);
const WARMUP = 20;
const BARE_PORT = Number(process.env.BENCH_BARE_PORT ?? 8796);

const measure = (call) => timeCalls(call, { n: N, warmup: WARMUP });

async function startBare() {
  const dir = path.join(ROOT, "bench/bare-worker");
  const child = spawn("wrangler", ["dev", "--ip", "127.0.0.1", "--port", String(BARE_PORT), "--log-level", "error", "--show-interactive-dev-session=false"], { cwd: dir, stdio: "ignore", detached: true });
  const url = `http://127.0.0.1:${BARE_PORT}/`;
  for (let i = 0; i < 240 && !(await fetch(url).then((r) => r.ok, () => false)); i++) await new Promise((r) => setTimeout(r, 250));
  return { url, stop: () => process.kill(-child.pid, "SIGKILL") };
}

const ok = (res) => {
  if (!res.ok) throw new Error(`${res.url}: ${res.status}`);
  return res.text();
};

const bare = await startBare();
const { key } = await createTenant("bench-floor");
const browser = await launchBrowser();
await openExecutor(browser, key);
const client = await connectClient(key);
const listBody = modernBody("tools/list");
const listHeaders = modernHeaders(key, listBody);

const rows = [
  ["bare Worker (hello world)", await measure(() => fetch(bare.url).then(ok))],
  ["GET /healthz", await measure(() => fetch(`${BASE}/healthz`).then(ok))],
  ["tools/list, 2026-07-28 (raw)", await measure(() => fetch(`${BASE}/mcp`, { method: "POST", headers: listHeaders, body: JSON.stringify(listBody) }).then(ok))],
  ["tools/list, 2025-11-25 (SDK)", await measure(() => client.listTools())],
  ["run_js console.log(1)", await measure(() => client.callTool({ name: "run_js", arguments: { code: "console.log(1)" } }))],
];
const [base] = rows;
const list = rows[2];
const fmt = (ms) => `${ms.toFixed(1).padStart(6)} ms`;
for (const [label, s] of rows) {
  const vs = (other) => (s.p50 / other[1].p50).toFixed(2);
  console.log(`${label.padEnd(30)} p50 ${fmt(s.p50)}  p95 ${fmt(s.p95)}  p99 ${fmt(s.p99)}   ${vs(base)}x bare   ${vs(list)}x tools/list`);
}
await client.close();
await browser.close();
bare.stop();
