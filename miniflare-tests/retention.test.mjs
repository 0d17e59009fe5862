// The retention sweep (the Cron Trigger, durable/src/edge/retention.rs over
// relay_core::retention), fired through the local runtime's `/cdn-cgi/handler/scheduled` with a
// scheduled time of the test's choosing (wrangler's `--test-scheduled` route, `/__scheduled`,
// takes no time): a tenant's `/out` files stay while a URL of theirs can work (and the
// grace after), then go; its capsule, its workspace body and every layer stay. Each sweep's
// log line is read from the server's log.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { connectClient } from "./lib/mcp-client.mjs";
import { BASE, createTenant, mintRunToken } from "./lib/relay.mjs";
import { storedKeys } from "./lib/local-state.mjs";

const HOUR = 3_600_000;

const r2Keys = (test) => storedKeys("r2", test);

/** Fires the Cron Trigger as of `time` (ms); resolves with the sweep's log line. */
async function sweep(time) {
  const lines = () => readFileSync(process.env.RELAY_SERVER_LOG, "utf8").split("\n").filter((l) => l.startsWith("{") && l.includes('"kind":"retention"'));
  const before = lines().length;
  const res = await fetch(`${BASE}/cdn-cgi/handler/scheduled?cron=17+*+*+*+*&time=${time}`);
  assert.equal(res.status, 200, await res.text());
  for (let i = 0; i < 100 && lines().length === before; i++) await new Promise((r) => setTimeout(r, 100));
  assert.ok(lines().length > before, "the sweep logged its line");
  const line = JSON.parse(lines().at(-1));
  assert.equal(line.asOfMs, time, "the sweep ran as of the time asked");
  return line;
}

test("an /out file goes once its URLs and the grace are over; capsules, layers and workspace bodies stay", async () => {
  const { tenant, key } = await createTenant("retention");
  const capsule = await fetch(`${BASE}/capsules`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify({ language: "js", code: "console.log('kept')" }) });
  assert.equal(capsule.status, 201);
  const { hash } = await capsule.json();
  const token = mintRunToken({ tenant: tenant.id, run: "r_ret", capsule: hash });
  const uploaded = Date.now();
  for (const name of ["a.txt", "b.csv"]) {
    const res = await fetch(`${BASE}/files/r_ret/out/${name}`, { method: "PUT", headers: { authorization: `Bearer ${token}` }, body: name });
    assert.equal(res.status, 201);
  }
  const client = await connectClient(key);
  assert.ok(!(await client.callTool({ name: "write", arguments: { path: "/tmp/live.txt", content: "w".repeat(10_000) } })).isError);
  await client.close();
  const mine = (k) => k.includes(tenant.id);
  const others = () => r2Keys((k) => mine(k) && !k.startsWith("files/")).sort();
  const kept = others();
  assert.equal(kept.length, 2, `its capsule and workspace body: ${kept}`);
  const layers = r2Keys((k) => k.startsWith("layers/")).sort();
  const files = () => r2Keys((k) => k.startsWith(`files/${tenant.id}/`)).sort();
  assert.deepEqual(files(), [`files/${tenant.id}/r_ret/out/a.txt`, `files/${tenant.id}/r_ret/out/b.csv`]);

  for (const after of [0, 3 * HOUR]) {
    const line = await sweep(uploaded + after);
    assert.equal(line.deletedByTenant[tenant.id], undefined, `nothing of it at +${after / HOUR} h`);
    assert.equal(files().length, 2);
  }
  const line = await sweep(uploaded + 4 * HOUR);
  console.log(`sweep: ${JSON.stringify(line)}`);
  assert.equal(line.deletedByTenant[tenant.id], 2);
  assert.ok(line.scanned >= 2 && line.deleted >= 2);
  assert.deepEqual(files(), []);
  assert.deepEqual(others(), kept, "its capsule and workspace body stay");
  assert.deepEqual(r2Keys((k) => k.startsWith("layers/")).sort(), layers, "every layer stays");
  const reread = await connectClient(key);
  const read = await reread.callTool({ name: "read", arguments: { path: "/tmp/live.txt" } });
  assert.ok(!read.isError && JSON.stringify(read).includes("wwww"), "the workspace file reads whole");
  await reread.close();
});
