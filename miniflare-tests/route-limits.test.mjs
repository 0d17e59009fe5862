// Every route against hostile input: path parameters checked for shape before any storage is
// touched (400 ValidationError naming the rule, 404 where the name is well formed but unknown,
// never a 500), and every body capped (413 PayloadTooLarge naming the limit) whether its size
// is declared or it is streamed.

import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { rawRequest } from "./lib/mcp-http.mjs";
import { BASE, attach, createTenant, devVars } from "./lib/relay.mjs";

const KIB = 1024;
const MIB = 1024 * KIB;
const SESSION = "limits";
const HASH = "0123456789abcdef".repeat(4);

let key;
let token;
let capsule; // {hash, manifest} of a stored capsule of `key`'s tenant
before(async () => {
  ({ key } = await createTenant("route-limits"));
  ({ attachToken: token } = await attach(key, SESSION));
  const created = await fetch(`${BASE}/capsules`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ language: "js", code: "console.log(1)" }),
  });
  assert.equal(created.status, 201);
  capsule = await created.json();
});

/** Asserts `res` is the JSON error `name` with `status`; returns its message. */
async function assertError(res, status, name, label) {
  const text = typeof res.body === "string" ? res.body : await res.text();
  assert.equal(res.status, status, `${label}: ${text}`);
  const { error } = JSON.parse(text);
  assert.equal(error.name, name, label);
  return error.message;
}

describe("path parameters", () => {
  const auth = () => ({ authorization: `Bearer ${key}` });

  test("a capsule hash that is not 64 lowercase hex characters is 400, naming the rule", async () => {
    const hashes = [HASH + "0", HASH.slice(1), HASH.toUpperCase(), "A".repeat(64), "g".repeat(64), "f".repeat(5000),
      `${HASH.slice(2)}%00`, `%2e%2e${HASH.slice(6)}`, `..${HASH.slice(2)}`, "capsule.json"];
    for (const hash of hashes) {
      const res = await fetch(`${BASE}/capsules/${hash}/capsule.json`, { headers: auth() });
      const message = await assertError(res, 400, "ValidationError", hash.slice(0, 80));
      assert.match(message, /64 lowercase hex/);
    }
  });

  test("a capsule file that is neither capsule.json nor fs.<id>.zip is 400, naming the rule", async () => {
    const files = ["capsule.JSON", "fs..zip", "fs.code.zip%00", "fs.%2e%2e.zip", "fs.code.zip.bak", "Fs.code.zip",
      "fs.code%5c..%5cx.zip", `fs.${"a".repeat(33)}.zip`, "..fs.code.zip", "x".repeat(3000)];
    for (const file of files) {
      const res = await fetch(`${BASE}/capsules/${capsule.hash}/${file}`, { headers: auth() });
      const message = await assertError(res, 400, "ValidationError", file.slice(0, 80));
      assert.match(message, /capsule\.json.*fs\.<id>\.zip/);
    }
  });

  test("raw traversal and control forms never reach storage: a 4xx, never a 500", async () => {
    const paths = [`/capsules/${capsule.hash}/..%2f..%2fx`, `/capsules/${capsule.hash}/fs.code.zip%2f..`,
      `/capsules/${capsule.hash}/%2e%2e`, `/capsules/${capsule.hash}/fs.code.zip\\..`, `/capsules/%2e%2e/capsule.json`,
      `/capsules/${"a".repeat(10_000)}/capsule.json`];
    for (const path of paths) {
      const res = await rawRequest("GET", path, auth());
      assert.ok([400, 404].includes(res.status), `${path.slice(0, 90)}: ${res.status} ${res.body}`);
      assert.ok(["ValidationError", "NotFound"].includes(JSON.parse(res.body).error.name), path.slice(0, 90));
    }
  });

  test("a well-formed name the capsule does not have is 404", async () => {
    let res = await fetch(`${BASE}/capsules/${capsule.hash}/fs.deps.zip`, { headers: auth() });
    assert.match(await assertError(res, 404, "NotFound", "no deps layer"), /no file fs\.deps\.zip/);
    res = await fetch(`${BASE}/capsules/${HASH}/capsule.json`, { headers: auth() });
    await assertError(res, 404, "NotFound", "no such capsule");
    res = await fetch(`${BASE}/capsules/${capsule.hash}/${capsule.manifest.fsLayers[0].path}`, { headers: auth() });
    assert.equal(res.status, 200, "the layer the manifest names");
    await res.arrayBuffer();
  });

  test("a relay session id in a path that breaks the session name rule is 400", async () => {
    // (A bare `..` or `%2e%2e` segment is resolved away by the URL parser before any route sees it.)
    for (const id of ["a".repeat(65), "a.b", "a%20b", "a%00", "caf%C3%A9"]) {
      for (const [method, what] of [["GET", "events"], ["POST", "result"], ["POST", "refresh"], ["POST", "ready"]]) {
        const res = await fetch(`${BASE}/session/${id}/${what}`, { method, headers: { authorization: `Bearer ${token}` } });
        const message = await assertError(res, 400, "ValidationError", `${method} ${id} ${what}`);
        assert.match(message, /1 to 64 of A-Z a-z 0-9 - _/);
      }
    }
  });
});

describe("body limits", () => {
  const routes = () => [
    { path: "/mcp", limit: MIB, headers: { authorization: `Bearer ${key}`, "content-type": "application/json" } },
    { path: "/session", limit: 4 * KIB, headers: { authorization: `Bearer ${key}` } },
    { path: `/session/${SESSION}/refresh`, limit: 4 * KIB, headers: { authorization: `Bearer ${token}` } },
    { path: `/session/${SESSION}/ready`, limit: 4 * KIB, headers: { authorization: `Bearer ${token}` } },
    {
      path: `/session/${SESSION}/result`,
      limit: 4 * MIB,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/x-ndjson" },
    },
    { path: "/capsules", limit: 4 * MIB, headers: { authorization: `Bearer ${key}` } },
    { path: "/capsules/verify", limit: 256 * KIB, headers: {} },
    { path: "/admin/tenants", limit: 64 * KIB, headers: { authorization: `Bearer ${devVars.ADMIN_TOKEN}` } },
  ];

  test("a body one byte over a route's limit is 413 naming the limit, declared or streamed", async () => {
    for (const { path, limit, headers } of routes()) {
      const label = path;
      const body = Buffer.alloc(limit + 1, " ");
      let res = await fetch(`${BASE}${path}`, { method: "POST", headers, body });
      let message = await assertError(res, 413, "PayloadTooLarge", `${label} with Content-Length`);
      assert.match(message, new RegExp(`limit of ${limit} bytes`), label);
      const streamed = new Blob([body]).stream();
      res = await fetch(`${BASE}${path}`, { method: "POST", headers, body: streamed, duplex: "half" });
      message = await assertError(res, 413, "PayloadTooLarge", `${label} streamed`);
      assert.match(message, new RegExp(`limit of ${limit} bytes`), label);
    }
  });

  test("a body at the limit is read (and judged on its content, not its size)", async () => {
    for (const { path, limit, headers } of routes()) {
      const res = await fetch(`${BASE}${path}`, { method: "POST", headers, body: Buffer.alloc(limit, " ") });
      assert.notEqual(res.status, 413, path);
      assert.ok(res.status < 500, `${path}: ${res.status}`);
      await res.arrayBuffer();
    }
  });

  test("the session route still attaches with a small body", async () => {
    assert.equal((await attach(key, "small")).sessionId, "small");
  });
});
