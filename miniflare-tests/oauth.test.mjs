// OAuth 2.1 for hosted MCP clients, end to end: the official TypeScript SDK's client with its
// OAuth client provider discovers the authorization server from a 401, registers itself,
// sends the person to the consent page (driven in Chromium: the API key typed, "Allow"
// clicked), exchanges the code with PKCE, and then lists tools and runs code with the access
// token alone. Then the hostile cases over raw HTTP: a wrong PKCE verifier, a reused code, an
// unregistered redirect URI, another resource, a revoked token, a rotated refresh token used
// again, a token used for another relay session; and a client ID metadata document.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { launchBrowser, openExecutor } from "./lib/browser.mjs";
import { BASE, createTenant } from "./lib/relay.mjs";

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

/** A person at the consent page: types the key, clicks a button; returns where it sent them. */
async function consentInBrowser(url, button = "Allow") {
  const context = await browser.newContext();
  const page = await context.newPage();
  let landed;
  await page.route("http://127.0.0.1:9/**", (route) => {
    landed = route.request().url();
    return route.fulfill({ status: 200, body: "back at the client" });
  });
  await page.goto(url.toString());
  await page.getByLabel("Your API key").fill(key);
  await page.getByRole("button", { name: button }).click();
  await page.waitForFunction(() => document.body.textContent.includes("back at the client"));
  await context.close();
  return new URL(landed);
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

async function register(redirect = REDIRECT) {
  const res = await fetch(`${BASE}/oauth/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ client_name: "raw", redirect_uris: [redirect], token_endpoint_auth_method: "none" }),
  });
  assert.equal(res.status, 201);
  return (await res.json()).client_id;
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
function toolsList(token, query = "") {
  const body = { jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } };
  return fetch(`${BASE}/mcp${query}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list" },
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
    ];
    for (const [body, error] of cases) {
      const res = await fetch(`${BASE}/oauth/register`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      assert.equal((await res.json()).error, error, JSON.stringify(body));
    }
  });
});

describe("a client ID metadata document", () => {
  let server;
  let documentUrl;
  before(async () => {
    server = createServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ client_id: documentUrl, client_name: "cimd client", redirect_uris: [REDIRECT] }));
    });
    await new Promise((r) => server.listen(0, "127.0.0.1", r));
    documentUrl = `http://127.0.0.1:${server.address().port}/client.json`;
  });
  after(() => server?.close());

  test("identifies a client without registration", async () => {
    const res = await fetch(await authorizationUrl(documentUrl), { redirect: "manual" });
    assert.equal(res.status, 302, await res.clone().text());
    assert.match(res.headers.get("location"), /\/authorize\?/);
    const granted = await code(documentUrl);
    const exchanged = await exchange(documentUrl, granted);
    assert.equal(exchanged.status, 200);
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
