// Upstream MCP calls: what `mcps.call` from code in a run costs against calling the same
// upstream directly. Two real upstreams on loopback (the SDK v2 server, 2026-07-28, and the
// SDK v1 server, 2025 with a session; miniflare-tests/lib/upstream-servers.mjs). Direct: this
// process POSTs tools/call to the upstream, N times. Through the relay: one run_js calls
// mcps.call N times in a loop and times each call with Date.now() inside QuickJS, so each
// figure is guest -> page -> Worker -> relay session DO -> upstream and back, nothing else.
// Run it with `bash bench/run.sh upstream` (a fresh server); compare the p50s of one run.

import { randomUUID } from "node:crypto";
import { launchBrowser, openExecutor } from "../miniflare-tests/lib/browser.mjs";
import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { BASE, createTenant, devVars } from "../miniflare-tests/lib/relay.mjs";
import { startLegacyUpstream, startModernUpstream } from "../miniflare-tests/lib/upstream-servers.mjs";
import { BENCH_QUOTAS, percentiles, timeCalls } from "./timing.mjs";

const N = Number(process.env.BENCH_CALLS ?? 100);
const WARMUP = 10;
const SECRET = randomUUID();

const line = (label, s) => console.log(`${label.padEnd(40)} p50 ${s.p50.toFixed(1)} ms  p95 ${s.p95.toFixed(1)} ms  p99 ${s.p99.toFixed(1)} ms  (n=${N})`);

/** One tools/call straight to a 2026-07-28 upstream. */
function modernDirect(url) {
  const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} };
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "shout", arguments: { text: "x" }, _meta: meta } });
  const headers = { "x-api-key": SECRET, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "shout" };
  return async () => {
    const res = await fetch(url, { method: "POST", headers, body });
    if (!res.ok) throw new Error(`direct call: ${res.status}`);
    await res.text();
  };
}

/** One tools/call straight to the legacy upstream, in a session opened once. */
async function legacyDirect(url) {
  const base = { authorization: `Bearer ${SECRET}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25" };
  const init = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "bench", version: "1" } } };
  const opened = await fetch(url, { method: "POST", headers: base, body: JSON.stringify(init) });
  await opened.text();
  const headers = { ...base, "mcp-session-id": opened.headers.get("mcp-session-id") };
  await (await fetch(url, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) })).text();
  const body = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "echo", arguments: { text: "x" } } });
  return async () => {
    const res = await fetch(url, { method: "POST", headers, body });
    if (!res.ok) throw new Error(`direct call: ${res.status}`);
    await res.text();
  };
}

const timeDirect = (call) => timeCalls(call, { n: N, warmup: WARMUP });

/** Times N mcps.call inside one run (after WARMUP untimed ones). */
async function timeThroughRelay(client, server, tool) {
  const code = `
    const times = [];
    for (let i = 0; i < ${WARMUP + N}; i++) {
      const t0 = Date.now();
      await mcps.call(${JSON.stringify(server)}, ${JSON.stringify(tool)}, { text: "x" });
      if (i >= ${WARMUP}) times.push(Date.now() - t0);
    }
    console.log(JSON.stringify(times));
  `;
  const result = await client.callTool({ name: "run_js", arguments: { code, policy: { limits: { timeoutMs: 300_000 } } } });
  if (result.isError) throw new Error(JSON.stringify(result.structuredContent ?? result));
  return percentiles(JSON.parse(result.structuredContent.stdout));
}

const [legacy, modern] = await Promise.all([startLegacyUpstream(SECRET), startModernUpstream(SECRET)]);
const { key, tenant } = await createTenant("bench-upstream", { policy: { limits: { timeoutMs: 300_000 } }, quotas: BENCH_QUOTAS });
const admin = { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, "content-type": "application/json" };
for (const [name, url, headers] of [["modern", modern.url, { "x-api-key": SECRET }], ["legacy", legacy.url, { authorization: `Bearer ${SECRET}` }]]) {
  const res = await fetch(`${BASE}/admin/tenants/${tenant.id}/upstreams/${name}`, { method: "PUT", headers: admin, body: JSON.stringify({ url, headers }) });
  if (!res.ok) throw new Error(`adding ${name}: ${res.status} ${await res.text()}`);
}
const browser = await launchBrowser();
await openExecutor(browser, key);
const client = await connectClient(key);
try {
  for (const [label, server, tool, direct] of [
    ["modern (2026-07-28)", "modern", "shout", modernDirect(modern.url)],
    ["legacy (2025-11-25, session)", "legacy", "echo", await legacyDirect(legacy.url)],
  ]) {
    const straight = await timeDirect(direct);
    const relayed = await timeThroughRelay(client, server, tool);
    line(`${label}: direct`, straight);
    line(`${label}: mcps.call in a run`, relayed);
    console.log(`${label}: added by the relay at p50: ${(relayed.p50 - straight.p50).toFixed(1)} ms (${(relayed.p50 / straight.p50).toFixed(2)}x)`);
  }
} finally {
  await client.close();
  await browser.close();
  await legacy.close();
  await modern.close();
}
