// The foundation under workerd: health, the JSON 404, the public key set, and capsules signed
// by the Worker verifying natively (and the reverse), with tampering caught on both sides.

import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { BASE, createTenant, devVars, relayCapsule } from "./lib/relay.mjs";

const jwks = async () => (await fetch(`${BASE}/.well-known/relay-keys.json`)).json();

/** POST /capsules: the Worker builds, signs and stores a capsule for the key's tenant. */
async function createCapsule(key, request) {
  return fetch(`${BASE}/capsules`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(request),
  });
}

test("healthz names the service and every binding", async () => {
  const res = await fetch(`${BASE}/healthz`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /application\/json/);
  const body = await res.json();
  assert.equal(body.name, "relay-edge");
  assert.match(body.version, /^\d+\.\d+\.\d+$/);
  assert.deepEqual(body.bindings, { ASSETS: true, KV_CONFIG: true, R2_CAPSULES: true, SESSIONS: true });
  assert.equal(body.secrets.CAPSULE_SIGNING_KEY, true);
});

test("the page is served with its Content-Security-Policy and may not be framed; the test page is not deployed", async () => {
  for (const url of ["/", "/index.html"]) {
    const res = await fetch(`${BASE}${url}`, { redirect: "manual" });
    if (res.status !== 200) continue; // /index.html may redirect to /
    assert.match(await res.text(), /http-equiv="Content-Security-Policy"[\s\S]*script-src 'self' 'wasm-unsafe-eval'/);
    assert.equal(res.headers.get("x-frame-options"), "DENY", url);
    assert.match(res.headers.get("content-security-policy") ?? "", /frame-ancestors 'none'/, url);
    assert.equal(res.headers.get("x-content-type-options"), "nosniff", url);
  }
  for (const url of ["/runner-test.html", "/runner-test.js"]) {
    const res = await fetch(`${BASE}${url}`);
    assert.notEqual(res.status, 200, `${url} must not be deployed`);
    await res.arrayBuffer();
  }
});

test("unknown routes get a JSON 404 with CORS", async () => {
  for (const [method, url] of [["GET", "/nope"], ["POST", "/session/x/nope"], ["DELETE", "/capsules"]]) {
    const res = await fetch(`${BASE}${url}`, { method });
    assert.equal(res.status, 404, `${method} ${url}`);
    assert.equal(res.headers.get("access-control-allow-origin"), "*");
    const body = await res.json();
    assert.equal(body.error.name, "NotFound");
    assert.match(body.error.message, new RegExp(url.replaceAll("/", "\\/")));
  }
});

test("the key set is an OKP Ed25519 JWK set with key ids", async () => {
  const { keys } = await jwks();
  assert.ok(keys.length >= 1);
  for (const key of keys) {
    assert.equal(key.kty, "OKP");
    assert.equal(key.crv, "Ed25519");
    assert.equal(key.alg, "EdDSA");
    assert.match(key.kid, /^[0-9a-f]{16}$/);
    assert.equal(Buffer.from(key.x, "base64url").length, 32);
    assert.equal(key.d, undefined, "never the private part");
  }
});

test("a capsule the Worker signs verifies natively against the JWKS; a tampered one does not", async () => {
  const { key } = await createTenant("foundation");
  const res = await createCapsule(key, { language: "js", code: "console.log('hi')" });
  assert.equal(res.status, 201);
  const { hash, manifestUrl } = await res.json();
  const stored = await fetch(`${BASE}${manifestUrl}`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(stored.status, 200);
  assert.equal(stored.headers.get("etag"), `"${hash}"`);
  const manifest = await stored.text();

  const dir = mkdtempSync(path.join(tmpdir(), "relay-jwks-"));
  const jwksFile = path.join(dir, "jwks.json");
  writeFileSync(jwksFile, JSON.stringify(await jwks()));
  assert.equal(relayCapsule(["verify", jwksFile], manifest), hash);

  const tampered = manifest.replace('"timeoutMs":60000', '"timeoutMs":600000');
  assert.notEqual(tampered, manifest);
  assert.throws(() => relayCapsule(["verify", jwksFile], tampered), /signature|payload|manifest/i);
});

test("a capsule signed natively with the Worker's key verifies in the Worker; another key's does not", async () => {
  const request = JSON.stringify({ language: "py", code: "print(1)" });
  const good = relayCapsule(["sign", devVars.CAPSULE_SIGNING_KEY], request);
  let res = await fetch(`${BASE}/capsules/verify`, { method: "POST", body: good });
  assert.equal(res.status, 200);
  assert.equal((await res.json()).valid, true);

  const stranger = relayCapsule(["sign", relayCapsule(["keygen"], "")], request);
  res = await fetch(`${BASE}/capsules/verify`, { method: "POST", body: stranger });
  assert.equal(res.status, 400);
  assert.match((await res.json()).error.message, /kid|key/i);
});

test("capsule files are private to their tenant", async () => {
  const owner = await createTenant("owner");
  const other = await createTenant("other");
  const res = await createCapsule(owner.key, { language: "js", code: "console.log('private')" });
  const { hash, manifest } = await res.json();
  const layer = manifest.fsLayers[0];
  const get = (key, file) => fetch(`${BASE}/capsules/${hash}/${file}`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  assert.equal((await get(owner.key, layer.path)).status, 200);
  assert.equal((await get(other.key, layer.path)).status, 404);
  assert.equal((await get(other.key, "capsule.json")).status, 404);
  assert.equal((await get(null, "capsule.json")).status, 401);
});

test("layers are served with ETag, immutable caching and Range", async () => {
  const { key } = await createTenant("ranges");
  const res = await createCapsule(key, { language: "js", code: "console.log('x'.repeat(100))" });
  const { hash, manifest } = await res.json();
  const layer = manifest.fsLayers[0];
  const url = `${BASE}/capsules/${hash}/${layer.path}`;
  const auth = { authorization: `Bearer ${key}` };
  const whole = await fetch(url, { headers: auth });
  assert.equal(whole.status, 200);
  assert.equal(whole.headers.get("etag"), `"${layer.sha256}"`);
  assert.match(whole.headers.get("cache-control"), /immutable/);
  const bytes = Buffer.from(await whole.arrayBuffer());
  assert.equal(bytes.length, layer.size);
  const part = await fetch(url, { headers: { ...auth, range: "bytes=10-19" } });
  assert.equal(part.status, 206);
  assert.equal(part.headers.get("content-range"), `bytes 10-19/${layer.size}`);
  assert.deepEqual(Buffer.from(await part.arrayBuffer()), bytes.subarray(10, 20));
  const beyond = await fetch(url, { headers: { ...auth, range: `bytes=${layer.size}-` } });
  assert.equal(beyond.status, 416);
  const cached = await fetch(url, { headers: { ...auth, "if-none-match": `"${layer.sha256}"` } });
  assert.equal(cached.status, 304);
});
