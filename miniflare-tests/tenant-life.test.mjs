// A tenant's whole life over raw HTTP (durable/src/edge/tenant_life.rs; the rules are
// relay_core::auth::{keyring, lifecycle}): list tenants without secrets, rotate a key (the old
// one works within its grace, not after), revoke one, export the audit chains, and delete a
// tenant with all its data, answered with counts per kind; then nothing of it is left in the
// local server's KV or R2 (read from wrangler dev's own state, as oauth.test.mjs does), and
// another tenant's data is untouched. Every route's refusals with their status and error name.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { readdirSync } from "node:fs";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { describe, test } from "node:test";
import { connectClient } from "./lib/mcp-client.mjs";
import { sseEvents } from "./lib/mcp-http.mjs";
import { BASE, ROOT, attach, createTenant, devVars, holdLease, mintRunToken, relayCapsule } from "./lib/relay.mjs";
import { storedKeys } from "./lib/local-state.mjs";

const ADMIN = { authorization: `Bearer ${devVars.ADMIN_TOKEN}` };
const admin = (method, route, body, headers = ADMIN) =>
  fetch(`${BASE}${route}`, { method, headers: { ...headers, "content-type": "application/json" }, body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body) });
const sha256 = (text) => createHash("sha256").update(text).digest("hex");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The status of `POST /session` with `key` (any route behind a tenant key would do). */
const keyStatus = async (key) => {
  const res = await fetch(`${BASE}/session`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: "{}" });
  return { status: res.status, body: await res.json() };
};

/** Asserts a refusal's status and error name; returns its message. */
async function refusal(res, status, name) {
  const body = await res.json();
  assert.equal(res.status, status, JSON.stringify(body));
  assert.equal(body.error?.name ?? body.name, name, JSON.stringify(body));
  return body.error?.message ?? body.message;
}

const stored = storedKeys;

/** How many relay sessions' stores (the DOs' SQLite files) hold a workspace file. */
function relaySessionsWithFiles() {
  const dir = path.join(path.dirname(process.env.RELAY_SERVER_LOG), "v3/do/relay-edge-SessionDO");
  let holding = 0;
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".sqlite"))) {
    const db = new DatabaseSync(path.join(dir, file), { readOnly: true });
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((t) => t.name);
    const files = tables.includes("workspace_files") ? db.prepare("SELECT count(*) AS n FROM workspace_files").get().n : 0;
    db.close();
    if (files > 0) holding++;
  }
  return holding;
}

describe("refusals", () => {
  const routes = (id) => [
    ["GET", "/admin/tenants"],
    ["GET", `/admin/tenants/${id}/keys`],
    ["POST", `/admin/tenants/${id}/keys`],
    ["DELETE", `/admin/tenants/${id}/keys/k_0000000000000000`],
    ["GET", `/admin/tenants/${id}/audit`],
    ["DELETE", `/admin/tenants/${id}`],
  ];

  test("every route refuses a wrong admin secret, and none, 401 Unauthorized", async () => {
    const { tenant } = await createTenant("refusals");
    for (const [method, route] of routes(tenant.id)) {
      for (const headers of [{ authorization: "Bearer wrong" }, {}]) {
        const res = await admin(method, route, undefined, headers);
        await refusal(res, 401, "Unauthorized");
        assert.match(res.headers.get("www-authenticate") ?? "", /relay-edge-admin/);
      }
    }
    assert.equal((await admin("GET", `/admin/tenants/${tenant.id}`)).status, 200, "nothing was deleted");
  });

  test("an unknown tenant is 404 NotFound, an id no tenant can have 400 ValidationError", async () => {
    for (const [method, route] of routes("t_nobody").slice(1)) {
      assert.match(await refusal(await admin(method, route), 404, "NotFound"), /no tenant "t_nobody"/, `${method} ${route}`);
    }
    for (const [method, route] of routes("t.dot").slice(1)) {
      assert.match(await refusal(await admin(method, route), 400, "ValidationError"), /tenant id is 1 to 64 of/, `${method} ${route}`);
    }
  });

  test("a malformed rotation is 400 naming graceSeconds; an unknown key id is 404", async () => {
    const { tenant, key } = await createTenant("bad-bodies");
    for (const body of ["{", "[]", { graceSeconds: -1 }, { graceSeconds: 2_592_001 }, { graceSeconds: "1" }, { grace: 1 }]) {
      const message = await refusal(await admin("POST", `/admin/tenants/${tenant.id}/keys`, body), 400, "ValidationError");
      assert.match(message, /graceSeconds/, JSON.stringify(body));
    }
    assert.match(await refusal(await admin("DELETE", `/admin/tenants/${tenant.id}/keys/k_nope`), 404, "NotFound"), /no key "k_nope"/);
    const big = JSON.stringify({ graceSeconds: 1, pad: "x".repeat(5_000) });
    assert.match(await refusal(await admin("POST", `/admin/tenants/${tenant.id}/keys`, big), 413, "PayloadTooLarge"), /4096|4 KiB/);
    const { keys } = await (await admin("GET", `/admin/tenants/${tenant.id}/keys`)).json();
    assert.equal(keys.length, 1, "a refused rotation made no key");
    assert.equal((await keyStatus(key)).status, 200);
  });
});

test("tenants are listed with their keys' ids and states, never a key or its hash", async () => {
  const { tenant, key } = await createTenant("listed");
  const seen = [];
  let cursor;
  do {
    const res = await admin("GET", `/admin/tenants${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ""}`);
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.ok(!text.includes(key) && !text.includes(sha256(key)) && !/rk_/.test(text), "no key, no hash");
    const page = JSON.parse(text);
    seen.push(...page.tenants);
    cursor = page.cursor;
  } while (cursor);
  const mine = seen.find((t) => t.id === tenant.id);
  assert.equal(mine.name, "listed");
  assert.equal(mine.keys.length, 1);
  assert.match(mine.keys[0].id, /^k_[0-9a-f]{16}$/);
  assert.equal(mine.keys[0].state, "active");
  assert.deepEqual(Object.keys(mine).sort(), ["id", "keys", "name"]);
});

describe("keys", () => {
  test("a rotated key works within its grace; the new key works at once", async () => {
    const { tenant, key: old } = await createTenant("rotate-long");
    const res = await admin("POST", `/admin/tenants/${tenant.id}/keys`, { graceSeconds: 600 });
    assert.equal(res.status, 201);
    const rotated = await res.json();
    assert.match(rotated.key, /^rk_/);
    assert.notEqual(rotated.key, old);
    assert.equal((await keyStatus(rotated.key)).status, 200);
    assert.equal((await keyStatus(old)).status, 200, "within the grace");
    const states = Object.fromEntries(rotated.keys.map((k) => [k.id, k]));
    assert.equal(states[rotated.keyId].state, "active");
    const retiring = rotated.keys.find((k) => k.id !== rotated.keyId);
    assert.equal(retiring.state, "retiring");
    assert.ok(retiring.retiresAtMs > Date.now() + 500_000);
  });

  test("after the grace the old key is refused, saying it was rotated", async () => {
    const { tenant, key: old } = await createTenant("rotate-short");
    const started = Date.now();
    const rotated = await (await admin("POST", `/admin/tenants/${tenant.id}/keys`, { graceSeconds: 1 })).json();
    await sleep(Math.max(0, started + 1_500 - Date.now()));
    const refused = await keyStatus(old);
    assert.equal(refused.status, 401);
    assert.match(refused.body.error?.message ?? refused.body.message, /rotated and its grace ended/);
    assert.equal((await keyStatus(rotated.key)).status, 200);
    const { keys } = await (await admin("GET", `/admin/tenants/${tenant.id}/keys`)).json();
    assert.deepEqual(keys.map((k) => k.state), ["retired", "active"]);
  });

  test("a revoked key is refused at once; the tenant's other key is not", async () => {
    const { tenant, key: first } = await createTenant("revoke");
    const rotated = await (await admin("POST", `/admin/tenants/${tenant.id}/keys`, { graceSeconds: 600 })).json();
    const firstId = rotated.keys.find((k) => k.id !== rotated.keyId).id;
    const res = await admin("DELETE", `/admin/tenants/${tenant.id}/keys/${firstId}`);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).keys.find((k) => k.id === firstId).state, "revoked");
    const refused = await keyStatus(first);
    assert.equal(refused.status, 401);
    assert.match(refused.body.error?.message ?? refused.body.message, /revoked/);
    assert.equal((await keyStatus(rotated.key)).status, 200);
  });
});

/** Gives tenant `{tenant, key}` data of every kind: a capsule, a `/out` file, a workspace body
 * in R2 (over 4 KiB), a relay session with its audit, an upstream server, an OAuth grant with
 * its code and tokens. Returns the access token. */
async function populate({ tenant, key }) {
  const capsule = await fetch(`${BASE}/capsules`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify({ language: "js", code: `console.log(${JSON.stringify(tenant.id)})` }) });
  assert.equal(capsule.status, 201);
  const { hash } = await capsule.json();
  const token = mintRunToken({ tenant: tenant.id, run: "r_life", capsule: hash });
  const out = await fetch(`${BASE}/files/r_life/out/report.txt`, { method: "PUT", headers: { authorization: `Bearer ${token}` }, body: "report" });
  assert.equal(out.status, 201);
  const client = await connectClient(key);
  const written = await client.callTool({ name: "write", arguments: { path: "/tmp/big.txt", content: `${tenant.id} `.repeat(1_000) } });
  assert.ok(!written.isError, JSON.stringify(written));
  await client.close();
  const upstream = await admin("PUT", `/admin/tenants/${tenant.id}/upstreams/docs`, { url: "https://mcp.example.com/mcp" });
  assert.equal(upstream.status, 200, await upstream.clone().text());
  return oauthToken(key);
}

/** An OAuth access token for `key`'s tenant: a client registered, consent given, the code exchanged. */
async function oauthToken(key) {
  const redirect = "http://127.0.0.1:9/callback";
  const resource = `${BASE}/mcp`;
  const registered = await fetch(`${BASE}/oauth/register`, { method: "POST", headers: { "content-type": "application/json", "cf-connecting-ip": `203.0.113.${randomBytes(1)[0]}` }, body: JSON.stringify({ client_name: "life", redirect_uris: [redirect], token_endpoint_auth_method: "none" }) });
  assert.equal(registered.status, 201);
  const clientId = (await registered.json()).client_id;
  const verifier = randomBytes(32).toString("base64url");
  const challenge = createHash("sha256").update(verifier).digest("base64url");
  const request = { response_type: "code", client_id: clientId, redirect_uri: redirect, code_challenge: challenge, code_challenge_method: "S256", state: "s", resource };
  const consent = await fetch(`${BASE}/oauth/authorize`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify({ request, session: "default", approve: true }) });
  assert.equal(consent.status, 200);
  const code = new URL((await consent.json()).redirect).searchParams.get("code");
  const form = new URLSearchParams({ grant_type: "authorization_code", code, code_verifier: verifier, client_id: clientId, redirect_uri: redirect, resource });
  const tokens = await fetch(`${BASE}/oauth/token`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: form });
  assert.equal(tokens.status, 200);
  return (await tokens.json()).access_token;
}

test("a tenant's audit chains export whole, and verify", async () => {
  const owner = await createTenant("audited");
  const client = await connectClient(owner.key);
  for (let i = 0; i < 3; i++) await client.callTool({ name: "write", arguments: { path: `/tmp/a${i}.txt`, content: `${i}` } });
  await client.close();
  const res = await admin("GET", `/admin/tenants/${owner.tenant.id}/audit`);
  assert.equal(res.status, 200);
  const exported = await res.json();
  assert.equal(exported.tenant, owner.tenant.id);
  assert.deepEqual(exported.relaySessions.map((s) => s.session), ["default"]);
  const [chain] = exported.relaySessions;
  assert.deepEqual(chain.records.map((r) => r.tool), ["write", "write", "write"]);
  assert.equal(chain.head.seq, chain.records.at(-1).seq);
  assert.match(relayCapsule(["audit-verify"], JSON.stringify(chain.records)), /^ok: 3 records/);
});

test("a deleted tenant: counts per kind, its keys and tokens refused, nothing of it left in KV or R2, another tenant untouched", async () => {
  const doomed = await createTenant("doomed");
  const kept = await createTenant("kept");
  const doomedToken = await populate(doomed);
  const keptToken = await populate(kept);
  const id = doomed.tenant.id;
  const mine = (key) => key.includes(id) || key.includes(sha256(doomed.key));
  assert.ok(stored("kv", mine).length >= 5, `its KV records are there first: ${stored("kv", mine)}`);
  assert.equal(stored("r2", mine).length, 3, `its R2 objects are there first: ${stored("r2", mine)}`);

  // Tokens signed before the deletion: a tab's attach token and a run's token.
  const { attachToken } = await attach(doomed.key, "default");
  const runToken = mintRunToken({ tenant: id, run: "r_after", capsule: "0".repeat(64) });
  // A tab attached at the deletion, its lease kept: its command stream is open.
  const events = await fetch(`${BASE}/session/default/events`, { headers: { authorization: `Bearer ${attachToken}` } });
  assert.equal(events.status, 200);
  const commands = sseEvents(events.body);
  const hello = (await commands.next()).value;
  assert.equal(hello.event, "hello");
  const lease = await holdLease("default", attachToken, hello.data.tabId, hello.data.leaseMs);
  const holding = relaySessionsWithFiles();
  // Other files of the suite leave OAuth records of their own: count the change.
  const grants = () => stored("kv", (k) => k.startsWith("oauth:grant:")).length;
  const tokensAndCodes = () => stored("kv", (k) => k.startsWith("oauth:token:") || k.startsWith("oauth:code:")).length;
  const [grantsBefore, tokensBefore] = [grants(), tokensAndCodes()];
  const started = performance.now();
  const res = await admin("DELETE", `/admin/tenants/${id}`);
  const ms = performance.now() - started;
  assert.equal(res.status, 200, await res.clone().text());
  const { deleted } = await res.json();
  console.log(`deleted ${JSON.stringify(deleted)} in ${ms.toFixed(0)} ms`);
  assert.deepEqual(deleted, {
    builds: 0,
    capsules: deleted.capsules,
    keys: 1,
    ledger: 1,
    oauthCodes: 1,
    oauthGrants: 1,
    oauthTokens: 2,
    outFiles: 1,
    relaySessions: 1,
    tenantRecords: 2,
    upstreams: 1,
    workspaceBodies: 1,
  });
  assert.ok(deleted.capsules >= 1);

  assert.equal((await keyStatus(doomed.key)).status, 401);
  const viaToken = await fetch(`${BASE}/mcp`, { method: "POST", headers: { authorization: `Bearer ${doomedToken}`, "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" });
  assert.equal(viaToken.status, 401);
  await refusal(await admin("GET", `/admin/tenants/${id}`), 404, "NotFound");
  assert.deepEqual(stored("kv", mine), [], "no KV record of it");
  assert.equal(grants(), grantsBefore - 1, "its grant, and no other, gone");
  assert.equal(tokensAndCodes(), tokensBefore - 3, "its code and two tokens, and no others, gone");
  assert.deepEqual(stored("r2", mine), [], "no R2 object of it");
  assert.equal(relaySessionsWithFiles(), holding - 1, "its relay session's storage is erased, the other's kept");
  // Its tab's stream ends and its lease socket closes, though the tab keeps renewing (they
  // carried heartbeats on nothing until the tab went).
  const ended = async () => {
    while (!(await commands.next()).done);
    return true;
  };
  const timeout = new Promise((resolve) => setTimeout(() => resolve(false), 3 * hello.data.leaseMs));
  assert.ok(await Promise.race([ended(), timeout]), "the deleted tenant's tab stream is closed");
  lease.stop();
  assert.equal((await admin("DELETE", `/admin/tenants/${id}`)).status, 404, "deleted once");
  // Tokens signed before it bring nothing back: no relay session answers them, nothing is stored.
  const workspace = await fetch(`${BASE}/session/default/workspace`, { headers: { authorization: `Bearer ${attachToken}` } });
  assert.match(await refusal(workspace, 401, "Unauthorized"), /no longer exists/);
  const upload = await fetch(`${BASE}/files/r_after/out/again.txt`, { method: "PUT", headers: { authorization: `Bearer ${runToken}` }, body: "again" });
  assert.match(await refusal(upload, 401, "Unauthorized"), /no longer exists/);
  const egress = await fetch(`${BASE}/egress`, { method: "POST", headers: { authorization: `Bearer ${runToken}` }, body: "{}" });
  assert.match(await refusal(egress, 401, "Unauthorized"), /no longer exists/);
  assert.deepEqual(stored("r2", mine), [], "still no R2 object of it");

  // The other tenant keeps everything.
  assert.equal((await keyStatus(kept.key)).status, 200);
  assert.equal(stored("r2", (k) => k.includes(kept.tenant.id)).length, 3, "its capsule, /out file and workspace body");
  const keptMcp = await fetch(`${BASE}/mcp`, { method: "POST", headers: { authorization: `Bearer ${keptToken}`, "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" });
  assert.notEqual(keptMcp.status, 401);
  const client = await connectClient(kept.key);
  const read = await client.callTool({ name: "read", arguments: { path: "/tmp/big.txt" } });
  assert.ok(!read.isError && JSON.stringify(read).includes(kept.tenant.id));
  await client.close();
});

test("scripts/tenant.sh: an operator's whole round, and a refusal's exit", async () => {
  const script = (...args) => {
    try {
      const out = execFileSync("bash", ["scripts/tenant.sh", ...args], { cwd: ROOT, encoding: "utf8", stdio: "pipe", env: { ...process.env, RELAY: BASE, ADMIN_TOKEN: devVars.ADMIN_TOKEN } });
      return { code: 0, out };
    } catch (e) {
      return { code: e.status, out: `${e.stdout}${e.stderr}` };
    }
  };
  const created = JSON.parse(script("create", "by-script").out);
  const id = created.tenant.id;
  assert.ok(script("list").out.split("\n").filter(Boolean).map(JSON.parse).some((t) => t.id === id && t.name === "by-script"));
  const rotated = JSON.parse(script("rotate", id, "0").out);
  assert.equal((await keyStatus(created.key)).status, 401, "a grace of 0 ends at once");
  assert.equal((await keyStatus(rotated.key)).status, 200);
  const client = await connectClient(rotated.key);
  await client.callTool({ name: "write", arguments: { path: "/tmp/s.txt", content: "s" } });
  await client.close();
  assert.match(script("audit", id, "--verify").out, /^default: ok: 1 records/);
  assert.equal(JSON.parse(script("revoke", id, rotated.keyId).out).keys.find((k) => k.id === rotated.keyId).state, "revoked");
  assert.equal((await keyStatus(rotated.key)).status, 401);
  const { deleted } = JSON.parse(script("delete", id).out);
  assert.equal(deleted.relaySessions, 1);
  assert.equal(deleted.keys, 2);
  const gone = script("show", id);
  assert.equal(gone.code, 1);
  assert.match(gone.out, /HTTP 404 .*NotFound/);
});

test("a tenant made again under its id keeps the keys it had, and its deletion finds them all", async () => {
  const id = `again-${randomBytes(4).toString("hex")}`;
  const first = `rk_${randomBytes(32).toString("base64url")}`;
  const made = await admin("POST", "/admin/tenants", { id, key: first, name: "again" });
  assert.equal(made.status, 201, await made.clone().text());
  const rotated = await (await admin("POST", `/admin/tenants/${id}/keys`, { graceSeconds: 0 })).json();
  assert.equal((await keyStatus(first)).status, 401);
  assert.equal((await admin("POST", "/admin/tenants", { id, key: first, name: "again" })).status, 201);
  assert.equal((await keyStatus(first)).status, 200, "its key, given again, is active again");
  assert.equal((await keyStatus(rotated.key)).status, 200, "the key it had stays");
  const { keys } = await (await admin("GET", `/admin/tenants/${id}/keys`)).json();
  assert.deepEqual(keys.map((k) => k.state), ["active", "active"]);
  const { deleted } = await (await admin("DELETE", `/admin/tenants/${id}`)).json();
  assert.equal(deleted.keys, 2);
  assert.deepEqual(stored("kv", (k) => [first, rotated.key].some((key) => k === `tenant:${sha256(key)}`)), []);
});
