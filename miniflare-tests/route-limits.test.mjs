// Every route against hostile input: path parameters checked for shape before any storage is
// touched (400 ValidationError naming the rule, 404 where the name is well formed but unknown,
// never a 500), every body capped (413 PayloadTooLarge naming the limit) whether its size
// is declared or it is streamed, and given a deadline (408 RequestTimeout naming it); a client
// that goes away mid-body is logged as such (499), never as a server error.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import http from "node:http";
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

describe("slow and abandoned bodies", () => {
  /**
   * POSTs to `path` declaring `declared` bytes, then writes one byte every `everyMs`; after
   * `bytes` of them it goes away, or, if `bytes` is not given, keeps on until answered. Resolves
   * with the answer `{status, body, ms}`, or `{gone: true}` once it went away.
   */
  function trickle(path, headers, { declared = 100, everyMs = 2000, bytes } = {}) {
    const url = new URL(path, BASE);
    const started = performance.now();
    return new Promise((resolve, reject) => {
      const req = http.request({ host: url.hostname, port: url.port, method: "POST", path: url.pathname, headers: { ...headers, "content-length": declared } });
      let sent = 0;
      const timer = setInterval(() => {
        if (sent === bytes) {
          clearInterval(timer);
          req.destroy();
          resolve({ gone: true });
          return;
        }
        sent += 1;
        req.write(" ");
      }, everyMs);
      req.on("response", (res) => {
        clearInterval(timer);
        let body = "";
        res.on("data", (d) => (body += d));
        res.on("end", () => {
          req.destroy();
          resolve({ status: res.statusCode, body, ms: performance.now() - started });
        });
      });
      req.on("error", (err) => (sent === bytes ? undefined : reject(err)));
      req.flushHeaders();
    });
  }

  test("a body that trickles in is 408 RequestTimeout at its deadline, naming it, on every route that reads one", async () => {
    // 100 bytes declared: 10 s, plus 1 s per 64 KiB (relay_core::body). One byte every 2 s
    // would take 200 s.
    const routes = [
      ["/mcp", { authorization: `Bearer ${key}`, "content-type": "application/json" }],
      ["/session", { authorization: `Bearer ${key}`, "content-type": "application/json" }],
      ["/capsules", { authorization: `Bearer ${key}`, "content-type": "application/json" }],
      ["/admin/tenants", { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, "content-type": "application/json" }],
    ];
    const answers = await Promise.all(routes.map(([path, headers]) => trickle(path, headers)));
    for (const [i, { status, body, ms }] of answers.entries()) {
      const path = routes[i][0];
      console.log(`${path}: 408 after ${(ms / 1000).toFixed(1)} s`);
      const message = await assertError({ status, body }, 408, "RequestTimeout", path);
      assert.match(message, /did not arrive within 10\.0 s, its deadline \(10 s, plus 1 s per 64 KiB of body\)/, path);
      assert.ok(ms >= 10_000, `${path}: answered after ${ms} ms, before its deadline`);
    }
  });

  test("a client that goes away mid-body is logged as 499, not as a server error", async () => {
    const { key: own, tenant } = await createTenant("gone-mid-body");
    const headers = { authorization: `Bearer ${own}`, "content-type": "application/json" };
    assert.deepEqual(await trickle("/mcp", headers, { everyMs: 200, bytes: 3 }), { gone: true });
    let line;
    for (let waited = 0; !line && waited < 30_000; waited += 250) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      line = serverLog().lines.find((l) => l.kind === "request" && l.tenant === tenant.id);
    }
    assert.doesNotMatch(serverLog().text, /internal error: .*Network connection lost/);
    assert.ok(line, "the request was logged, naming its tenant");
    assert.deepEqual({ route: line.route, status: line.status, level: line.level }, { route: "/mcp", status: 499, level: "warn" });
  });
});

/** The server's log (scripts/with-server.sh's RELAY_SERVER_LOG): its text and its JSON lines. */
function serverLog() {
  const text = readFileSync(process.env.RELAY_SERVER_LOG, "utf8");
  return { text, lines: text.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l)) };
}
