// Where a request's time goes inside the Worker: V8's sampling profiler, driven through
// wrangler dev's inspector, while `BENCH_CALLS` (default 2000) keep-alive requests are
// answered: GETs of `PROFILE_PATH` (default /healthz), or with `PROFILE_MCP=tools/list` (any
// 2026-07-28 method without params) that request to `/mcp` with a new tenant's key. Prints the profiled ms per request, then the
// functions with the most self and total time per request (wasm functions by their Rust names),
// and each `PROFILE_TREE` entry's (comma-separated name parts) children by total time. Run it
// with `RELAY_INSPECTOR_PORT=<port> bash bench/run.sh profile` (docs/BENCHMARKS.md, "the floor").
// A sample every 50 µs slows what it watches: compare shares within one profile.

import { modernBody, modernHeaders } from "../miniflare-tests/lib/mcp-http.mjs";
import { BASE, createTenant } from "../miniflare-tests/lib/relay.mjs";

const inspector = `127.0.0.1:${process.env.RELAY_INSPECTOR_PORT}`;
const method = process.env.PROFILE_MCP;
const url = `${BASE}${method ? "/mcp" : (process.env.PROFILE_PATH ?? "/healthz")}`;
const n = Number(process.env.BENCH_CALLS ?? 2000);
const TOP = 25;

/** A CDP session on the Worker's inspector (it wants an Origin header). */
async function inspect() {
  const [target] = await (await fetch(`http://${inspector}/json`)).json();
  const ws = new WebSocket(target.webSocketDebuggerUrl, { headers: { Origin: `http://${inspector}` } });
  await new Promise((resolve, reject) => {
    ws.addEventListener("open", resolve);
    ws.addEventListener("error", reject);
  });
  const pending = new Map();
  let id = 0;
  ws.addEventListener("message", (event) => {
    const message = JSON.parse(event.data);
    pending.get(message.id)?.(message);
    pending.delete(message.id);
  });
  const send = (method, params = {}) =>
    new Promise((resolve) => {
      pending.set(++id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    });
  return { send, close: () => ws.close() };
}

/** The request profiled: a GET, or the MCP method's POST. */
async function request() {
  if (!method) return {};
  const { key } = await createTenant("bench-profile");
  const body = modernBody(method);
  return { method: "POST", headers: modernHeaders(key, body), body: JSON.stringify(body) };
}

const init = await request();
const hit = async () => {
  const res = await fetch(url, init);
  if (!res.ok) throw new Error(`${url}: ${res.status}`);
  await res.text();
};

const { send, close } = await inspect();
for (let i = 0; i < 200; i++) await hit();
await send("Profiler.enable");
await send("Profiler.setSamplingInterval", { interval: 50 });
await send("Profiler.start");
for (let i = 0; i < n; i++) await hit();
const { profile } = (await send("Profiler.stop")).result;
await send("Profiler.disable");
close();

const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const sampled = new Map();
profile.samples.forEach((id, i) => sampled.set(id, (sampled.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const parents = new Map(profile.nodes.flatMap((node) => (node.children ?? []).map((child) => [child, node.id])));
const label = (node) => `${node.callFrame.functionName || "(anonymous)"} ${node.callFrame.url.split("/").pop()}`;
const add = (map, key, us) => map.set(key, (map.get(key) ?? 0) + us);
const self = new Map();
const total = new Map();
for (const [id, us] of sampled) {
  add(self, label(nodes.get(id)), us);
  const seen = new Set();
  for (let at = id; at !== undefined; at = parents.get(at)) seen.add(label(nodes.get(at)));
  for (const name of seen) add(total, name, us);
}
const subtree = (id) => (sampled.get(id) ?? 0) + (nodes.get(id).children ?? []).reduce((sum, child) => sum + subtree(child), 0);
const perRequest = (us) => (us / 1000 / n).toFixed(3).padStart(7);
const print = (title, map) => {
  console.log(title);
  for (const [name, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`${perRequest(us)} ${name}`);
};
console.log(`${method ?? url}: ${perRequest([...sampled.values()].reduce((a, b) => a + b, 0))} ms profiled per request (${n} requests)`);
print("-- self time, ms per request", self);
print("-- total time, ms per request", total);
for (const part of (process.env.PROFILE_TREE ?? "").split(",").filter(Boolean)) {
  const children = new Map();
  for (const node of profile.nodes) {
    if (label(node).includes(part)) for (const child of node.children ?? []) add(children, label(nodes.get(child)), subtree(child));
  }
  print(`-- under ${part}`, children);
}
// The inspector's socket keeps Node running after close() (seen here): end at once.
process.exit(0);
