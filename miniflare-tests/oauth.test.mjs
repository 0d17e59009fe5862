// OAuth 2.1 for hosted MCP clients, end to end: the official TypeScript SDK's client with its
// OAuth client provider discovers the authorization server from a 401, registers itself,
// sends the person to the consent page (driven in Chromium: the API key typed, "Allow"
// clicked), exchanges the code with PKCE, and then lists tools and runs code with the access
// token alone. Then the hostile cases over raw HTTP: a wrong PKCE verifier, a reused code, an
// unregistered redirect URI, a loopback one with a fragment or userinfo, another resource, a
// revoked token, a rotated refresh token used again or without client_id, a token used for
// another relay session, bad and too many registrations; client ID metadata documents, good and
// hostile (a redirect, a hang, 50 MiB); and the consent page: what it shows of the client and
// where the code goes, a click as it appears, a 360 px screen. And a second Worker behind a
// "proxy" (PUBLIC_URL set): its metadata, redirects, tokens and Origin check use the public origin.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readdirSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { launchBrowser, openExecutor } from "./lib/browser.mjs";
import { startWorker } from "./lib/local-worker.mjs";
import { BASE, ROOT, createTenant } from "./lib/relay.mjs";

const REDIRECT = "http://127.0.0.1:9/callback";
const RESOURCE = `${BASE}/mcp`;
let key;
let browser;

before(async () => {
  ({ key } = await createTenant("oauth", { queue: { attachWaitMs: 5000 } }));
  browser = await launchBrowser();
  await openExecutor(browser, key);
});
after(() => browser?.close());

/** The SDK's OAuth client provider, in memory: what a hosted client keeps. */
class MemoryProvider {
  constructor() {
    this.info = undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.authorizationUrl = undefined;
  }
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return { client_name: "sdk-oauth-test", redirect_uris: [REDIRECT], grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** A browser page that answers for the clients' loopback redirect URI; `landed()` says where it went. */
async function clientPage(context) {
  const page = await context.newPage();
  let landed;
  await page.route("http://127.0.0.1:9/**", (route) => {
    landed = route.request().url();
    return route.fulfill({ status: 200, body: "back at the client" });
  });
  return { page, landed: () => landed };
}

/** A person at the consent page: types the key, clicks a button; returns where it sent them. */
async function consentInBrowser(url, button = "Allow") {
  const context = await browser.newContext();
  const { page, landed } = await clientPage(context);
  await page.goto(url.toString());
  await page.getByLabel("Your API key").fill(key);
  await page.getByRole("button", { name: button }).click();
  await page.waitForFunction(() => document.body.textContent.includes("back at the client"));
  await context.close();
  return new URL(landed());
}

describe("a hosted client with OAuth alone", () => {
  const provider = new MemoryProvider();

  test("is sent to authorize on its first request, and the person allows it", async () => {
    const client = new Client({ name: "sdk-oauth-test", version: "1.0.0" });
    await assert.rejects(client.connect(new StreamableHTTPClientTransport(new URL(RESOURCE), { authProvider: provider })), UnauthorizedError);
    assert.ok(provider.info?.client_id, "it registered dynamically");
    const url = provider.authorizationUrl;
    assert.equal(url.origin + url.pathname, `${BASE}/oauth/authorize`);
    assert.equal(url.searchParams.get("code_challenge_method"), "S256");
    assert.equal(url.searchParams.get("resource"), RESOURCE);
    const back = await consentInBrowser(url);
    assert.ok(back.searchParams.get("code"));
    assert.equal(back.searchParams.get("state"), url.searchParams.get("state"));
    const transport = new StreamableHTTPClientTransport(new URL(RESOURCE), { authProvider: provider });
    await transport.finishAuth(back.searchParams.get("code"));
    assert.ok(provider.saved.access_token.startsWith("rat_") && provider.saved.refresh_token.startsWith("rrt_"));
  });

  test("then lists tools and runs code with the access token, no key", async () => {
    const client = new Client({ name: "sdk-oauth-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(RESOURCE), { authProvider: provider }));
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "run_js"));
    const result = await client.callTool({ name: "run_js", arguments: { code: "console.log(6 * 7)" } });
    assert.equal(result.structuredContent.stdout, "42\n");
    await client.close();
  });

  test("a person who denies sends the client back with access_denied", async () => {
    const url = await authorizationUrl(await register());
    const back = await consentInBrowser(url, "Deny");
    assert.equal(back.searchParams.get("error"), "access_denied");
    assert.equal(back.searchParams.get("code"), null);
  });
});

// ---- raw HTTP helpers ----

const form = (fields) => new URLSearchParams(Object.entries(fields).filter(([, v]) => v !== undefined));
const post = (path, fields) => fetch(`${BASE}${path}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: form(fields) });

// Each registration of these tests comes from an address of its own (wrangler dev takes the
// client's CF-Connecting-IP; Cloudflare sets it), so that only the rate test meets the limit.
let registrations = 0;

const registerRaw = (body, address = `198.51.100.${++registrations}`) =>
  fetch(`${BASE}/oauth/register`, { method: "POST", headers: { "content-type": "application/json", "cf-connecting-ip": address }, body: JSON.stringify(body) });

async function register(redirect = REDIRECT, name = "raw") {
  const res = await registerRaw({ client_name: name, redirect_uris: [redirect], token_endpoint_auth_method: "none" });
  assert.equal(res.status, 201, await res.clone().text());
  return (await res.json()).client_id;
}

/** When KV expires `key`, in seconds since the epoch: read from the local server's own KV store. */
function kvExpiry(key) {
  const dir = path.join(path.dirname(process.env.RELAY_SERVER_LOG), "v3/kv/miniflare-KVNamespaceObject");
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite")) {
    const db = new DatabaseSync(path.join(dir, file), { readOnly: true });
    const row = db.prepare("SELECT expiration FROM _mf_entries WHERE key = ?").get(key);
    db.close();
    if (row) return row.expiration / 1000;
  }
  throw new Error(`no KV entry ${key}`);
}

function pkce() {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

async function authorizationUrl(clientId, { challenge = pkce().challenge, redirect = REDIRECT, resource = RESOURCE } = {}) {
  const url = new URL(`${BASE}/oauth/authorize`);
  for (const [k, v] of Object.entries({ response_type: "code", client_id: clientId, redirect_uri: redirect, code_challenge: challenge, code_challenge_method: "S256", state: "s1", resource })) {
    url.searchParams.set(k, v);
  }
  return url;
}

/** A code as the consent page gets one: `{code, verifier}`. */
async function code(clientId, { session = "default", redirect = REDIRECT } = {}) {
  const { verifier, challenge } = pkce();
  const request = { response_type: "code", client_id: clientId, redirect_uri: redirect, code_challenge: challenge, code_challenge_method: "S256", state: "s", resource: RESOURCE };
  const res = await fetch(`${BASE}/oauth/authorize`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ request, session, approve: true }),
  });
  assert.equal(res.status, 200);
  return { code: new URL((await res.json()).redirect).searchParams.get("code"), verifier };
}

const exchange = (clientId, { code: c, verifier }, extra = {}) =>
  post("/oauth/token", { grant_type: "authorization_code", code: c, code_verifier: verifier, client_id: clientId, redirect_uri: REDIRECT, resource: RESOURCE, ...extra });

async function tokens(clientId, options) {
  const res = await exchange(clientId, await code(clientId, options));
  assert.equal(res.status, 200);
  return res.json();
}

/** tools/list (2026-07-28) with a bearer token; `query` adds ?session=. */
function toolsList(token, query = "", base = BASE, headers = {}) {
  const body = { jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } };
  return fetch(`${base}/mcp${query}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list", ...headers },
    body: JSON.stringify(body),
  });
}

describe("discovery", () => {
  test("a 401 from /mcp points at the protected resource metadata, which names this server", async () => {
    const res = await toolsList("not-a-token");
    assert.equal(res.status, 401);
    assert.match(res.headers.get("www-authenticate"), new RegExp(`resource_metadata="${BASE}/\\.well-known/oauth-protected-resource/mcp"`));
    const resource = await (await fetch(`${BASE}/.well-known/oauth-protected-resource/mcp`)).json();
    assert.deepEqual([resource.resource, resource.authorization_servers], [RESOURCE, [BASE]]);
    const server = await (await fetch(`${BASE}/.well-known/oauth-authorization-server`)).json();
    assert.deepEqual(server.code_challenge_methods_supported, ["S256"]);
    assert.equal(server.registration_endpoint, `${BASE}/oauth/register`);
    assert.equal(server.client_id_metadata_document_supported, true);
  });

  test("API keys keep working for scripts", async () => {
    assert.equal((await toolsList(key)).status, 200);
  });
});

describe("hostile cases", () => {
  let clientId;
  before(async () => {
    clientId = await register();
  });

  test("a wrong PKCE verifier gets no token", async () => {
    const granted = await code(clientId);
    const res = await exchange(clientId, { ...granted, verifier: pkce().verifier });
    assert.equal(res.status, 400);
    assert.equal((await res.json()).error, "invalid_grant");
  });

  test("a code used twice fails, and revokes what the first use gave", async () => {
    const granted = await code(clientId);
    const first = await exchange(clientId, granted);
    const { access_token } = await first.json();
    assert.equal((await toolsList(access_token)).status, 200);
    const again = await exchange(clientId, granted);
    assert.equal((await again.json()).error, "invalid_grant");
    assert.equal((await toolsList(access_token)).status, 401, "the grant is revoked");
  });

  test("an unregistered redirect URI is refused here, never redirected to", async () => {
    const url = await authorizationUrl(clientId, { redirect: "https://evil.example/steal" });
    const res = await fetch(url, { redirect: "manual" });
    assert.equal(res.status, 400);
    assert.match((await res.json()).error_description, /not one client .* registered/);
  });

  test("a token for another resource is refused", async () => {
    const res = await fetch(await authorizationUrl(clientId, { resource: "https://other.example/mcp" }), { redirect: "manual" });
    assert.equal(res.status, 302);
    assert.equal(new URL(res.headers.get("location")).searchParams.get("error"), "invalid_target");
    const granted = await code(clientId);
    const wrong = await exchange(clientId, granted, { resource: "https://other.example/mcp" });
    assert.equal((await wrong.json()).error, "invalid_target");
  });

  test("a revoked access token stops working; a revoked refresh token takes its grant", async () => {
    const first = await tokens(clientId);
    assert.equal((await post("/oauth/revoke", { token: first.access_token })).status, 200);
    assert.equal((await toolsList(first.access_token)).status, 401);
    const second = await tokens(clientId);
    await post("/oauth/revoke", { token: second.refresh_token });
    const res = await toolsList(second.access_token);
    assert.equal(res.status, 401);
    assert.match((await res.json()).error.message, /revoked/);
  });

  test("a refresh token is rotated; using the old one again revokes the grant", async () => {
    const first = await tokens(clientId);
    const refreshed = await post("/oauth/token", { grant_type: "refresh_token", refresh_token: first.refresh_token, client_id: clientId, resource: RESOURCE });
    assert.equal(refreshed.status, 200);
    const second = await refreshed.json();
    assert.notEqual(second.access_token, first.access_token);
    assert.equal((await toolsList(second.access_token)).status, 200);
    const replay = await post("/oauth/token", { grant_type: "refresh_token", refresh_token: first.refresh_token, client_id: clientId });
    assert.equal((await replay.json()).error, "invalid_grant");
    assert.equal((await toolsList(second.access_token)).status, 401, "the whole grant is gone");
  });

  test("a refresh without client_id is refused, and the token still works for its client", async () => {
    const first = await tokens(clientId);
    const anonymous = await post("/oauth/token", { grant_type: "refresh_token", refresh_token: first.refresh_token, resource: RESOURCE });
    assert.equal(anonymous.status, 400);
    const refusal = await anonymous.json();
    assert.equal(refusal.error, "invalid_request");
    assert.match(refusal.error_description, /client_id is required/);
    const own = await post("/oauth/token", { grant_type: "refresh_token", refresh_token: first.refresh_token, client_id: clientId, resource: RESOURCE });
    assert.equal(own.status, 200);
  });

  test("a loopback redirect URI may vary in its port only: no fragment, no userinfo", async () => {
    const loopback = await register("http://127.0.0.1:5555/cb");
    const other = await fetch(await authorizationUrl(loopback, { redirect: "http://127.0.0.1:6666/cb" }), { redirect: "manual" });
    assert.equal(other.status, 302);
    assert.match(other.headers.get("location"), /^http:\/\/[^/]+\/authorize\?/);
    for (const redirect of ["http://127.0.0.1:5555/cb#x", "http://evil.example@127.0.0.1:5555/cb", "http://u:p@127.0.0.1:6666/cb"]) {
      const res = await fetch(await authorizationUrl(loopback, { redirect }), { redirect: "manual" });
      assert.equal(res.status, 400, redirect);
      assert.equal(res.headers.get("location"), null, `${redirect}: never sent there`);
      assert.match((await res.json()).error_description, /not one client .* registered/);
    }
  });

  test("a token works for its relay session only", async () => {
    const { access_token } = await tokens(clientId, { session: "build" });
    assert.equal((await toolsList(access_token, "?session=build")).status, 200);
    assert.equal((await toolsList(access_token, "?session=default")).status, 403);
  });

  test("bad registrations are refused with the OAuth error names", async () => {
    const cases = [
      [{ redirect_uris: [] }, "invalid_redirect_uri"],
      [{ redirect_uris: ["http://evil.example/cb"] }, "invalid_redirect_uri"],
      [{ redirect_uris: [REDIRECT], token_endpoint_auth_method: "client_secret_basic" }, "invalid_client_metadata"],
      ...["ws://a.example/cb", "ftp://a.example/cb", "vbscript:msgbox(1)", "about:blank", "blob:https://a.example/0b5f", "http://127.0.0.1:9/cb#f", "http://a@127.0.0.1:9/cb"].map((uri) => [{ redirect_uris: [uri] }, "invalid_redirect_uri"]),
      [{ redirect_uris: Array.from({ length: 6 }, (_, i) => `https://a.example/${i}`) }, "invalid_redirect_uri"],
      [{ redirect_uris: [`https://a.example/${"x".repeat(600)}`] }, "invalid_redirect_uri"],
    ];
    for (const [body, error] of cases) {
      const res = await registerRaw(body);
      assert.equal((await res.json()).error, error, JSON.stringify(body));
    }
  });
});

describe("registration is bounded", () => {
  const registerFrom = (address, body = { redirect_uris: [REDIRECT] }) => registerRaw(body, address);

  test("in size: a body over 16 KiB is refused before it is read", async () => {
    const res = await registerFrom("192.0.2.10", { redirect_uris: [REDIRECT], client_name: "x".repeat(17 * 1024) });
    assert.equal(res.status, 413);
    assert.equal((await res.json()).error.name, "PayloadTooLarge");
  });

  test("in rate: the 11th registration from one address within a minute gets 429; another address is not held up", async () => {
    const statuses = [];
    for (let i = 0; i < 11; i++) statuses.push((await registerFrom("192.0.2.11")).status);
    assert.deepEqual(statuses, [...Array(10).fill(201), 429]);
    const limited = await registerFrom("192.0.2.11");
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get("retry-after"), "60");
    const body = await limited.json();
    assert.equal(body.error, "temporarily_unavailable");
    assert.match(body.error_description, /wait a minute/);
    assert.equal((await registerFrom("192.0.2.12")).status, 201);
  });

  test("in time: a client is kept a day unless a person allows it, then 90 days", async () => {
    const clientId = await register();
    const now = Date.now() / 1000;
    const day = kvExpiry(`oauth:client:${clientId}`) - now;
    assert.ok(Math.abs(day - 86400) < 600, `kept ${day} s unused`);
    await code(clientId);
    const allowed = kvExpiry(`oauth:client:${clientId}`) - Date.now() / 1000;
    assert.ok(Math.abs(allowed - 90 * 86400) < 600, `kept ${allowed} s once allowed`);
  });
});

/** A loopback web server playing the hosts of client ID metadata documents, good and hostile. */
async function documentHosts() {
  const sent = {};
  const server = createServer((req, res) => {
    const url = `http://127.0.0.1:${server.address().port}${req.url}`;
    const doc = (clientId, name = "cimd client") => JSON.stringify({ client_id: clientId, client_name: name, redirect_uris: [REDIRECT] });
    const answers = {
      "/client.json": () => res.writeHead(200, { "content-type": "application/json" }).end(doc(url)),
      // Followed, the redirect would reach a document naming the URL asked for.
      "/redirect.json": () => res.writeHead(302, { location: "/redirected.json" }).end(),
      "/redirected.json": () => res.writeHead(200, { "content-type": "application/json" }).end(doc(url.replace("redirected", "redirect"))),
      "/hang.json": () => {}, // never answers
      "/huge.json": () => sendHuge(req, res, (bytes) => (sent.huge = bytes)),
      "/missing.json": () => res.writeHead(404).end("no such document"),
      "/html.json": () => res.writeHead(200, { "content-type": "text/html" }).end("<p>hello</p>"),
      "/other.json": () => res.writeHead(200, { "content-type": "application/json" }).end(doc("https://other.example/client.json")),
    };
    (answers[new URL(url).pathname] ?? answers["/missing.json"])();
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${server.address().port}`;
  return { base, sent, close: () => (server.closeAllConnections(), new Promise((r) => server.close(r))) };
}

/** 50 MiB that start like a document, written as fast as the reader takes them; `done(bytes)` when the socket goes. */
function sendHuge(req, res, done) {
  const chunk = Buffer.alloc(64 * 1024, "x");
  let bytes = 0;
  res.writeHead(200, { "content-type": "application/json" });
  res.write('{"pad": "');
  const pump = () => {
    while (bytes < 50 * 1024 * 1024) {
      bytes += chunk.length;
      if (!res.write(chunk)) return res.once("drain", pump);
    }
    res.end('"}');
  };
  res.on("close", () => done(bytes));
  pump();
}

describe("client ID metadata documents", () => {
  let hosts;
  before(async () => {
    hosts = await documentHosts();
  });
  after(() => hosts?.close());

  test("a good one identifies a client without registration", async () => {
    const documentUrl = `${hosts.base}/client.json`;
    const res = await fetch(await authorizationUrl(documentUrl), { redirect: "manual" });
    assert.equal(res.status, 302, await res.clone().text());
    assert.match(res.headers.get("location"), /\/authorize\?/);
    const granted = await code(documentUrl);
    const exchanged = await exchange(documentUrl, granted);
    assert.equal(exchanged.status, 200);
  });

  test("a redirect, a hang, 50 MiB, a 404, HTML, another client's: one refusal, promptly, nothing read past the cap", async () => {
    const refusals = [];
    for (const name of ["redirect", "hang", "huge", "missing", "html", "other"]) {
      const started = performance.now();
      const res = await fetch(await authorizationUrl(`${hosts.base}/${name}.json`), { redirect: "manual", signal: AbortSignal.timeout(60_000) });
      const ms = Math.round(performance.now() - started);
      assert.equal(res.status, 401, name);
      const { error, error_description } = await res.json();
      assert.equal(error, "invalid_client", name);
      refusals.push(error_description);
      console.log(`metadata document ${name}: refused in ${ms} ms`);
    }
    assert.equal(new Set(refusals).size, 1, `the asker learns nothing of the target:\n${refusals.join("\n")}`);
    assert.match(refusals[0], /without following redirects .* status 200 within 5 s, at most 8192 bytes of JSON/);
    for (let i = 0; i < 100 && hosts.sent.huge === undefined; i++) await new Promise((r) => setTimeout(r, 100));
    console.log(`metadata document huge: ${hosts.sent.huge} bytes accepted by the socket before the relay hung up`);
    assert.ok(hosts.sent.huge < 50 * 1024 * 1024, "the relay stopped reading");
  });

  test("URLs it will not fetch are refused for what they are, before any fetch", async () => {
    for (const [clientId, why] of [
      ["http://169.254.169.254/latest/meta-data/client.json", /https/],
      ["https://169.254.169.254/latest/client.json", /169\.254\.169\.254.*IP address literal/],
      ["https://10.0.0.1/client.json", /IP address literal/],
      ["https://metadata/client.json", /no public domain name/],
      ["http://app.example/client.json", /https/],
      [`${hosts.base}/a/../client.json`, /write it exactly as it parses/],
      [`http://user@127.0.0.1:1/client.json`, /user:password@/],
    ]) {
      const res = await fetch(await authorizationUrl(clientId), { redirect: "manual" });
      assert.equal(res.status, 401, clientId);
      assert.match((await res.json()).error_description, why, clientId);
    }
  });
});

describe("behind a proxy (PUBLIC_URL)", () => {
  // A second Worker with PUBLIC_URL set, reached at its loopback address as a proxy would reach
  // it: every origin it makes or compares must be the public one, never the one requests arrive at.
  const PUBLIC = "https://relay.example.com";
  let worker;
  let tenantKey;
  before(async () => {
    const stateDir = await mkdtemp(path.join(tmpdir(), "relay-public-url-"));
    const port = Number(process.env.RELAY_RESTART_PORT ?? 8796);
    worker = await startWorker({ port, stateDir, vars: { PUBLIC_URL: PUBLIC } });
    ({ key: tenantKey } = await createTenant("public-url", undefined, worker.url));
  });
  after(() => worker?.stop());

  test("OAuth names PUBLIC_URL as issuer and resource, sends the browser there, and its tokens work", async () => {
    const at = (route) => `${worker.url}${route}`;
    const server = await (await fetch(at("/.well-known/oauth-authorization-server"))).json();
    assert.deepEqual([server.issuer, server.authorization_endpoint, server.token_endpoint], [PUBLIC, `${PUBLIC}/oauth/authorize`, `${PUBLIC}/oauth/token`]);
    const resource = await (await fetch(at("/.well-known/oauth-protected-resource/mcp"))).json();
    assert.deepEqual([resource.resource, resource.authorization_servers], [`${PUBLIC}/mcp`, [PUBLIC]]);
    const challenge = (await toolsList("not-a-token", "", worker.url)).headers.get("www-authenticate");
    assert.ok(challenge.includes(`resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource/mcp"`), challenge);

    const registered = await fetch(at("/oauth/register"), {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ client_name: "behind a proxy", redirect_uris: [REDIRECT], token_endpoint_auth_method: "none" }),
    });
    const clientId = (await registered.json()).client_id;
    const { verifier, challenge: pkceChallenge } = pkce();
    const request = { response_type: "code", client_id: clientId, redirect_uri: REDIRECT, code_challenge: pkceChallenge, code_challenge_method: "S256", state: "s", resource: `${PUBLIC}/mcp` };
    const authorize = await fetch(`${at("/oauth/authorize")}?${new URLSearchParams(request)}`, { redirect: "manual" });
    assert.equal(authorize.status, 302, await authorize.text());
    assert.ok(authorize.headers.get("location").startsWith(`${PUBLIC}/authorize?`), authorize.headers.get("location"));
    const consent = await fetch(at("/oauth/authorize"), {
      method: "POST", headers: { authorization: `Bearer ${tenantKey}`, "content-type": "application/json" },
      body: JSON.stringify({ request, session: "default", approve: true }),
    });
    const back = new URL((await consent.json()).redirect);
    assert.equal(back.searchParams.get("iss"), PUBLIC);
    const token = await fetch(at("/oauth/token"), {
      method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" },
      body: form({ grant_type: "authorization_code", code: back.searchParams.get("code"), code_verifier: verifier, client_id: clientId, redirect_uri: REDIRECT, resource: `${PUBLIC}/mcp` }),
    });
    const tokens = await token.json();
    assert.equal(token.status, 200, JSON.stringify(tokens));
    const listed = await toolsList(tokens.access_token, "", worker.url);
    assert.equal(listed.status, 200, await listed.clone().text());
    await listed.arrayBuffer();
  });

  test("the executor page at PUBLIC_URL may call /mcp; a foreign origin still may not", async () => {
    for (const [origin, status] of [[PUBLIC, 200], [`${PUBLIC}/`, 200], ["https://evil.example", 403], [`${PUBLIC}.evil.example`, 403]]) {
      const res = await toolsList(tenantKey, "", worker.url, { origin });
      assert.equal(res.status, status, `${origin}: ${await res.clone().text()}`);
      await res.arrayBuffer();
    }
  });
});

describe("the consent page", () => {
  /** Opens the consent page for `clientId` as /oauth/authorize sends a person there. */
  async function openConsent(context, clientId, redirect = REDIRECT) {
    const { page, landed } = await clientPage(context);
    await page.goto((await authorizationUrl(clientId, { redirect })).toString());
    await page.locator("#consent").waitFor();
    return { page, landed };
  }
  const text = (page, id) => page.locator(`#${id}`).textContent();

  test("names the client as it registered, says so, and shows where the code goes", async () => {
    const hostile = 'Évil\u202E ppa\u202C <img src=x onerror="window.pwned=1"> \u200Bclient';
    const clientId = await register(REDIRECT, hostile);
    const context = await browser.newContext();
    const { page } = await openConsent(context, clientId);
    assert.equal(await text(page, "client-name"), "“Évil ppa <img src=x onerror=\"window.pwned=1\"> client”");
    assert.match(await text(page, "client-source"), /named itself when it registered here/);
    assert.equal(await text(page, "redirect-host"), "this computer, port 9");
    assert.ok(await page.locator("#loopback-warning").isVisible(), "a loopback redirect is warned of");
    assert.equal(await text(page, "client-id"), clientId);
    assert.equal(await page.locator("img").count(), 0);
    assert.equal(await page.evaluate(() => window.pwned), undefined);
    await context.close();
  });

  test("names a metadata document's client with its host, and a web redirect by its host", async () => {
    const hosts = await documentHosts();
    const context = await browser.newContext();
    try {
      const { page } = await openConsent(context, `${hosts.base}/client.json`);
      assert.equal(await text(page, "client-name"), "“cimd client”");
      assert.equal(await text(page, "client-source"), `as its client metadata document at ${new URL(hosts.base).host} names it`);
      const web = await register("https://app.example/cb", "Web App");
      const webPage = (await openConsent(context, web, "https://app.example/cb")).page;
      assert.equal(await text(webPage, "redirect-host"), "app.example");
      assert.ok(!(await webPage.locator("#loopback-warning").isVisible()));
    } finally {
      await context.close();
      await hosts.close();
    }
  });

  test("a click as the page appears is not acted on; one after a moment is", async () => {
    const context = await browser.newContext();
    // The key is already in the tab's storage, as it was in the attack, and a click lands on
    // Allow the instant the page and then its form appear.
    await context.addInitScript((k) => {
      localStorage.setItem("relay.key", k);
      const click = () => document.querySelector("button[value=yes]")?.click();
      document.addEventListener("DOMContentLoaded", () => {
        click();
        const form = document.getElementById("consent");
        new MutationObserver(click).observe(form, { attributes: true });
      });
    }, key);
    const { page, landed } = await clientPage(context);
    const posts = [];
    page.on("request", (r) => r.method() === "POST" && posts.push(r.url()));
    await page.goto((await authorizationUrl(await register())).toString());
    await page.locator("#consent").waitFor();
    await page.waitForTimeout(300);
    assert.deepEqual(posts, [], "no answer was sent");
    assert.equal(landed(), undefined);
    await page.getByRole("button", { name: "Allow" }).click();
    await page.waitForFunction(() => document.body.textContent.includes("back at the client"));
    assert.ok(new URL(landed()).searchParams.get("code"));
    await context.close();
  });

  test("fits a 360 px screen, with Allow and Deny unlike each other (screenshot)", async () => {
    const clientId = await register(`http://127.0.0.1:9/${"callback-".repeat(40)}`, "N".repeat(100));
    const context = await browser.newContext({ viewport: { width: 360, height: 800 } });
    const { page } = await openConsent(context, clientId, `http://127.0.0.1:9/${"callback-".repeat(40)}`);
    await page.locator("details").evaluate((d) => (d.open = true));
    const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
    assert.ok(widths.scroll <= widths.client, `the page is ${widths.scroll} px wide on a ${widths.client} px screen`);
    const look = (name) => page.getByRole("button", { name }).evaluate((b) => { const s = getComputedStyle(b); return `${s.backgroundColor} ${s.color} ${s.borderColor}`; });
    assert.notEqual(await look("Allow"), await look("Deny"));
    await page.getByRole("button", { name: "Allow" }).and(page.locator(":enabled")).waitFor();
    const dir = path.join(ROOT, "miniflare-tests/.artifacts/screenshots");
    mkdirSync(dir, { recursive: true });
    await page.screenshot({ path: path.join(dir, "consent-narrow.png"), fullPage: true });
    await context.close();
  });
});

describe("the conformance suite's authorization server scenarios", () => {
  test("metadata endpoint and authorization code grant pass, the consent given in Chromium", async () => {
    const { spawn } = await import("node:child_process");
    const { mkdtempSync, readdirSync, readFileSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const path = await import("node:path");
    const { ROOT } = await import("./lib/relay.mjs");
    const port = 3917;
    const clientId = await register(`http://127.0.0.1:${port}/callback`);
    const out = mkdtempSync(path.join(tmpdir(), "relay-conformance-auth-"));
    const cli = path.join(ROOT, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
    const args = [cli, "authorization", "--url", BASE, "--client-id", clientId, "--resource", RESOURCE, "-p", String(port), "-o", out];
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const authorizeUrl = new Promise((resolve) => {
      const onData = (d) => {
        output += d;
        const url = output.match(/^(http\S+\/oauth\/authorize\?\S+)$/m)?.[1];
        if (url) resolve(url);
      };
      child.stdout.on("data", onData);
      child.stderr.on("data", onData);
    });
    const exited = new Promise((resolve) => child.on("close", resolve));
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(await authorizeUrl);
    await page.getByLabel("Your API key").fill(key);
    await page.getByRole("button", { name: "Allow" }).click();
    const code = await exited;
    await context.close();
    const checks = readdirSync(out).flatMap((dir) => JSON.parse(readFileSync(path.join(out, dir, "checks.json"), "utf8")));
    const failed = checks.filter((c) => c.status === "FAILURE" || c.status === "WARNING");
    assert.deepEqual(failed, [], output);
    assert.ok(checks.some((c) => c.status === "SUCCESS" && /AuthorizationCodeGrant/.test(c.name)), JSON.stringify(checks.map((c) => [c.id, c.status])));
    assert.equal(code, 0, output);
  });
});
