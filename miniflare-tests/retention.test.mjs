// The retention sweep (the Cron Trigger, durable/src/edge/retention.rs over
// relay_core::retention), fired through the local runtime's `/cdn-cgi/handler/scheduled` with a
// scheduled time of the test's choosing (wrangler's `--test-scheduled` route, `/__scheduled`,
// takes no time): a tenant's `/out` files stay while a URL of theirs can work (and the
// grace after), then go; capsules go once unused for the tenant's `retention.unusedDays`, and
// layers once nothing standing names them; a relay session's workspace bodies no file names go
// after their grace. Each sweep's log lines are read from the server's log.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { launchBrowser, openExecutor } from "./lib/browser.mjs";
import { connectClient } from "./lib/mcp-client.mjs";
import { createHash } from "node:crypto";
import { attach, BASE, createTenant, mintRunToken } from "./lib/relay.mjs";
import { storedKeys } from "./lib/local-state.mjs";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** The kinds a sweep logs a line for, in its order (last, what each tenant stores, measured). */
const KINDS = ["out files", "capsules", "build records", "layers", "workspace bodies", "runtime snapshots", "stored bytes"];

const r2Keys = (test) => storedKeys("r2", test);

/** Fires the Cron Trigger as of `time` (ms); resolves with the sweep's log lines by `what`. */
async function sweepAll(time) {
  const lines = () => readFileSync(process.env.RELAY_SERVER_LOG, "utf8").split("\n").filter((l) => l.startsWith("{") && l.includes('"kind":"retention"'));
  const before = lines().length;
  const res = await fetch(`${BASE}/cdn-cgi/handler/scheduled?cron=17+*+*+*+*&time=${time}`);
  assert.equal(res.status, 200, await res.text());
  for (let i = 0; i < 100 && lines().length < before + KINDS.length; i++) await new Promise((r) => setTimeout(r, 100));
  const logged = lines().slice(before).map((l) => JSON.parse(l));
  assert.deepEqual(logged.map((l) => l.what), KINDS, "the sweep logged a line for each kind");
  for (const line of logged) assert.equal(line.asOfMs, time, "the sweep ran as of the time asked");
  return Object.fromEntries(logged.map((l) => [l.what, l]));
}

/** The `/out` files' line of a sweep as of `time`. */
const sweep = async (time) => (await sweepAll(time))["out files"];

/** Stores a capsule of `code` for the tenant of `key` (`POST /capsules`); its hash and layer. */
async function storeCapsule(key, code) {
  const res = await fetch(`${BASE}/capsules`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify({ language: "js", code }) });
  const body = await res.json();
  assert.equal(res.status, 201, JSON.stringify(body));
  const { hash, manifest } = body;
  return { hash, layers: manifest.fsLayers.map((l) => `layers/${l.sha256}`) };
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

test("capsules unused for the tenant's days go with the layers nothing else names; one used since stays and its next identical call runs", async () => {
  const { tenant, key } = await createTenant("retention-short", { retention: { unusedDays: 1 } });
  const other = await createTenant("retention-default");
  const unused = await storeCapsule(key, "console.log('unused, its layer its own')");
  const shared = await storeCapsule(key, "console.log('a layer two tenants have')");
  const othersCopy = await storeCapsule(other.key, "console.log('a layer two tenants have')");
  assert.deepEqual(othersCopy.layers, shared.layers, "the same code is one layer in R2");
  const storedAt = Date.now();
  await new Promise((r) => setTimeout(r, 3_000));

  const browser = await launchBrowser();
  try {
    const tab = await openExecutor(browser, key);
    const client = await connectClient(key);
    const call = () => client.callTool({ name: "run_js", arguments: { code: "console.log('in use')" } });
    const first = await call();
    assert.ok(!first.isError, JSON.stringify(first));
    const manifests = () => r2Keys((k) => k.startsWith(`capsules/${tenant.id}/`)).sort();
    const [used] = manifests().filter((k) => ![unused.hash, shared.hash].some((h) => k.includes(h)));
    assert.ok(used, `the run's capsule is stored: ${manifests()}`);
    const layersBefore = r2Keys((k) => k.startsWith("layers/"));

    // A day and a second after the first capsules: they are unused for the tenant's day; the
    // run's, stored 3 s later, is not. The other tenant keeps its copy (7 days), so the layer
    // the two share stays.
    const lines = await sweepAll(storedAt + DAY + 1_000);
    console.log(`sweep: ${JSON.stringify(lines.capsules)} ${JSON.stringify(lines.layers)}`);
    assert.equal(lines.capsules.deletedByTenant[tenant.id], 2);
    assert.equal(lines.capsules.deletedByTenant[other.tenant.id], undefined);
    assert.deepEqual(manifests(), [used], "its unused capsules are gone, the one in use stays");
    assert.equal(r2Keys((k) => k.startsWith(`capsules/${other.tenant.id}/`)).length, 1);
    const layersAfter = r2Keys((k) => k.startsWith("layers/"));
    assert.ok(!layersAfter.includes(unused.layers[0]), "the layer only the deleted capsule named is gone");
    assert.ok(layersAfter.includes(shared.layers[0]), "the layer a standing capsule names stays");
    assert.equal(lines.layers.deleted, layersBefore.length - layersAfter.length);

    const again = await call();
    assert.ok(!again.isError, `the capsule in use runs again: ${JSON.stringify(again)}`);
    assert.match(JSON.stringify(again.structuredContent), /in use/);
    await client.close();
    await tab.context.close();
  } finally {
    await browser.close();
  }
});

const sha256 = (text) => createHash("sha256").update(text).digest("hex");

test("workspace bodies no file names go after their grace; a live file stays readable, a body uploaded for a commit stays its grace", async () => {
  const { tenant, key } = await createTenant("retention-bodies");
  const client = await connectClient(key);
  try {
    await bodiesGoAfterTheirGrace(tenant, key, client);
  } finally {
    await client.close();
  }
});

async function bodiesGoAfterTheirGrace(tenant, key, client) {
  const write = async (path, content) => {
    const written = await client.callTool({ name: "write", arguments: { path, content, mode: "overwrite" } });
    assert.ok(!written.isError, JSON.stringify(written));
  };
  const [live, replaced, pending] = ["live ", "replaced ", "pending "].map((word) => word.repeat(2_000)); // in R2, not inline
  await write("/tmp/live.txt", live);
  await write("/tmp/replaced.txt", replaced);
  await write("/tmp/replaced.txt", "now small");
  // A tab uploads a body ahead of the commit that will name it.
  const { attachToken } = await attach(key, "default");
  const put = await fetch(`${BASE}/session/default/workspace/bodies/${sha256(pending)}`, { method: "PUT", headers: { authorization: `Bearer ${attachToken}` }, body: pending });
  assert.equal(put.status, 201, await put.text());
  const stored = Date.now();
  const bodies = () => r2Keys((k) => k.startsWith(`workspace/${tenant.id}/`)).sort();
  const body = (content) => `workspace/${tenant.id}/default/${sha256(content)}`;
  assert.deepEqual(bodies(), [live, replaced, pending].map(body).sort(), "each under its relay session's prefix");

  // Two hours on, within the grace (a run's life and an hour): every body stays.
  const within = await sweepAll(stored + 2 * HOUR);
  assert.equal(within["workspace bodies"].deletedByTenant[tenant.id], undefined, JSON.stringify(within["workspace bodies"]));
  assert.equal(bodies().length, 3);
  // Three hours on: the replaced body and the upload no commit named are gone, the live file's stays.
  const after = await sweepAll(stored + 3 * HOUR);
  console.log(`sweep: ${JSON.stringify(after["workspace bodies"])}`);
  assert.equal(after["workspace bodies"].deletedByTenant[tenant.id], 2);
  assert.deepEqual(bodies(), [body(live)]);
  const read = async (path) => (await client.callTool({ name: "read", arguments: { path, maxBytes: 100_000 } })).structuredContent;
  assert.equal((await read("/tmp/live.txt")).content, live, "the live file reads whole");
  assert.equal((await read("/tmp/replaced.txt")).content, "now small");
  // Written again, a deleted body is stored again.
  await write("/tmp/back.txt", replaced);
  assert.equal((await read("/tmp/back.txt")).content, replaced);
}
