// What the edge tests (edge.test.mjs, edge-py.test.mjs) share: their tenant with what its runs
// reach, and what they check while a guest runs (that the server answers again, and how soon).

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { connectClient } from "./mcp-client.mjs";
import { BASE, createTenant, devVars } from "./relay.mjs";
import { startModernUpstream } from "./upstream-servers.mjs";

export const EDGE_BUDGET = { cpuMsPerDay: 3_600_000, runsPerMinute: 600 };
export const admin = { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, "content-type": "application/json" };

/**
 * A `tab-or-edge` tenant named `name` with an edge budget, a loopback server its policy allows
 * (`port`: `/hello`, `/to-evil` redirecting off the list, and `/hit`, whose requests `hits()`
 * counts) and an upstream MCP server `modern` holding `secret`; a client of it. `close()` stops them.
 */
export async function edgeTenant(name, secret) {
  let hits = 0;
  const target = createServer((req, res) => {
    if (req.url === "/hit") return res.writeHead(200).end(String(++hits));
    if (req.url === "/hello") return res.writeHead(200, { "content-type": "text/plain" }).end("hello from the target");
    if (req.url === "/to-evil") return res.writeHead(302, { location: "https://evil.example/steal" }).end();
    res.writeHead(404).end();
  });
  await new Promise((resolve) => target.listen(0, resolve));
  const port = target.address().port;
  const upstream = await startModernUpstream(secret);
  const network = { allowedDomains: [`localhost:${port}`], blockPrivateRanges: false, denyIpLiterals: false };
  const { key, tenant } = await createTenant(name, { executor: "tab-or-edge", edge: EDGE_BUDGET, policy: { network }, queue: { attachWaitMs: 1000 } });
  const put = await fetch(`${BASE}/admin/tenants/${tenant.id}/upstreams/modern`, {
    method: "PUT",
    headers: admin,
    body: JSON.stringify({ url: upstream.url, headers: { "x-api-key": secret } }),
  });
  assert.equal(put.status, 200, await put.text());
  const client = await connectClient(key);
  const close = async () => {
    await client.close();
    await upstream.close();
    target.close();
  };
  return { port, key, tenant, client, close, hits: () => hits };
}

// How much later than a run's timeout the server may answer again, on a loaded machine.
export const MARGIN_MS = 15_000;

/**
 * Times `GET /healthz` while `work` runs: every answer's status and latency. wrangler dev's
 * workerd is frozen while a guest computes and answers every probe afterwards, so this proves
 * only that the server came back, and by the slowest probe, how soon.
 */
export async function healthzDuring(work) {
  const answers = [];
  let running = true;
  const probe = (async () => {
    while (running) {
      const started = Date.now();
      const res = await fetch(`${BASE}/healthz`);
      answers.push({ status: res.status, ms: Date.now() - started });
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const result = await work();
  running = false;
  await probe;
  const res = await fetch(`${BASE}/healthz`);
  answers.push({ status: res.status, ms: 0 });
  return { result, answers };
}
