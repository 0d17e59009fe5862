// What the tenant's ledger (README "Quotas") costs: p50/p95 of calls measured in turns (one of
// each per round, so a machine that slows down slows them alike) against a local Worker
// (RELAY_URL): `tools/list` (answered by the Worker: no ledger), `tools/call` of `search` (the
// relay session's DO, which charges the ledger first), and the operator's two reads of a
// tenant, its record (KV only) and its usage (the record, then the ledger): their difference is
// one hop to the ledger. Run it with `bash bench/run.sh quota`.

import { connectClient } from "../miniflare-tests/lib/mcp-client.mjs";
import { BASE, createTenant, devVars } from "../miniflare-tests/lib/relay.mjs";
import { timeInTurns } from "./timing.mjs";

const N = Number(process.env.BENCH_CALLS ?? 200);
const admin = { authorization: `Bearer ${devVars.ADMIN_TOKEN}` };

const { key, tenant } = await createTenant("bench-quota");
const client = await connectClient(key);
const read = async (path) => {
  const res = await fetch(`${BASE}${path}`, { headers: admin });
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
};
const calls = {
  "tools/list": () => client.listTools(),
  "tools/call search": () => client.callTool({ name: "search", arguments: { pattern: "x" } }),
  "GET /admin/tenants/<id>": () => read(`/admin/tenants/${tenant.id}`),
  "GET /admin/tenants/<id>/usage": () => read(`/admin/tenants/${tenant.id}/usage`),
};
const stats = await timeInTurns(Object.values(calls), { n: N, warmup: 20 });
const fmt = (ms) => `${ms.toFixed(2)} ms`.padStart(10);
for (const [i, label] of Object.keys(calls).entries()) {
  console.log(`${label.padEnd(32)} p50 ${fmt(stats[i].p50)}  p95 ${fmt(stats[i].p95)}  (n=${N})`);
}
console.log(`one hop to the ledger (usage - record, p50): ${fmt(stats[3].p50 - stats[2].p50)}`);
await client.close();
