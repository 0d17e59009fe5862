// A run's side routes under workerd, over raw HTTP: POST /egress performs guest code's fetches
// against a loopback upstream this test starts, under the policy of the run's capsule; PUT and
// GET /files store a run's /out files in R2 and serve them by signed, expiring URLs.

import assert from "node:assert/strict";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import path from "node:path";
import { createServer, request } from "node:http";
import { after, before, describe, test } from "node:test";
import { attach, BASE, createTenant, devVars, mintRunToken, relayCapsule, ROOT } from "./lib/relay.mjs";

const SMALL_BODY = 1024;
/** What the upstream's endless body has sent, and whether it got to its end. */
const big = { written: 0, finished: false, closed: false };
const BIG_TOTAL = 64 * 1024 * 1024;

/** The loopback upstream: each path is one behaviour the routes must handle. */
function upstream(req, res) {
  const url = new URL(req.url, "http://localhost");
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    switch (url.pathname) {
      case "/hello":
        res.writeHead(418, "I'm a teapot", { "x-up": "1", "set-cookie": "sid=secret", "content-type": "text/plain" });
        return res.end("hello from upstream");
      case "/echo":
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(JSON.stringify({ method: req.method, headers: req.headers, body: Buffer.concat(chunks).toString() }));
      case "/to-hello":
        res.writeHead(Number(url.searchParams.get("status") ?? 302), { location: "/hello" });
        return res.end();
      case "/to-echo":
        res.writeHead(Number(url.searchParams.get("status")), { location: "/echo" });
        return res.end();
      case "/to-evil":
        res.writeHead(302, { location: "http://evil.test/steal" });
        return res.end();
      case "/to-other-origin":
        // The same server by another name: another origin, which the policy also allows.
        res.writeHead(307, { location: `${otherOrigin}/echo` });
        return res.end();
      case "/loop":
        res.writeHead(302, { location: "/loop" });
        return res.end();
      case "/big-declared":
        res.writeHead(200, { "content-length": String(SMALL_BODY + 1) });
        return res.end("x".repeat(SMALL_BODY + 1));
      case "/big":
        return streamForever(res);
      default:
        res.writeHead(404);
        return res.end();
    }
  });
}

/** A chunked body of BIG_TOTAL bytes, written only as fast as the reader takes it. */
async function streamForever(res) {
  Object.assign(big, { written: 0, finished: false, closed: false });
  res.on("close", () => (big.closed = true));
  res.writeHead(200, { "content-type": "application/octet-stream" });
  const chunk = Buffer.alloc(16 * 1024, 120);
  while (big.written < BIG_TOTAL && !big.closed) {
    big.written += chunk.length;
    if (!res.write(chunk)) await drainedOrClosed(res);
  }
  if (!big.closed) {
    big.finished = true;
    res.end();
  }
}

/** Resolves when `res` can take more, or is gone; leaves no listener behind. */
function drainedOrClosed(res) {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

let server;
let origin;
let otherOrigin; // the same server as http://127.0.0.1:<port>
let closedPort; // listed in the policy, with nothing listening
let tenant;
let key;
/** Capsules of the tenant: default network limits, and maxBodyBytes cut to SMALL_BODY. */
let capsule;
let smallCapsule;

async function createCapsule(body, tenantKey = key) {
  const res = await fetch(`${BASE}/capsules`, {
    method: "POST",
    headers: { authorization: `Bearer ${tenantKey}`, "content-type": "application/json" },
    body: JSON.stringify({ language: "js", code: "1", ...body }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()).hash;
}

before(async () => {
  server = createServer(upstream);
  server.listen(0); // every address, IPv4 and IPv6: workerd may resolve localhost to either
  await once(server, "listening");
  const { port } = server.address();
  origin = `http://localhost:${port}`;
  otherOrigin = `http://127.0.0.1:${port}`;
  const closed = createServer().listen(0);
  await once(closed, "listening");
  closedPort = closed.address().port;
  closed.close();
  await once(closed, "close");
  // An entry without a port admits only the scheme's default: each loopback port is named.
  const allowedDomains = [`localhost:${port}`, `127.0.0.1:${port}`, `localhost:${closedPort}`];
  const network = { allowedDomains, blockPrivateRanges: false, denyIpLiterals: false };
  ({ key, tenant } = await createTenant("egress", { policy: { network }, outFileMaxBytes: 64 }));
  capsule = await createCapsule({});
  smallCapsule = await createCapsule({ policy: { network: { maxBodyBytes: SMALL_BODY } } });
});

after(() => server.close());

const runToken = (fields = {}) => mintRunToken({ tenant: tenant.id, run: "r_egress", capsule, ...fields });

/** POST /egress with `envelope` and the run token (or `token`, or none for null). */
function egress(envelope, token = runToken()) {
  return fetch(`${BASE}/egress`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(envelope),
  });
}

async function refusal(res, status, name) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  const body = JSON.parse(text);
  assert.equal(body.error.name, name, text);
  return body.error.message;
}

describe("POST /egress", () => {
  test("an allowed GET answers 200 with the upstream's status, headers and body", async () => {
    const res = await egress({ url: `${origin}/hello`, method: "GET", headers: [] });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "hello from upstream");
    assert.equal(res.headers.get("x-relay-status"), "418");
    assert.equal(res.headers.get("x-relay-status-text"), "I'm a teapot");
    assert.equal(res.headers.get("x-relay-url"), `${origin}/hello`);
    assert.equal(res.headers.get("x-relay-redirects"), "0");
    const headers = new Map(JSON.parse(res.headers.get("x-relay-headers")));
    assert.equal(headers.get("x-up"), "1");
    assert.equal(headers.get("content-type"), "text/plain");
    assert.equal(headers.has("set-cookie"), false, "cookies never reach guest code");
  });

  test("a POST reaches upstream with its body and only the headers guest code may set", async () => {
    const headers = [["content-type", "text/plain"], ["x-custom", "yes"], ["cookie", "a=b"], ["x-forwarded-for", "1.2.3.4"], ["x-relay-thing", "1"]];
    const res = await egress({ url: `${origin}/echo`, method: "POST", headers, body: Buffer.from("posted body").toString("base64") });
    assert.equal(res.status, 200);
    const seen = await res.json();
    assert.equal(seen.method, "POST");
    assert.equal(seen.body, "posted body");
    assert.equal(seen.headers["x-custom"], "yes");
    assert.equal(seen.headers["content-type"], "text/plain");
    assert.equal(seen.headers.cookie, undefined);
    assert.equal(seen.headers["x-relay-thing"], undefined);
    assert.notEqual(seen.headers["x-forwarded-for"], "1.2.3.4");
  });

  test("a host that is not listed is denied, naming it and how to allow it", async () => {
    const message = await refusal(await egress({ url: "http://denied.test/x" }), 403, "PolicyDenied");
    assert.match(message, /"denied\.test"/);
    assert.match(message, /allowedDomains/);
  });

  test("redirects are followed and checked hop by hop", async () => {
    let res = await egress({ url: `${origin}/to-hello` });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-relay-redirects"), "1");
    assert.equal(res.headers.get("x-relay-url"), `${origin}/hello`);
    assert.equal(await res.text(), "hello from upstream");
    // 303 turns a POST into a GET without body; 307 keeps both.
    const post = { method: "POST", headers: [["content-type", "text/plain"]], body: Buffer.from("b").toString("base64") };
    res = await egress({ url: `${origin}/to-echo?status=303`, ...post });
    assert.deepEqual((({ method, body }) => ({ method, body }))(await res.json()), { method: "GET", body: "" });
    res = await egress({ url: `${origin}/to-echo?status=307`, ...post });
    assert.deepEqual((({ method, body }) => ({ method, body }))(await res.json()), { method: "POST", body: "b" });
  });

  test("a redirect to a denied host refuses the fetch, naming that hop", async () => {
    const message = await refusal(await egress({ url: `${origin}/to-evil` }), 403, "PolicyDenied");
    assert.match(message, /"evil\.test"/);
    assert.match(message, /redirect 1 from/);
  });

  test("more redirects than maxRedirects are refused, naming the limit", async () => {
    const message = await refusal(await egress({ url: `${origin}/loop` }), 403, "PolicyDenied");
    assert.match(message, /network\.maxRedirects \(5\)/);
  });

  test("a response body over the capsule's maxBodyBytes is refused without reading it all", async (t) => {
    const token = runToken({ capsule: smallCapsule });
    let message = await refusal(await egress({ url: `${origin}/big` }, token), 403, "PolicyDenied");
    assert.match(message, new RegExp(`response body of ${origin}/big is larger than network\\.maxBodyBytes \\(${SMALL_BODY} bytes\\)`));
    await new Promise((resolve) => setTimeout(resolve, 500));
    t.diagnostic(`the upstream wrote ${big.written} of ${BIG_TOTAL} bytes; its connection closed: ${big.closed}`);
    assert.equal(big.finished, false, "the upstream stream was read to its end");
    assert.ok(big.written < BIG_TOTAL / 2, `upstream wrote ${big.written} bytes`);
    message = await refusal(await egress({ url: `${origin}/big-declared` }, token), 403, "PolicyDenied");
    assert.match(message, /maxBodyBytes/);
    // The same body is fine under the default 5 MiB.
    assert.equal((await egress({ url: `${origin}/big-declared` })).status, 200);
  });

  test("a request body over maxBodyBytes is refused", async () => {
    const body = Buffer.alloc(SMALL_BODY + 1).toString("base64");
    const res = await egress({ url: `${origin}/echo`, method: "POST", body }, runToken({ capsule: smallCapsule }));
    assert.match(await refusal(res, 403, "PolicyDenied"), /request body/);
  });

  test("a bad envelope is a ValidationError", async () => {
    assert.match(await refusal(await egress({ url: `${origin}/echo`, method: "TRACE" }), 400, "ValidationError"), /TRACE/);
    assert.match(await refusal(await egress({ nope: 1 }), 400, "ValidationError"), /nope|url/);
  });

  test("an upstream that does not answer is a 502 naming the host", async () => {
    const message = await refusal(await egress({ url: `http://localhost:${closedPort}/` }), 502, "UpstreamFailed");
    assert.match(message, /"localhost"/);
  });

  test("a port of a listed host that no entry names is denied, saying how to allow it", async () => {
    const url = `http://localhost:${closedPort + 1}/`;
    const message = await refusal(await egress({ url }), 403, "PolicyDenied");
    assert.match(message, new RegExp(`port ${closedPort + 1} of host "localhost" is not allowed`));
    assert.match(message, new RegExp(`add "localhost:${closedPort + 1}" \\(or a parent domain\\) to the tenant's defaults.policy.network.allowedDomains`));
  });

  test("Origin, Referer and the other forbidden request headers never reach the upstream", async () => {
    const forbidden = [["origin", BASE], ["referer", `${BASE}/`], ["sec-fetch-site", "same-origin"], ["x-http-method-override", "TRACE"], ["date", "x"]];
    const res = await egress({ url: `${origin}/echo`, method: "POST", headers: [...forbidden, ["x-kept", "1"]], body: "" });
    const seen = (await res.json()).headers;
    assert.equal(seen["x-kept"], "1");
    for (const [name, value] of forbidden) assert.notEqual(seen[name], value, `${name} was sent as guest code set it`);
  });

  test("a redirect to another origin carries only CORS-safelisted headers; one within the origin carries all", async () => {
    const headers = [["x-api-key", "guest-credential"], ["authorization", "Bearer guest"], ["accept", "application/json"], ["x-custom", "1"]];
    const across = await egress({ url: `${origin}/to-other-origin`, headers });
    assert.equal(across.headers.get("x-relay-url"), `${otherOrigin}/echo`);
    const seenAcross = (await across.json()).headers;
    assert.equal(seenAcross.accept, "application/json");
    for (const name of ["x-api-key", "authorization", "x-custom"]) assert.equal(seenAcross[name], undefined, `${name} crossed origins`);
    const within = await egress({ url: `${origin}/to-echo?status=307`, method: "POST", headers, body: "" });
    const seenWithin = (await within.json()).headers;
    assert.deepEqual([seenWithin["x-api-key"], seenWithin.authorization, seenWithin["x-custom"]], ["guest-credential", "Bearer guest", "1"]);
  });

  test("missing, bad, expired and wrong-typ tokens are 401s that say which", async () => {
    const envelope = { url: `${origin}/hello` };
    assert.match(await refusal(await egress(envelope, null), 401, "Unauthorized"), /missing/);
    assert.match(await refusal(await egress(envelope, "x.y.z"), 401, "Unauthorized"), /invalid run token/);
    assert.match(await refusal(await egress(envelope, runToken({ ttl: 0 })), 401, "Unauthorized"), /run token expired/);
    const { attachToken } = await attach(key, "default");
    assert.match(await refusal(await egress(envelope, attachToken), 401, "Unauthorized"), /typ/);
  });

  test("a token naming a capsule the tenant does not have is a 404", async () => {
    const message = await refusal(await egress({ url: `${origin}/hello` }, runToken({ capsule: "0".repeat(64) })), 404, "NotFound");
    assert.match(message, /capsule/);
  });
});

/** A PUT that declares `length` bytes and sends none: its answer, `{status, text}` (status 0
 * when none comes within 30 s). */
function declaredOnly(url, token, length) {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "PUT", headers: { authorization: `Bearer ${token}`, "content-length": length } });
    const unanswered = setTimeout(() => (req.destroy(), resolve({ status: 0, text: "no answer within 30 s" })), 30_000);
    req.on("response", async (res) => {
      let text = "";
      for await (const chunk of res) text += chunk;
      clearTimeout(unanswered);
      req.destroy();
      resolve({ status: res.statusCode, text });
    });
    req.on("error", (e) => (clearTimeout(unanswered), reject(e)));
    req.flushHeaders();
  });
}

describe("/files", () => {
  const put = (path, body, token = runToken({ run: "r_files" })) =>
    fetch(`${BASE}/files/r_files/${path}`, { method: "PUT", headers: { authorization: `Bearer ${token}` }, body });

  test("a file PUT by its run downloads by its signed URL, which is absolute", async () => {
    const res = await put("out/report.csv", "a,b\n1,2\n");
    assert.equal(res.status, 201);
    const file = await res.json();
    assert.equal(file.path, "/out/report.csv");
    assert.equal(file.size, 8);
    assert.match(file.sha256, /^[0-9a-f]{64}$/);
    const now = Math.floor(Date.now() / 1000);
    assert.ok(file.expiresAt >= now + 3590 && file.expiresAt <= now + 3610, "an hour");
    // Absolute, on the origin the request reached: a client that does not know the server's
    // address (one behind mcp-remote) downloads with nothing but the URL.
    assert.match(file.url, new RegExp(`^${BASE}/files/${tenant.id}/r_files/out/report\\.csv\\?exp=${file.expiresAt}&sig=`));
    const got = await fetch(file.url);
    assert.equal(got.status, 200);
    assert.equal(await got.text(), "a,b\n1,2\n");
    assert.equal(got.headers.get("content-type"), "text/csv; charset=utf-8");
    assert.equal(got.headers.get("x-content-type-options"), "nosniff");
    assert.equal(got.headers.get("content-security-policy"), "sandbox; frame-ancestors 'none'");
    assert.equal(got.headers.get("cache-control"), "private");
    // A name that needs percent-encoding signs and serves the same through workerd.
    const spaced = await (await put("out/sub/two%20words%2B.svg", "<svg/>")).json();
    assert.equal(spaced.path, "/out/sub/two words+.svg");
    const svg = await fetch(spaced.url);
    assert.equal(svg.status, 200, spaced.url);
    assert.equal(svg.headers.get("content-type"), "image/svg+xml");
    assert.equal(await svg.text(), "<svg/>");
  });

  test("HEAD answers as GET does, without the body", async () => {
    const file = await (await put("out/head.csv", "a,b\n1,2\n")).json();
    const head = await fetch(file.url, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get("content-type"), "text/csv; charset=utf-8");
    assert.equal(head.headers.get("content-length"), "8");
    assert.equal(head.headers.get("content-security-policy"), "sandbox; frame-ancestors 'none'");
    assert.equal((await head.arrayBuffer()).byteLength, 0);
    const get = await fetch(file.url);
    for (const name of ["content-type", "x-content-type-options", "content-security-policy", "cache-control"]) {
      assert.equal(head.headers.get(name), get.headers.get(name), name);
    }
    assert.equal(await get.text(), "a,b\n1,2\n");
    const tampered = await fetch(file.url.replace("head.csv", "other.csv"), { method: "HEAD" });
    assert.equal(tampered.status, 403, "the signature is checked for HEAD too");
  });

  test("a tampered signature, another path with the same signature and an expired URL are 403s", async () => {
    const first = await (await put("out/one.txt", "one")).json();
    await put("out/two.txt", "two");
    const sig = new URL(first.url).searchParams.get("sig");
    const flipped = (sig[0] === "A" ? "B" : "A") + sig.slice(1);
    let message = await refusal(await fetch(first.url.replace(sig, flipped)), 403, "Forbidden");
    assert.match(message, /signature does not match/);
    message = await refusal(await fetch(first.url.replace("one.txt", "two.txt")), 403, "Forbidden");
    assert.match(message, /signature does not match/);
    message = await refusal(await fetch(first.url.replace(/exp=\d+/, `exp=${first.expiresAt + 1}`)), 403, "Forbidden");
    assert.match(message, /signature does not match/);
    const past = Math.floor(Date.now() / 1000) - 10;
    const expired = relayCapsule(["download-url", devVars.CAPSULE_SIGNING_KEY, tenant.id, "r_files", "/out/one.txt", String(past)]);
    message = await refusal(await fetch(`${BASE}${expired}`), 403, "Forbidden");
    assert.match(message, /expired/);
    assert.match(message, /run the code again/);
    assert.match(await refusal(await fetch(`${BASE}/files/${tenant.id}/r_files/out/one.txt`), 403, "Forbidden"), /exp/);
  });

  test("paths outside /out are PolicyDenied (403), malformed ones ValidationError (400)", async () => {
    // 403: the path is well formed, the run is just not allowed to publish it (as a fetch the
    // policy refuses); 400: the request itself is wrong, whatever the policy.
    assert.match(await refusal(await put("tmp/x.txt", "x"), 403, "PolicyDenied"), /not under \/out/);
    assert.match(await refusal(await put("etc/passwd", "x"), 403, "PolicyDenied"), /not under \/out/);
    assert.match(await refusal(await put("out/a%2Fb", "x"), 400, "ValidationError"), /'\/'/);
    assert.match(await refusal(await put("out/%00", "x"), 400, "ValidationError"), /control/);
    // A decoded backslash is refused as the workspace refuses it: never stored as `/out/a\..\x`.
    for (const path of ["out/a%5c..%5cx", "out/a%5C..%5Cx", "out/a%5cb"]) {
      assert.match(await refusal(await put(path, "x"), 400, "ValidationError"), /backslash/, path);
    }
  });

  test("a file over the tenant's outFileMaxBytes is refused", async () => {
    const message = await refusal(await put("out/big.bin", "x".repeat(65)), 413, "OutputLimitExceeded");
    assert.match(message, /outFileMaxBytes \(64 bytes\)/);
  });

  test("another run's token, or none, cannot publish a run's files", async () => {
    assert.match(await refusal(await put("out/x.txt", "x", runToken({ run: "r_other" })), 403, "PolicyDenied"), /r_other/);
    const res = await fetch(`${BASE}/files/r_files/out/x.txt`, { method: "PUT", body: "x" });
    await refusal(res, 401, "Unauthorized");
  });

  test("a run publishes at most 32 files; writing one again does not count twice", async () => {
    const token = runToken({ run: "r_many" });
    const putMany = (name) => fetch(`${BASE}/files/r_many/out/${name}`, { method: "PUT", headers: { authorization: `Bearer ${token}` }, body: name });
    for (let i = 0; i < 32; i++) assert.equal((await putMany(`f${i}.txt`)).status, 201, `file ${i}`);
    assert.equal((await putMany("f0.txt")).status, 201, "a rewrite");
    assert.match(await refusal(await putMany("f32.txt"), 413, "OutputLimitExceeded"), /at most 32 files/);
  });

  test("past the cap a PUT is refused before its body is read; a slot whose upload fails is given back", { timeout: 60_000 }, async () => {
    const token = runToken({ run: "r_full" });
    const url = (name) => `${BASE}/files/r_full/out/${name}`;
    const putSmall = (name) => fetch(url(name), { method: "PUT", headers: { authorization: `Bearer ${token}` }, body: name });
    for (let i = 0; i < 30; i++) assert.equal((await putSmall(`f${i}.txt`)).status, 201, `file ${i}`);
    // A body over outFileMaxBytes (no Content-Length: it is counted as it comes), and a body that
    // never arrives (408): each held a slot while it was read, and gives it back.
    const chunked = new ReadableStream({ start: (c) => (c.enqueue(new TextEncoder().encode("x".repeat(100))), c.close()) });
    const over = await fetch(url("over.bin"), { method: "PUT", headers: { authorization: `Bearer ${token}` }, body: chunked, duplex: "half" });
    assert.match(await refusal(over, 413, "OutputLimitExceeded"), /outFileMaxBytes/);
    const silent = await declaredOnly(url("silent.bin"), token, 60);
    assert.equal(silent.status, 408, silent.text);
    assert.equal((await putSmall("f30.txt")).status, 201, "the slots were given back");
    assert.equal((await putSmall("f31.txt")).status, 201);
    // Full: a PUT that declares a body and sends none is answered at once, not after its
    // body's deadline (10 s), so a crowd of large uploads past the cap holds nothing.
    const started = Date.now();
    const refused = await declaredOnly(url("f32.txt"), token, 60);
    console.log(`# a PUT past the cap was refused ${Date.now() - started} ms after its head, its body unsent`);
    assert.equal(refused.status, 413, refused.text);
    assert.match(refused.text, /at most 32 files/);
  });

  test("64 uploads at once publish exactly 32 files: the relay session counts them one at a time", async () => {
    const token = runToken({ run: "r_race" });
    const putRace = (i) =>
      fetch(`${BASE}/files/r_race/out/f${i}.txt`, { method: "PUT", headers: { authorization: `Bearer ${token}` }, body: `file ${i}` });
    const answers = await Promise.all(Array.from({ length: 64 }, (_, i) => putRace(i)));
    const statuses = answers.map((res) => res.status);
    assert.equal(statuses.filter((s) => s === 201).length, 32, statuses.join(" "));
    assert.equal(statuses.filter((s) => s === 413).length, 32, statuses.join(" "));
    const stored = await Promise.all(answers.filter((res) => res.status === 201).map((res) => res.json()));
    for (const file of stored) assert.equal((await fetch(file.url)).status, 200, file.path);
    const published = statuses.indexOf(201);
    assert.equal((await putRace(published)).status, 201, "a published path can still be written again");
    assert.equal((await putRace(statuses.indexOf(413))).status, 413, "a refused one still cannot");
  });
});

describe("the shared egress table (tests/policy_cases.json), judged by the Worker", () => {
  // The Rust tests and the page's policy.wasm run the same table (tests/policy.rs,
  // policy-tables.test.mjs); here every case goes through POST /egress under a capsule whose
  // policy is exactly the case's. A refusal is decided before any I/O, so it comes at once; an
  // allowed case goes on to fetch (there is no route to most of these hosts from here), and
  // passes when it is not refused by the policy.
  const ALLOWED_WITHIN_MS = 5000;
  // A URL that does not parse is a bad request (400 ValidationError) at the route; any other
  // denial is the policy's (403 PolicyDenied).
  const REFUSALS = ["PolicyDenied", "ValidationError"];

  test("every denial is refused with the same reason; nothing allowed is refused", async () => {
    const { basePolicy, cases } = JSON.parse(readFileSync(path.join(ROOT, "tests/policy_cases.json"), "utf8"));
    // Effective network policy (JSON) -> the run token of a capsule with it, or null when no
    // capsule can hold it: a policy with an entry that could never match (`https://x.com`, which
    // those cases show matches nothing) is refused when the tenant is created (400 naming the
    // pattern), as it would be when a capsule is made.
    const tokens = new Map();
    for (const c of cases) {
      const network = JSON.stringify({ ...basePolicy, ...c.network });
      if (tokens.has(network)) continue;
      const owner = await createTenant(`egress-table-${tokens.size}`, { policy: { network: JSON.parse(network) } }).catch((err) => {
        if (/^creating tenant: 400 .*domain pattern/.test(err.message)) return null;
        throw err;
      });
      const hash = owner && (await capsuleOf(owner.key));
      tokens.set(network, hash && mintRunToken({ tenant: owner.tenant.id, run: "r_table", capsule: hash }));
    }
    const judged = cases.filter((c) => tokens.get(JSON.stringify({ ...basePolicy, ...c.network })));
    const failures = [];
    await Promise.all(
      judged.map(async (c) => {
        const token = tokens.get(JSON.stringify({ ...basePolicy, ...c.network }));
        const verdict = await edgeVerdict(egress({ url: c.url, method: "GET", headers: [] }, token), c.verdict === "allow");
        const ok =
          c.verdict === "allow"
            ? !verdict.refused
            : verdict.refused && REFUSALS.includes(verdict.name) && (c.reasonContains ?? []).every((n) => verdict.message.includes(n));
        if (!ok) failures.push(`${c.url} (${c.note}): got ${JSON.stringify(verdict)}, want ${c.verdict}`);
      }),
    );
    assert.deepEqual(failures, []);
    assert.ok(judged.length >= 150, `${judged.length} of ${cases.length} cases judged`);
  });

  /** The hash of a capsule of the tenant with `key`. */
  async function capsuleOf(tenantKey) {
    const res = await fetch(`${BASE}/capsules`, {
      method: "POST",
      headers: { authorization: `Bearer ${tenantKey}`, "content-type": "application/json" },
      body: JSON.stringify({ language: "js", code: "1" }),
    });
    const body = await res.json();
    assert.equal(res.status, 201, JSON.stringify(body));
    return body.hash;
  }

  /**
   * What the route said: a refusal ({refused, name, message}) or not. For a case the table
   * allows, still fetching after ALLOWED_WITHIN_MS counts as not refused (a refusal comes before
   * any I/O); a case it denies is waited for, however slow the Worker is.
   */
  async function edgeVerdict(answer, allowed) {
    const timeout = new Promise((resolve) => allowed && setTimeout(() => resolve({ refused: false, pending: true }), ALLOWED_WITHIN_MS));
    const judged = answer.then(async (res) => {
      const text = await res.text();
      if (res.status !== 403 && res.status !== 400) return { refused: false, status: res.status };
      const { error } = JSON.parse(text);
      return { refused: true, status: res.status, name: error.name, message: error.message };
    });
    return Promise.race([judged, timeout]);
  }
});
