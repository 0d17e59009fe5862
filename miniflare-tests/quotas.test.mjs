// A tenant's quotas (defaults.quotas, README "Quotas") under workerd, each on a test tenant of
// its own with small quotas: calls a minute, live relay sessions, runs in flight (edge runs held
// open by a loopback server, so no tab is needed), egress requests and bytes a day. Each one
// reached answers 429 QuotaExceeded with Retry-After and a message naming the quota, its value
// and what was used; a slot comes back (a run ending, the next minute, a PATCH raising it);
// relay://usage and GET /admin/tenants/<id>/usage show what was done; bad values are 400; a
// deleted tenant's ledger is erased with it; bytes stored are charged on each put and measured
// by the retention sweep (fired as retention.test.mjs does). A relay session the quota refuses is never created
// nor listed in KV (read from wrangler dev's own state).

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import { connectClient } from "./lib/mcp-client.mjs";
import { modernCall } from "./lib/mcp-http.mjs";
import { storedKeys } from "./lib/local-state.mjs";
import { BASE, attach, createTenant, devVars, mintRunToken, patchTenant } from "./lib/relay.mjs";

const admin = { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, "content-type": "application/json" };
const BUDGET = { cpuMsPerDay: 3_600_000, runsPerMinute: 600 };

let server; // a loopback upstream: /hello answers, /gate answers when the test opens it
let port;
const gates = [];
const openGates = () => gates.splice(0).forEach((res) => res.writeHead(200).end("opened"));

before(async () => {
  server = createServer((req, res) => {
    if (req.url === "/gate") return gates.push(res);
    res.writeHead(200, { "content-type": "text/plain" }).end("hello");
  });
  server.listen(0);
  await once(server, "listening");
  port = server.address().port;
});

after(() => {
  openGates();
  server.close();
});

/** A tool call of `name` over raw 2026-07-28 HTTP: `{status, res, message}`. */
const call = (key, name, args, session) => modernCall(key, "tools/call", { name, arguments: args }, { session });
const metricsOf = async (id) =>
  (await fetch(`${BASE}/admin/metrics?tenant=${id}`, { headers: { ...admin, accept: "application/json" } })).json();
const search = (key, session) => call(key, "search", { pattern: "x" }, session);

/** What `relay://usage` says, through the official SDK client. */
async function usageOf(key) {
  const client = await connectClient(key);
  try {
    const { contents } = await client.readResource({ uri: "relay://usage" });
    return JSON.parse(contents[0].text);
  } finally {
    await client.close();
  }
}

/** Asserts a 429 QuotaExceeded naming `quota` with `limit` and `used`; returns its Retry-After (s). */
function assertQuotaRefusal({ status, res, message }, quota, limit, used) {
  assert.equal(status, 429, JSON.stringify(message));
  const retry = Number(res.headers.get("retry-after"));
  assert.ok(retry >= 1, `Retry-After ${res.headers.get("retry-after")}`);
  const data = message.error.data;
  assert.deepEqual(data, { name: "QuotaExceeded", quota: `defaults.quotas.${quota}`, limit, used, retryAfterS: retry });
  assert.match(message.error.message, new RegExp(`defaults\\.quotas\\.${quota} is reached: ${used} of ${limit} `));
  assert.match(message.error.message, /retry in \d+ s\. The relay's operator can raise it \(PATCH \/admin\/tenants\/<id> with defaults\.quotas\)/);
  return retry;
}

describe("quotas per tenant", () => {
  test("bad quota values are refused 400 naming the field, by POST and PATCH", async () => {
    for (const [quotas, field] of [
      [{ callsPerMinute: 0 }, "defaults.quotas.callsPerMinute"],
      [{ runsInFlight: 1001 }, "defaults.quotas.runsInFlight"],
      [{ relaySessions: -1 }, "defaults.quotas.relaySessions is -1"],
      [{ egressBytesPerDay: "1" }, "defaults.quotas.egressBytesPerDay is \"1\""],
      [{ callsPerMinutes: 5 }, "defaults.quotas.callsPerMinutes"],
      [{ storedBytes: 1000 }, "defaults.quotas.storedBytes is 1000; it must be between 1048576 and 1099511627776"],
    ]) {
      const res = await fetch(`${BASE}/admin/tenants`, { method: "POST", headers: admin, body: JSON.stringify({ name: "bad", defaults: { quotas } }) });
      const body = await res.json();
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(body.error.name, "ValidationError");
      assert.ok(body.error.message.includes(field), body.error.message);
    }
    const { tenant } = await createTenant("patched");
    const res = await patchTenant(tenant.id, { defaults: { quotas: { egressRequestsPerDay: 0 } } });
    const body = await res.json();
    assert.equal(res.status, 400);
    assert.match(body.error.message, /defaults\.quotas\.egressRequestsPerDay is 0; it must be between 1 and 10000000/);
    const shown = await (await fetch(`${BASE}/admin/tenants/${tenant.id}`, { headers: admin })).json();
    assert.deepEqual(shown.tenant.defaults.quotas, {
      callsPerMinute: 1200, relaySessions: 100, runsInFlight: 200, egressRequestsPerDay: 10000, egressBytesPerDay: 1073741824,
      storedBytes: 10737418240,
    });
  });

  test("calls a minute: the 4th tools/call of 3 is refused until the next minute or a PATCH; other methods are not charged", async () => {
    const { key, tenant } = await createTenant("calls", { quotas: { callsPerMinute: 3 } });
    // Wait for a minute's start if this one is almost over, so the three calls share a window.
    if (Date.now() % 60_000 > 45_000) await new Promise((r) => setTimeout(r, 60_000 - (Date.now() % 60_000) + 100));
    for (let i = 0; i < 3; i++) assert.equal((await search(key)).status, 200);
    assert.equal((await modernCall(key, "tools/list")).status, 200, "tools/list is not a call");
    const refused = await search(key);
    const retry = assertQuotaRefusal(refused, "callsPerMinute", 3, 3);
    assert.ok(retry <= 60);
    const usage = await usageOf(key);
    assert.equal(usage.callsPerMinute.used, 3, JSON.stringify(usage));
    assert.equal(usage.callsPerMinute.limit, 3);
    // The SDK client sees the same refusal as a JSON-RPC error.
    const client = await connectClient(key);
    await assert.rejects(client.callTool({ name: "search", arguments: { pattern: "x" } }), /defaults\.quotas\.callsPerMinute is reached: 3 of 3/);
    await client.close();
    // A PATCH raising it takes effect at once.
    assert.equal((await patchTenant(tenant.id, { defaults: { quotas: { callsPerMinute: 4 } } })).status, 200);
    assert.equal((await search(key)).status, 200);
    assertQuotaRefusal(await search(key), "callsPerMinute", 4, 4);
    // The next minute, calls pass again.
    const wait = Number((await search(key)).res.headers.get("retry-after"));
    console.log(`# waiting ${wait} s for the next minute`);
    await new Promise((r) => setTimeout(r, wait * 1000 + 200));
    assert.equal((await search(key)).status, 200);
  });

  test("calls a minute count each run's call once, whichever hop charges it: runs, a run refused its slot, a run with bad arguments", async () => {
    const network = { allowedDomains: [`localhost:${port}`], blockPrivateRanges: false, denyIpLiterals: false };
    const quotas = { callsPerMinute: 5, runsInFlight: 1 };
    const { key, tenant } = await createTenant("run-calls", { executor: "edge", edge: BUDGET, policy: { network }, quotas });
    if (Date.now() % 60_000 > 40_000) await new Promise((r) => setTimeout(r, 60_000 - (Date.now() % 60_000) + 100));
    // The first is charged by the Worker (its relay session not admitted yet); the Worker leaves
    // the next ones to the relay session, which charges each call with its run in one hop.
    const first = await call(key, "run_js", { code: "console.log(1)" });
    assert.equal(first.message.result?.structuredContent?.stdout, "1\n", JSON.stringify(first.message));
    const held = call(key, "run_js", { code: `const r = await fetch("http://localhost:${port}/gate"); console.log(await r.text());` });
    while (gates.length === 0) await new Promise((r) => setTimeout(r, 50));
    assertQuotaRefusal(await call(key, "run_js", { code: "console.log(2)" }), "runsInFlight", 1, 1);
    const bad = await call(key, "run_js", { code: 5 });
    assert.ok(bad.message.result?.isError || bad.message.error, JSON.stringify(bad.message));
    openGates();
    assert.equal((await held).message.result?.structuredContent?.stdout, "opened\n");
    assert.equal((await usageOf(key)).callsPerMinute.used, 4, "two runs, the refused run's call and the bad one's");
    for (let i = 0; i < 50 && (await usageOf(key)).runsInFlight.used > 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal((await call(key, "run_js", { code: "console.log(3)" })).message.result?.structuredContent?.stdout, "3\n");
    assertQuotaRefusal(await call(key, "run_js", { code: "console.log(4)" }), "callsPerMinute", 5, 5);
    assert.deepEqual((await usageOf(key)).callsPerMinute.used, 5);
    // Refused there, the relay session's calls are charged by the Worker again for the minute,
    // though the usage read above admitted it again: the next refusals cost the relay session
    // nothing (its requests counted; a metrics read costs what it costs).
    const requests = async () => (await metricsOf(tenant.id)).wakeups.request ?? 0;
    const [a, b] = [await requests(), await requests()];
    for (const n of [5, 6, 7]) assertQuotaRefusal(await call(key, "run_js", { code: `console.log(${n})` }), "callsPerMinute", 5, 5);
    assert.equal((await requests()) - b, b - a, "refused calls reached the relay session");
  });

  test("relay sessions: a tenant with 1 live relay session is refused a second, while the first stays usable", async () => {
    const { key, tenant } = await createTenant("sessions", { quotas: { relaySessions: 1 } });
    assert.equal((await search(key, "first")).status, 200);
    const retry = assertQuotaRefusal(await search(key, "second"), "relaySessions", 1, 1);
    assert.ok(retry > 500 && retry <= 600, `a relay session idles after 10 minutes: ${retry}`);
    assert.equal((await search(key, "first")).status, 200);
    const usage = await (await fetch(`${BASE}/admin/tenants/${tenant.id}/usage`, { headers: admin })).json();
    assert.deepEqual(usage.usage.relaySessions, { limit: 1, used: 1, live: ["first"] });
    // The operator's metrics carry the same figures as gauges.
    const metrics = await (await fetch(`${BASE}/admin/metrics?tenant=${tenant.id}`, { headers: admin })).text();
    assert.match(metrics, new RegExp(`^relay_quota_limit\\{tenant="${tenant.id}",quota="relaySessions"\\} 1$`, "m"), metrics);
    assert.match(metrics, new RegExp(`^relay_quota_used\\{tenant="${tenant.id}",quota="relaySessions"\\} 1$`, "m"), metrics);
  });

  test("relay sessions: a refused one is never created nor listed, whether by tools/call, another MCP request or a tab's attach", async () => {
    const { key, tenant } = await createTenant("sessions-listed", { quotas: { relaySessions: 1 } });
    assert.equal((await search(key, "a")).status, 200);
    assertQuotaRefusal(await search(key, "b"), "relaySessions", 1, 1);
    // A method the Worker does not answer itself reaches a relay session too: admitted the same way.
    assertQuotaRefusal(await modernCall(key, "resources/read", { uri: "relay://session" }, { session: "b" }), "relaySessions", 1, 1);
    const attached = await fetch(`${BASE}/session`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ session: "c" }),
    });
    const body = await attached.json();
    assert.equal(attached.status, 429, JSON.stringify(body));
    assert.equal(body.error.name, "QuotaExceeded");
    assert.match(body.error.message, /defaults\.quotas\.relaySessions is reached: 1 of 1 /);
    assert.ok(Number(attached.headers.get("retry-after")) > 500);
    // Only `a` was ever made: its Durable Object lists itself under the tenant before it answers.
    const prefix = `relay-session:${tenant.id}:`;
    assert.deepEqual(storedKeys("kv", (k) => k.startsWith(prefix)), [`${prefix}a`]);
    // A tab attaching to the live one is admitted.
    assert.equal((await fetch(`${BASE}/session`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: JSON.stringify({ session: "a" }) })).status, 200);
  });

  test("runs in flight: a second run waits for the first to end, across relay sessions; its end frees the slot", async () => {
    const network = { allowedDomains: [`localhost:${port}`], blockPrivateRanges: false, denyIpLiterals: false };
    const { key } = await createTenant("in-flight", { executor: "edge", edge: BUDGET, policy: { network }, quotas: { runsInFlight: 1 } });
    const held = call(key, "run_js", { code: `const r = await fetch("http://localhost:${port}/gate"); console.log(await r.text());` }, "one");
    while (gates.length === 0) await new Promise((r) => setTimeout(r, 50));
    assertQuotaRefusal(await call(key, "run_js", { code: "console.log(2)" }, "two"), "runsInFlight", 1, 1);
    const usage = await usageOf(key);
    assert.deepEqual(usage.runsInFlight, { limit: 1, used: 1 });
    // A file tool takes no slot.
    assert.equal((await call(key, "write", { path: "/tmp/a.txt", content: "a" }, "one")).status, 200);
    openGates();
    const first = await held;
    assert.equal(first.message.result.structuredContent.stdout, "opened\n", JSON.stringify(first.message));
    // The end reaches the ledger without the client waiting for it: poll briefly.
    const started = Date.now();
    let second;
    for (let i = 0; i < 50; i++) {
      second = await call(key, "run_js", { code: "console.log(2)" }, "two");
      if (second.status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    console.log(`# the slot came back ${Date.now() - started} ms after the first run's answer`);
    assert.equal(second.status, 200, JSON.stringify(second.message));
    assert.equal(second.message.result.structuredContent.stdout, "2\n");
    assert.equal((await usageOf(key)).runsInFlight.used, 0);
  });

  test("edge CPU a day is the tenant's: time spent in one relay session is refused in another, and shown in relay://usage", async () => {
    const { key } = await createTenant("edge-day", { executor: "edge", edge: { cpuMsPerDay: 1, runsPerMinute: 600 } });
    const first = await call(key, "run_js", { code: "console.log(1)" }, "one");
    assert.equal(first.message.result.structuredContent.executor, "edge", JSON.stringify(first.message));
    // The run's end reaches the ledger without the client waiting for it.
    let usage;
    for (let i = 0; i < 50; i++) {
      usage = await usageOf(key);
      if (usage.edgeCpuMsPerDay.used > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    console.log(`# edge ms charged for the first run: ${usage.edgeCpuMsPerDay.used}`);
    assert.equal(usage.edgeCpuMsPerDay.limit, 1);
    assert.ok(usage.edgeCpuMsPerDay.used >= 1, JSON.stringify(usage));
    const other = await call(key, "run_js", { code: "console.log(2)" }, "two");
    const out = other.message.result.structuredContent;
    assert.equal(out.error?.name, "EdgeBudgetExceeded", JSON.stringify(out));
    assert.match(out.error.message, new RegExp(`${usage.edgeCpuMsPerDay.used} of 1 ms \\(defaults\\.edge\\.cpuMsPerDay\\)`));
  });

  test("egress: requests and bytes a day through /egress", async () => {
    const network = { allowedDomains: [`localhost:${port}`], blockPrivateRanges: false, denyIpLiterals: false };
    const { key, tenant } = await createTenant("egress-quota", { policy: { network }, quotas: { egressRequestsPerDay: 2 } });
    const capsule = await createCapsule(key);
    const egress = () => fetch(`${BASE}/egress`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${mintRunToken({ tenant: tenant.id, run: "r_q", capsule })}` },
      body: JSON.stringify({ url: `http://localhost:${port}/hello`, method: "GET", headers: [] }),
    });
    for (let i = 0; i < 2; i++) assert.equal((await egress()).status, 200);
    const refused = await egress();
    const body = await refused.json();
    assert.equal(refused.status, 429, JSON.stringify(body));
    assert.equal(body.error.name, "QuotaExceeded");
    assert.match(body.error.message, /defaults\.quotas\.egressRequestsPerDay is reached: 2 of 2 egress requests today \(UTC\); it comes back at 00:00 UTC/);
    assert.ok(Number(refused.headers.get("retry-after")) <= 86_400);
    const { usage } = await (await fetch(`${BASE}/admin/tenants/${tenant.id}/usage`, { headers: admin })).json();
    assert.equal(usage.egressRequestsPerDay.used, 2);
    const envelopeBytes = JSON.stringify({ url: `http://localhost:${port}/hello`, method: "GET", headers: [] }).length;
    assert.equal(usage.egressBytesPerDay.used, 2 * (envelopeBytes + "hello".length), JSON.stringify(usage));
    // Bytes: past the day's bytes, the next request is refused naming that quota.
    assert.equal((await patchTenant(tenant.id, { defaults: { quotas: { egressRequestsPerDay: 100, egressBytesPerDay: 10 } } })).status, 200);
    const overBytes = await egress();
    assert.equal(overBytes.status, 429);
    assert.match((await overBytes.json()).error.message, /defaults\.quotas\.egressBytesPerDay is reached: \d+ of 10 egress bytes today/);
  });

  test("the operator's view, and a deleted tenant's ledger erased with it", async () => {
    const { key, tenant } = await createTenant("ledger-life");
    assert.equal((await search(key)).status, 200);
    assert.equal((await fetch(`${BASE}/admin/tenants/${tenant.id}/usage`)).status, 401);
    assert.equal((await fetch(`${BASE}/admin/tenants/t_nobody/usage`, { headers: admin })).status, 404);
    const { usage } = await (await fetch(`${BASE}/admin/tenants/${tenant.id}/usage`, { headers: admin })).json();
    assert.equal(usage.callsPerMinute.used, 1);
    assert.deepEqual(usage.relaySessions.live, ["default"]);
    const deleted = await (await fetch(`${BASE}/admin/tenants/${tenant.id}`, { method: "DELETE", headers: admin })).json();
    assert.equal(deleted.deleted.ledger, 1, JSON.stringify(deleted));
    // Made again under the same id, it starts from nothing.
    await fetch(`${BASE}/admin/tenants`, { method: "POST", headers: admin, body: JSON.stringify({ id: tenant.id, name: "again" }) });
    const again = await (await fetch(`${BASE}/admin/tenants/${tenant.id}/usage`, { headers: admin })).json();
    assert.equal(again.usage.callsPerMinute.used, 0, JSON.stringify(again));
    assert.deepEqual(again.usage.relaySessions.live, []);
  });
  test("bytes stored: a workspace write, an /out file and a run's capsule are refused once over, each with Retry-After, and a run sees what it could not store; the hourly measurement brings it down after files are deleted", async () => {
    const MIB = 1 << 20;
    const { key, tenant } = await createTenant("stored", { executor: "edge", edge: BUDGET, quotas: { storedBytes: MIB } });
    const hash = await createCapsule(key); // its capsule.json and code layer are charged
    // A run at the edge that leaves an /out file and a workspace body (new each time), run now
    // with room and again once the quota is reached (its capsule stored by then: admitted).
    const storing = `import fs from "fs"; fs.writeFileSync("/out/x.txt", "x".repeat(1000)); fs.writeFileSync("/tmp/w.txt", "w".repeat(20000) + Date.now()); console.log("done");`;
    const first = (await call(key, "run_js", { code: storing })).message.result;
    assert.equal(first.structuredContent.exitCode, 0, JSON.stringify(first));
    assert.ok(first.structuredContent.files[0].url && !first.structuredContent.files[0].error, JSON.stringify(first.structuredContent.files));
    const write = (path, size) => call(key, "write", { path, content: path.at(-1).repeat(size) }); // a body each
    assert.ok(!(await write("/tmp/a", 600_000)).message.result.isError);
    const over = (await write("/tmp/b", 600_000)).message.result;
    assert.equal(over.isError, true, JSON.stringify(over));
    assert.match(over.content[0].text, /QuotaExceeded[\s\S]*defaults\.quotas\.storedBytes is reached: \d+ of 1048576 bytes stored/);
    // A schema-validating client (the official SDK's callTool checks structuredContent against
    // the tool's outputSchema even when isError) reads the refusal, and when to retry.
    const client = await connectClient(key);
    try {
      await client.listTools(); // the SDK validates a tool's results once it has listed its schema
      const sdk = await client.callTool({ name: "write", arguments: { path: "/tmp/sdk", content: "s".repeat(600_000) } });
      assert.equal(sdk.isError, true, JSON.stringify(sdk.structuredContent));
      const { error } = sdk.structuredContent;
      assert.equal(error.name, "QuotaExceeded", JSON.stringify(error));
      assert.equal(error.quota, "defaults.quotas.storedBytes");
      assert.equal(error.limit, MIB);
      assert.ok(Number.isInteger(error.retryAfterS) && error.retryAfterS >= 1, JSON.stringify(error));
    } finally {
      await client.close();
    }
    let { storedBytes } = await usageOf(key);
    console.log(`# storedBytes after a 600,000-byte write and a capsule: ${JSON.stringify(storedBytes)}`);
    assert.equal(storedBytes.measured, null, "never measured yet");
    assert.ok(storedBytes.used > 621_000 && storedBytes.used < 640_000, JSON.stringify(storedBytes));
    const usedBefore = storedBytes.used;
    const metrics = await (await fetch(`${BASE}/admin/metrics?tenant=${tenant.id}`, { headers: admin })).text();
    const gauge = new RegExp(`^relay_quota_used\\{tenant="${tenant.id}",quota="storedBytes"\\} (\\d+)$`, "m");
    assert.equal(Number(metrics.match(gauge)?.[1]), storedBytes.used, metrics);
    assert.match(metrics, new RegExp(`^relay_quota_limit\\{tenant="${tenant.id}",quota="storedBytes"\\} ${MIB}$`, "m"));
    // An /out file fills it to 10 bytes short; the next, of 11 bytes, is refused 429.
    const token = mintRunToken({ tenant: tenant.id, run: "r_stored", capsule: hash });
    const put = (name, size) => fetch(`${BASE}/files/r_stored/out/${name}`, { method: "PUT", headers: { authorization: `Bearer ${token}` }, body: "f".repeat(size) });
    assert.equal((await put("big.bin", MIB - storedBytes.used - 10)).status, 201);
    const refused = await put("more.bin", 11);
    const body = await refused.json();
    assert.equal(refused.status, 429, JSON.stringify(body));
    assert.equal(body.error.name, "QuotaExceeded");
    assert.match(body.error.message, /defaults\.quotas\.storedBytes is reached: 1048566 of 1048576 bytes stored \(capsules and their layers, build records, \/out files, workspace bodies\), which a put of 11 bytes would pass/);
    assert.ok(Number(refused.headers.get("retry-after")) >= 1);
    // A tab's body upload is refused alike, with Retry-After (not a storage failure to retry).
    const { attachToken } = await attach(key, "default");
    const pending = "p".repeat(20_000);
    const sha = createHash("sha256").update(pending).digest("hex");
    const upload = await fetch(`${BASE}/session/default/workspace/bodies/${sha}`, { method: "PUT", headers: { authorization: `Bearer ${attachToken}` }, body: pending });
    assert.equal(upload.status, 429, await upload.clone().text());
    assert.equal((await upload.json()).error.name, "QuotaExceeded");
    assert.ok(Number(upload.headers.get("retry-after")) >= 1, "Retry-After on the body's 429");
    // The run again: its /out file and its body are refused; the result and stderr say so.
    const again = (await call(key, "run_js", { code: storing })).message.result;
    const { files, stderr } = again.structuredContent;
    console.log(`# the run over the quota: files ${JSON.stringify(files)}, stderr ${JSON.stringify(stderr)}`);
    assert.equal(files[0].path, "/out/x.txt");
    assert.equal(files[0].url, undefined);
    assert.equal(files[0].error.name, "QuotaExceeded", JSON.stringify(files));
    assert.match(files[0].error.message, /defaults\.quotas\.storedBytes/);
    assert.match(stderr, /\/out\/x\.txt was not stored: QuotaExceeded: .*defaults\.quotas\.storedBytes/);
    assert.match(stderr, /\/tmp\/w\.txt was not kept in the workspace: QuotaExceeded: .*defaults\.quotas\.storedBytes/);
    // A run whose capsule is new: refused at its admission (the same hop as its slot), 429
    // with Retry-After, before its capsule is stored.
    const run = await call(key, "run_js", { code: "console.log('new')" });
    assert.equal(run.status, 429, JSON.stringify(run.message));
    assert.equal(run.message.error.data.quota, "defaults.quotas.storedBytes", JSON.stringify(run.message));
    assert.ok(Number(run.res.headers.get("retry-after")) >= 1);
    // The sweep 4 hours on deletes the /out file; its measurement sees what is left.
    const time = Date.now() + 4 * 3_600_000;
    const res = await fetch(`${BASE}/cdn-cgi/handler/scheduled?cron=17+*+*+*+*&time=${time}`);
    assert.equal(res.status, 200);
    for (let i = 0; i < 100 && storedBytes.measuredAtMs !== time; i++) {
      await new Promise((r) => setTimeout(r, 100));
      ({ storedBytes } = await usageOf(key));
    }
    console.log(`# storedBytes measured after the sweep: ${JSON.stringify(storedBytes)}`);
    assert.equal(storedBytes.measuredAtMs, time, JSON.stringify(storedBytes));
    assert.equal(storedBytes.used, storedBytes.measured, "the charges before the listing are in the measurement");
    assert.ok(storedBytes.measured >= 621_000 && storedBytes.measured < 640_000, JSON.stringify(storedBytes));
    // Exactly what was charged less the deleted /out file (1,000 bytes; big.bin came after the
    // figure): a capsule charged twice, or a refused put's bytes kept, would show here.
    assert.equal(storedBytes.measured, usedBefore - 1000, JSON.stringify(storedBytes));
    assert.ok(!(await write("/tmp/c", 300_000)).message.result.isError, "there is room again");
  });
});

async function createCapsule(key) {
  const res = await fetch(`${BASE}/capsules`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ language: "js", code: "1" }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()).hash;
}
