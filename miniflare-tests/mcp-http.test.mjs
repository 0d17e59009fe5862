// /mcp over raw HTTP against the built Worker: every status and header rule of both protocol
// eras (2026-07-28 stateless, 2025-03-26..2025-11-25 with sessions), auth and tenants, CORS and
// Origin validation, relay session routing and tenant isolation, tool errors with no executor
// tab attached, SSE framing and keep-alives, cancellation, and bad input (never a 500).

import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { readdirSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { promisify } from "node:util";
import { before, describe, test } from "node:test";
import {
  ACCEPT, LEGACY, MODERN, TOOL_NAMES, initialize, legacyCall, legacyHeaders, mcpUrl, modern, modernBody,
  modernCall, modernHeaders, post, rawRequest, readAnswer, readUntil, relaySession,
} from "./lib/mcp-http.mjs";
import { BASE, ROOT, createTenant, devVars } from "./lib/relay.mjs";

/** Asserts `res` is the JSON error `name` with `status`; returns its message. */
async function assertError(res, status, name) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  const { error } = JSON.parse(text);
  assert.equal(error.name, name, text);
  return error.message;
}

/** Test tenants wait 300 ms for a tab, not the default 5 s, so no-executor calls stay fast. */
const FAST = { queue: { attachWaitMs: 300 } };
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const errorCode = (message) => message?.error?.code;

let key; // the main test tenant's API key
let tenant;
before(async () => {
  ({ key, tenant } = await createTenant("mcp-http", FAST));
});

describe("tenants and auth", () => {
  test("POST /admin/tenants needs the admin token, checks the body, and shows the key once", async () => {
    const url = `${BASE}/admin/tenants`;
    const json = { "content-type": "application/json" };
    let res = await fetch(url, { method: "POST", headers: json, body: '{"name":"x"}' });
    assert.equal(res.status, 401);
    res = await fetch(url, { method: "POST", headers: { ...json, authorization: "Bearer nope" }, body: '{"name":"x"}' });
    assert.equal(res.status, 401);
    const admin = { ...json, authorization: `Bearer ${devVars.ADMIN_TOKEN}` };
    for (const body of ["{", "[]", '{"nme":"x"}', '{"name":"x","key":"short"}', '{"name":"x","id":"a/b"}']) {
      res = await fetch(url, { method: "POST", headers: admin, body });
      assert.equal(res.status, 400, body);
      assert.equal((await res.json()).error.name, "ValidationError");
    }
    const created = await createTenant("shown-once");
    assert.match(created.key, /^rk_[A-Za-z0-9_-]{43}$/);
    assert.match(created.tenant.id, /^t_[0-9a-f]{16}$/);
    assert.equal(JSON.stringify(created.tenant).includes(created.key), false, "the record never holds the key");
  });

  test("GET and PATCH /admin/tenants/<id> show and change a tenant's defaults, validated as creation is", async () => {
    const { key: own, tenant: made } = await createTenant("patched", FAST);
    const url = `${BASE}/admin/tenants/${made.id}`;
    const admin = { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, "content-type": "application/json" };
    assert.equal((await fetch(url, { method: "PATCH", body: "{}" })).status, 401, "the admin token is needed");
    assert.equal((await fetch(url)).status, 401);
    const policy = { network: { allowedDomains: ["example.com"] }, limits: { timeoutMs: 30000 } };
    let res = await fetch(url, { method: "PATCH", headers: admin, body: JSON.stringify({ defaults: { policy } }) });
    assert.equal(res.status, 200);
    const { tenant: changed } = await res.json();
    assert.deepEqual(changed.defaults.policy.network.allowedDomains, ["example.com"]);
    assert.equal(changed.defaults.queue.attachWaitMs, 300, "what the patch does not name is kept");
    assert.equal(changed.defaults.policy.limits.memMb, 256);
    assert.deepEqual((await (await fetch(url, { headers: admin })).json()).tenant, changed);
    // The key's requests see the patched tenant at once (this isolate's cache was updated):
    // the prompt quotes the new limits.
    const { message } = await modernCall(own, "prompts/get", { name: "use-relay" });
    assert.match(message.result.messages[0].content.text, /"timeoutMs": 30000/);
    const refusals = [
      [{ id: "t_other" }, /"id" cannot be patched/],
      [{ defaults: { policy: { network: { allowedDomain: ["x.com"] } } } }, /defaults\.policy\.network\.allowedDomain is not a tenant setting/],
      [{ defaults: { policy: { limits: { timeoutMs: 1e12 } } } }, /limits\.timeoutMs is 1000000000000; it must be between 1 and 3600000/],
      ['{"defaults": {"outFileMaxBytes": 9223372036854775808}}', /outFileMaxBytes is 9223372036854775808/],
      [{ name: "evil\u202Egnp.exe" }, /U\+202E/],
    ];
    for (const [patch, message] of refusals) {
      const body = typeof patch === "string" ? patch : JSON.stringify(patch);
      res = await fetch(url, { method: "PATCH", headers: admin, body });
      assert.match(await assertError(res, 400, "ValidationError"), message, body);
    }
    res = await fetch(`${BASE}/admin/tenants/t_nobody`, { method: "PATCH", headers: admin, body: "{}" });
    assert.match(await assertError(res, 404, "NotFound"), /"t_nobody"/);
  });

  test("POST /admin/tenants bounds names and numbers: 400s naming the field, never a 503", async () => {
    const admin = { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, "content-type": "application/json" };
    const create = (body) =>
      fetch(`${BASE}/admin/tenants`, { method: "POST", headers: admin, body: typeof body === "string" ? body : JSON.stringify(body) });
    const cases = [
      [{ name: "a\u0000b" }, /U\+0000/],
      [{ name: "a\r\nX-Injected: 1" }, /U\+000D/],
      [{ name: "\u001b[31mred" }, /U\+001B/],
      [{ name: "evil\u202Egnp.exe" }, /U\+202E/],
      [{ name: "" }, /1 to 100 characters/],
      [{ name: "n".repeat(60 * 1024) }, /1 to 100 characters/],
      ['{"name": "x", "defaults": {"outFileMaxBytes": 9223372036854775808}}', /outFileMaxBytes is 9223372036854775808; it must be between 1 and 104857600/],
      [{ name: "x", defaults: { policy: { limits: { timeoutMs: 1e12 } } } }, /timeoutMs is 1000000000000/],
    ];
    for (const [body, message] of cases) {
      assert.match(await assertError(await create(body), 400, "ValidationError"), message, String(JSON.stringify(body)).slice(0, 80));
    }
  });

  test("upstream servers cannot be added for, listed for or removed from a tenant that does not exist", async () => {
    const admin = { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, "content-type": "application/json" };
    const base = `${BASE}/admin/tenants/t_ghost/upstreams`;
    const spec = JSON.stringify({ url: "https://search.example.com/mcp" });
    for (const [method, url, body] of [["PUT", `${base}/search`, spec], ["GET", base], ["DELETE", `${base}/search`]]) {
      const message = await assertError(await fetch(url, { method, headers: admin, body }), 404, "NotFound");
      assert.match(message, /no tenant "t_ghost"/, method);
    }
  });

  test("scripts/dev-tenant.sh seeds the dev tenant, and seeding again keeps the defaults an admin set", async () => {
    const seed = () => execFileSync("bash", [path.join(ROOT, "scripts/dev-tenant.sh"), BASE], { stdio: ["ignore", "pipe", "pipe"] });
    const admin = { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, "content-type": "application/json" };
    seed();
    const patch = { defaults: { policy: { network: { allowedDomains: ["example.com"] } } } };
    assert.equal((await fetch(`${BASE}/admin/tenants/dev`, { method: "PATCH", headers: admin, body: JSON.stringify(patch) })).status, 200);
    seed(); // what scripts/dev.sh does on every start
    const { tenant: dev } = await (await fetch(`${BASE}/admin/tenants/dev`, { headers: admin })).json();
    assert.deepEqual(dev.defaults.policy.network.allowedDomains, ["example.com"]);
    assert.equal(dev.defaults.executor, "tab-or-edge", "a local user sees runs at the edge when no tab is open");
    assert.ok(dev.defaults.edge.runsPerMinute > 0 && dev.defaults.edge.cpuMsPerDay > 0);
    const discover = await post(modernHeaders(devVars.DEV_API_KEY, modernBody("server/discover")), modernBody("server/discover"));
    assert.equal(discover.status, 200, "the key in .dev.vars is the dev tenant's");
  });

  test("scripts/dev-tenant.sh seeds nothing when the relay fails to say whether the dev tenant exists", async () => {
    // A stand-in relay whose admin lookup fails as a relay can (a 503 of KV, a 401 for a wrong
    // ADMIN_TOKEN): only a 404 means "no dev tenant yet"; anything else must not re-seed empty
    // defaults over the ones an admin set.
    for (const [status, error] of [[503, "StorageUnavailable"], [401, "Unauthorized"], [500, "Internal"]]) {
      const seen = [];
      const relay = createServer((req, res) => {
        seen.push(`${req.method} ${req.url}`);
        res.writeHead(req.method === "GET" ? status : 201, { "content-type": "application/json" });
        res.end(JSON.stringify(req.method === "GET" ? { error: { name: error, message: "stand-in" } } : {}));
      });
      relay.listen(0, "127.0.0.1");
      await once(relay, "listening");
      try {
        const script = path.join(ROOT, "scripts/dev-tenant.sh");
        const run = await promisify(execFile)("bash", [script, `http://127.0.0.1:${relay.address().port}`]).then(
          () => ({ code: 0, stderr: "" }),
          (e) => e,
        );
        assert.notEqual(run.code, 0, `exit status after a ${status}`);
        assert.match(run.stderr, new RegExp(`answered ${status}: .*${error}`), run.stderr);
        assert.match(run.stderr, /nothing seeded, so the dev tenant's defaults stay as they are/);
        assert.deepEqual(seen, ["GET /admin/tenants/dev"], `a ${status} seeded nothing`);
      } finally {
        relay.closeAllConnections();
        await new Promise((resolve) => relay.close(resolve));
      }
    }
  });

  test("/mcp without a key, or with a wrong one, is 401 with WWW-Authenticate", async () => {
    const body = modernBody("server/discover");
    const cases = {
      missing: undefined,
      "not bearer": `Basic ${Buffer.from("a:b").toString("base64")}`,
      malformed: "Bearer not-a-relay-key",
      unknown: `Bearer rk_${"A".repeat(43)}`,
      "another case": `Bearer ${key.toUpperCase()}`,
    };
    for (const [name, authorization] of Object.entries(cases)) {
      const headers = { ...modernHeaders(key, body), authorization };
      if (!authorization) delete headers.authorization;
      const res = await post(headers, body);
      assert.equal(res.status, 401, name);
      assert.match(res.headers.get("www-authenticate"), /^Bearer /, name);
      assert.equal(res.headers.get("access-control-allow-origin"), "*", name);
      assert.equal((await res.json()).error.name, "Unauthorized", name);
    }
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(mcpUrl(), { method, headers: { "mcp-session-id": "mcp_x", accept: ACCEPT } });
      assert.equal(res.status, 401, method);
      assert.ok(res.headers.get("www-authenticate"), method);
    }
  });

  test("KV holds API keys only as sha256: the raw key is nowhere in the Worker's local state", async (t) => {
    const dir = wranglerStateDir();
    if (!dir) return t.skip("the wrangler dev serving RELAY_URL and its --persist-to directory were not found");
    const { key: secret } = await createTenant("hashed-key");
    const hash = createHash("sha256").update(secret).digest("hex");
    const files = listFiles(dir);
    const holding = (needle) => files.filter((f) => readFileSync(f).includes(Buffer.from(needle)));
    assert.deepEqual(holding(secret), [], "the key in clear");
    assert.ok(holding(`tenant:${hash}`).length > 0, `tenant:<sha256> not found under ${dir}`);
  });
});

describe("CORS and Origin validation", () => {
  test("a preflight allows any origin, the MCP headers and methods", async () => {
    const res = await fetch(mcpUrl(), {
      method: "OPTIONS",
      headers: { origin: "https://any.example", "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, mcp-session-id" },
    });
    assert.equal(res.status, 204);
    assert.equal(res.headers.get("access-control-allow-origin"), "*");
    const methods = res.headers.get("access-control-allow-methods");
    for (const m of ["GET", "POST", "DELETE", "OPTIONS"]) assert.match(methods, new RegExp(m));
    const allowed = res.headers.get("access-control-allow-headers").toLowerCase();
    const mcpHeaders = ["authorization", "content-type", "accept", "mcp-session-id", "mcp-protocol-version",
      "mcp-method", "mcp-name", "last-event-id"];
    for (const h of mcpHeaders) {
      assert.ok(allowed.includes(h), h);
    }
    assert.ok(Number(res.headers.get("access-control-max-age")) > 0);
  });

  test("answers expose Mcp-Session-Id and the other MCP headers to pages", async () => {
    const { res } = await initialize(key);
    assert.equal(res.headers.get("access-control-allow-origin"), "*");
    const exposed = res.headers.get("access-control-expose-headers").toLowerCase();
    for (const h of ["mcp-session-id", "mcp-protocol-version", "www-authenticate"]) assert.ok(exposed.includes(h), h);
    const modernRes = await modern(key, "server/discover");
    assert.equal(modernRes.headers.get("access-control-allow-origin"), "*");
    await modernRes.arrayBuffer();
  });

  test("a foreign browser Origin is 403, with or without a key; no Origin passes", async () => {
    const evil = { origin: "https://evil.example" };
    let res = await modern(key, "server/discover", {}, { headers: evil });
    assert.equal(res.status, 403);
    assert.equal((await res.json()).error.name, "Forbidden");
    res = await modern(key, "server/discover", {}, { headers: { ...evil, authorization: undefined } });
    assert.equal(res.status, 403, "refused before auth is discussed");
    await res.arrayBuffer();
    for (const origin of ["null", "http://127.0.0.1.evil.example", "http://localhost.evil.example", "file://", "garbage"]) {
      res = await modern(key, "server/discover", {}, { headers: { origin } });
      assert.equal(res.status, 403, origin);
      await res.arrayBuffer();
    }
    const { status, message } = await modernCall(key, "server/discover");
    assert.equal(status, 200);
    assert.equal(message.result.resultType, "complete");
  });

  test("the Worker's own origin and localhost (RELAY_ALLOW_LOCALHOST=1) pass", async () => {
    assert.equal(devVars.RELAY_ALLOW_LOCALHOST, "1");
    for (const origin of [BASE, "http://localhost:5173", "https://localhost:8443", "http://127.0.0.1:9", "http://[::1]:8080"]) {
      const res = await modern(key, "server/discover", {}, { headers: { origin } });
      assert.equal(res.status, 200, origin);
      await res.arrayBuffer();
    }
  });

  test("a tenant's allowedOrigins admit that origin for that tenant only", async () => {
    const app = "https://app.example.com";
    const { key: allowing } = await createTenant("origins", { ...FAST, allowedOrigins: [app] });
    let res = await modern(allowing, "server/discover", {}, { headers: { origin: app } });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    res = await modern(key, "server/discover", {}, { headers: { origin: app } });
    assert.equal(res.status, 403, "another tenant's allowed origin");
    await res.arrayBuffer();
  });

  test("DNS rebinding: a forged Host with the matching Origin is 403 even with a valid key", async () => {
    const body = JSON.stringify(modernBody("server/discover"));
    const headers = { ...modernHeaders(key, JSON.parse(body)), host: "evil.example.com", origin: "http://evil.example.com" };
    const forged = await rawRequest("POST", "/mcp", headers, body);
    assert.equal(forged.status, 403, forged.body);
    const host = new URL(BASE).host;
    const honest = await rawRequest("POST", "/mcp", { ...headers, host, origin: `http://${host}` }, body);
    assert.equal(honest.status, 200, honest.body);
  });
});

describe("2026-07-28: stateless requests", () => {
  test("server/discover lists our versions and capabilities, with no session minted", async () => {
    const { status, res, message } = await modernCall(key, "server/discover");
    assert.equal(status, 200);
    assert.match(res.headers.get("content-type"), /^application\/json/);
    assert.equal(res.headers.get("mcp-session-id"), null);
    const { result } = message;
    assert.equal(message.jsonrpc, "2.0");
    assert.equal(message.id, 1);
    assert.deepEqual(result.supportedVersions, [MODERN, "2025-11-25", "2025-06-18", "2025-03-26"]);
    assert.ok(result.capabilities.tools && result.capabilities.resources && result.capabilities.prompts);
    assert.equal(result.resultType, "complete");
    assert.match(result.instructions, /run_js/);
    assert.equal(typeof result.ttlMs, "number");
    assert.equal(result._meta["io.modelcontextprotocol/serverInfo"].name, "relay-edge");
  });

  test("tools/list: the five tools in a fixed order with their input and output schemas and annotations", async () => {
    const first = (await modernCall(key, "tools/list")).message.result;
    const again = (await modernCall(key, "tools/list", {}, { id: 2 })).message.result;
    assert.deepEqual(again.tools, first.tools, "deterministic");
    assert.equal(first.resultType, "complete");
    assert.ok(Number.isInteger(first.ttlMs) && first.ttlMs > 0);
    assert.equal(first.cacheScope, "public");
    assert.deepEqual(first.tools.map((t) => t.name), TOOL_NAMES);
    const tools = Object.fromEntries(first.tools.map((t) => [t.name, t]));
    const props = (name) => Object.keys(tools[name].inputSchema.properties).sort();
    assert.deepEqual(props("run_js"), ["args", "code", "context", "cwd", "env", "executor", "npm", "policy", "reset", "stdin"]);
    assert.deepEqual(props("run_py"), ["args", "code", "context", "cwd", "env", "executor", "pip", "policy", "reset", "stdin"]);
    assert.deepEqual(props("read"), ["encoding", "maxBytes", "offset", "path"]);
    assert.deepEqual(props("write"), ["content", "encoding", "mode", "path"]);
    assert.deepEqual(props("search"), ["caseSensitive", "filePattern", "maxResults", "paths", "pattern"]);
    assert.deepEqual(tools.run_py.inputSchema.properties.pip.properties.requirements.type, "array");
    assert.deepEqual(tools.run_js.inputSchema.required, ["code"]);
    assert.deepEqual(tools.write.inputSchema.required, ["path", "content"]);
    assert.deepEqual(tools.write.inputSchema.properties.mode.enum, ["create", "append", "overwrite"]);
    for (const tool of first.tools) {
      assert.equal(tool.inputSchema.type, "object", tool.name);
      assert.equal(tool.outputSchema.type, "object", tool.name);
      assert.ok(tool.outputSchema.properties.error, `${tool.name}: failures fit the output schema`);
      assert.ok(tool.description.length > 40, tool.name);
    }
    assert.deepEqual(Object.keys(tools.run_js.outputSchema.properties).sort(), ["context", "displays", "error", "executor", "exitCode", "files", "notStored", "stderr", "stdout", "truncated", "usage"]);
    for (const name of ["read", "search"]) assert.equal(tools[name].annotations.readOnlyHint, true, name);
    for (const name of ["run_js", "run_py"]) {
      assert.equal(tools[name].annotations.openWorldHint, true, name);
      assert.equal(tools[name].annotations.readOnlyHint, false, name);
    }
  });

  test("resources and prompts: relay://session and use-relay, with caching hints", async () => {
    const resources = (await modernCall(key, "resources/list")).message.result;
    assert.deepEqual(resources.resources.map((r) => r.uri), ["relay://session", "relay://audit", "relay://workspace", "relay://contexts", "relay://usage"]);
    assert.equal(resources.cacheScope, "public");
    const templates = (await modernCall(key, "resources/templates/list")).message.result;
    assert.deepEqual(templates.resourceTemplates, []);
    assert.ok(Number.isInteger(templates.ttlMs));
    const read = (await modernCall(key, "resources/read", { uri: "relay://session" })).message.result;
    assert.equal(read.cacheScope, "private");
    assert.equal(read.ttlMs, 0);
    assert.equal(read.contents[0].mimeType, "application/json");
    const status = JSON.parse(read.contents[0].text);
    assert.equal(status.session, "default");
    // No tab, so none has reported its runtimes.
    const none = { attached: false, tabs: 0, tabIds: [], pageUrl: `${BASE}/`, warmingUp: false, runtimes: null };
    assert.deepEqual(status.executor, none);

    const prompts = (await modernCall(key, "prompts/list")).message.result;
    assert.deepEqual(prompts.prompts.map((p) => p.name), ["use-relay"]);
    assert.equal(prompts.cacheScope, "public");
    const prompt = (await modernCall(key, "prompts/get", { name: "use-relay", arguments: { task: "sum a CSV" } })).message.result;
    assert.equal(prompt.resultType, "complete");
    const text = prompt.messages[0].content.text;
    for (const needle of ["NoExecutorAttached", "/out", "timeoutMs", `${BASE}/`, "sum a CSV"]) assert.ok(text.includes(needle), needle);
  });

  test("a missing _meta version or clientCapabilities is 400 -32602", async () => {
    const metas = [undefined, {}, { "io.modelcontextprotocol/protocolVersion": MODERN },
      { "io.modelcontextprotocol/clientCapabilities": {} }];
    for (const meta of metas) {
      const body = { jsonrpc: "2.0", id: 4, method: "tools/list", params: meta ? { _meta: meta } : {} };
      const headers = { ...modernHeaders(key, body), "mcp-protocol-version": MODERN };
      const res = await post(headers, body);
      assert.equal(res.status, 400, JSON.stringify(meta));
      const message = await res.json();
      assert.equal(errorCode(message), -32602, JSON.stringify(meta));
      assert.equal(message.id, 4);
    }
  });

  test("an unsupported version is 400 UnsupportedProtocolVersion (-32022) listing ours", async () => {
    for (const version of ["2099-01-01", "2024-11-05", "v999.0.0"]) {
      const meta = { "io.modelcontextprotocol/protocolVersion": version };
      const { status, message } = await modernCall(key, "tools/list", { _meta: meta });
      assert.equal(status, 400, version);
      assert.equal(errorCode(message), -32022, version);
      assert.ok(message.error.data.supported.includes(MODERN), version);
      assert.equal(message.error.data.requested, version);
    }
  });

  test("headers that disagree with the body, or are missing, are 400 HeaderMismatch (-32020)", async () => {
    const call = { name: "run_js", arguments: { code: "1" } };
    const cases = [
      ["tools/list", {}, { "mcp-protocol-version": "2025-11-25" }],
      ["tools/list", {}, { "mcp-protocol-version": undefined }],
      ["tools/list", { _meta: { "io.modelcontextprotocol/protocolVersion": "v999" } }, { "mcp-protocol-version": MODERN }],
      ["tools/list", {}, { "mcp-method": "prompts/list" }],
      ["tools/list", {}, { "mcp-method": undefined }],
      ["tools/call", call, { "mcp-name": "run_py" }],
      ["tools/call", call, { "mcp-name": undefined }],
      ["tools/call", call, { "mcp-name": "=?base64?cnVuX3B5?=" }], // run_py
      ["tools/call", call, { "mcp-name": "=?base64?not base64?=" }],
      ["prompts/get", { name: "use-relay" }, { "mcp-name": "other" }],
      ["resources/read", { uri: "relay://session" }, { "mcp-name": "relay://other" }],
    ];
    for (const [method, params, headers] of cases) {
      const { status, message } = await modernCall(key, method, params, { headers });
      const label = `${method} ${JSON.stringify(headers)}`;
      assert.equal(status, 400, label);
      assert.equal(errorCode(message), -32020, label);
      assert.match(message.error.message, /^Header mismatch/, label);
    }
  });

  test("Mcp-Name may use the Base64 sentinel", async () => {
    const params = { uri: "relay://session" };
    const encoded = `=?base64?${Buffer.from("relay://session").toString("base64")}?=`;
    const { status, message } = await modernCall(key, "resources/read", params, { headers: { "mcp-name": encoded } });
    assert.equal(status, 200);
    assert.equal(message.result.contents[0].uri, "relay://session");
  });

  test("unknown and removed methods are 404 with -32601", async () => {
    for (const method of ["tools/frobnicate", "initialize", "ping", "logging/setLevel", "resources/subscribe", "completion/complete"]) {
      const { status, message } = await modernCall(key, method, method === "initialize" ? { protocolVersion: LEGACY } : {});
      assert.equal(status, 404, method);
      assert.equal(errorCode(message), -32601, method);
      assert.equal(message.id, 1, method);
    }
  });

  test("invalid params are JSON-RPC errors; bad tool arguments are a ValidationError tool result", async () => {
    let { status, message } = await modernCall(key, "tools/call", { name: "rm_rf", arguments: {} });
    assert.equal(status, 200);
    assert.equal(errorCode(message), -32602);
    assert.deepEqual(message.error.data.tools, TOOL_NAMES);
    ({ status, message } = await modernCall(key, "tools/call", { name: "run_js", arguments: [1] }));
    assert.equal(errorCode(message), -32602);
    ({ status, message } = await modernCall(key, "resources/read", { uri: "relay://nope" }));
    assert.equal(errorCode(message), -32602);
    assert.equal(message.error.data.uri, "relay://nope");
    ({ status, message } = await modernCall(key, "prompts/get", { name: "nope" }));
    assert.equal(errorCode(message), -32602);
    ({ status, message } = await modernCall(key, "tools/list", { cursor: "page-2" }));
    assert.equal(errorCode(message), -32602);
    ({ status, message } = await modernCall(key, "tools/call", { name: "run_js", arguments: { code: 42 } }));
    assert.equal(status, 200);
    assert.equal(message.result.isError, true);
    assert.equal(message.result.structuredContent.error.name, "ValidationError");
    assert.match(message.result.structuredContent.error.message, /code/);
    const meta = { "io.modelcontextprotocol/logLevel": "loud" };
    ({ status, message } = await modernCall(key, "tools/list", { _meta: meta }));
    assert.equal(status, 400);
    assert.equal(errorCode(message), -32602);
  });

  test("a stray Mcp-Session-Id is ignored and none is minted; GET and DELETE without a session are 405", async () => {
    const { status, res } = await modernCall(key, "tools/list", {}, { headers: { "mcp-session-id": "mcp_never_minted" } });
    assert.equal(status, 200);
    assert.equal(res.headers.get("mcp-session-id"), null);
    for (const method of ["GET", "DELETE"]) {
      const get = await fetch(mcpUrl(), { method, headers: { authorization: `Bearer ${key}`, accept: ACCEPT } });
      assert.equal(get.status, 405, method);
      assert.match(get.headers.get("allow"), /POST/);
      assert.equal(errorCode(await get.json()), -32600, method);
    }
  });
});

describe("tools with no browser tab attached", () => {
  for (const tool of ["run_js", "run_py"]) {
    test(`${tool} waits attachWaitMs, then answers isError NoExecutorAttached saying how to attach`, async () => {
      const code = tool === "run_js" ? "console.log(1)" : "print(1)";
      const started = Date.now();
      const { status, res, message, events } = await modernCall(key, "tools/call", { name: tool, arguments: { code } });
      const waited = Date.now() - started;
      assert.equal(status, 200);
      assert.match(res.headers.get("content-type"), /^text\/event-stream/);
      assert.equal(res.headers.get("x-accel-buffering"), "no");
      assert.match(res.headers.get("cache-control"), /no-cache/);
      assert.ok(waited >= 300 && waited < 4000, `waited ${waited} ms`);
      assert.equal(events.at(-1), message, "the result ends the stream");
      assertNoExecutor(message.result);
      assert.equal(message.result.resultType, "complete");
      assert.equal(message.result.structuredContent.exitCode, 1);
    });
  }

  test("read, write and search with no tab attached are answered by the relay session at once", async () => {
    const call = async (name, args) => {
      const { status, message } = await modernCall(key, "tools/call", { name, arguments: args });
      assert.equal(status, 200);
      return message.result;
    };
    const missing = await call("read", { path: "/out/a.txt" });
    assert.equal(missing.structuredContent.error.name, "ValidationError", "no such file: not NoExecutorAttached");
    assert.deepEqual((await call("write", { path: "/out/a.txt", content: "x" })).structuredContent, { path: "/out/a.txt", bytesWritten: 1, size: 1 });
    assert.equal((await call("read", { path: "/out/a.txt" })).structuredContent.content, "x");
    assert.equal((await call("search", { pattern: "x" })).structuredContent.totalMatches, 1);
  });

  test("a client accepting anything gets the tool result as application/json", async () => {
    const body = modernBody("tools/call", { name: "run_js", arguments: { code: "1" } });
    const res = await post({ ...modernHeaders(key, body), accept: "*/*" }, body);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type"), /^application\/json/);
    assertNoExecutor((await res.json()).result);
  });
});

function assertNoExecutor(result) {
  assert.equal(result.isError, true);
  assert.equal(result.structuredContent.error.name, "NoExecutorAttached");
  const text = result.content[0].text;
  assert.match(text, /^NoExecutorAttached: no browser tab is attached/);
  assert.ok(text.includes(`open ${BASE}/`), `says which page to open: ${text}`);
  assert.doesNotMatch(text, /peak memory/, "no time or memory of a run that never ran");
  // A run tool's answer has an exit code, and says the code did not run.
  if ("exitCode" in result.structuredContent) assert.match(text, /\nexit code 1: the code did not run$/, text);
}

describe("legacy era: sessions", () => {
  test("initialize negotiates the version and mints a visible-ASCII Mcp-Session-Id", async () => {
    const negotiations = [["2025-03-26", "2025-03-26"], ["2025-06-18", "2025-06-18"], [LEGACY, LEGACY],
      ["2024-11-05", LEGACY], [MODERN, LEGACY]];
    for (const [asked, agreed] of negotiations) {
      const { res, sessionId, result } = await initialize(key, { version: asked });
      assert.equal(res.status, 200, asked);
      assert.match(res.headers.get("content-type"), /^application\/json/);
      assert.match(sessionId, /^[\x21-\x7e]{16,}$/, asked);
      assert.equal(result.protocolVersion, agreed, asked);
      assert.equal(result.serverInfo.name, "relay-edge");
      assert.ok(result.capabilities.tools);
      assert.equal(result.resultType, undefined, "legacy results stay as their revision defined them");
    }
    const a = await initialize(key);
    const b = await initialize(key);
    assert.notEqual(a.sessionId, b.sessionId);
  });

  test("initialized, ping and lists work in the session; results carry no 2026 fields", async () => {
    const { sessionId } = await initialize(key);
    const initialized = await legacyCall(key, sessionId, "notifications/initialized", {}, { id: null });
    assert.equal(initialized.status, 202);
    assert.equal(initialized.text, "");
    const ping = await legacyCall(key, sessionId, "ping", {}, { id: 9 });
    assert.equal(ping.status, 200);
    assert.deepEqual(ping.message, { jsonrpc: "2.0", id: 9, result: {} });
    const tools = await legacyCall(key, sessionId, "tools/list");
    assert.deepEqual(tools.message.result.tools.map((t) => t.name), TOOL_NAMES);
    assert.equal(tools.message.result.ttlMs, undefined);
    const level = await legacyCall(key, sessionId, "logging/setLevel", { level: "info" });
    assert.deepEqual(level.message.result, {});
    const unknown = await legacyCall(key, sessionId, "tools/frobnicate");
    assert.equal(unknown.status, 200, "a legacy 404 would tell the client its session is gone");
    assert.equal(errorCode(unknown.message), -32601);
    const missing = await legacyCall(key, sessionId, "resources/read", { uri: "relay://nope" });
    assert.equal(errorCode(missing.message), -32002);
  });

  test("requests need the session id (400) and a legacy MCP-Protocol-Version (400)", async () => {
    const { sessionId } = await initialize(key);
    let answer = await legacyCall(key, undefined, "tools/list", {}, { version: LEGACY });
    assert.equal(answer.status, 400);
    assert.match(answer.message.error.message, /Mcp-Session-Id/);
    for (const version of ["2099-01-01", MODERN]) {
      answer = await legacyCall(key, sessionId, "tools/list", {}, { version });
      assert.equal(answer.status, 400, version);
      assert.ok([-32022, -32602].includes(errorCode(answer.message)), version);
    }
    answer = await legacyCall(key, sessionId, "tools/list", {}, { version: null });
    assert.equal(answer.status, 200, "no version header: the session's version is assumed");
    answer = await legacyCall(key, "mcp_never_minted", "tools/list");
    assert.equal(answer.status, 404);
  });

  test("GET opens an SSE stream that starts with a keep-alive comment; without SSE in Accept it is 406", async () => {
    const { sessionId } = await initialize(key);
    const headers = { ...legacyHeaders(key, sessionId, LEGACY), accept: "text/event-stream" };
    const controller = new AbortController();
    const res = await fetch(mcpUrl(), { headers, signal: controller.signal });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type"), /^text\/event-stream/);
    assert.equal(res.headers.get("x-accel-buffering"), "no");
    assert.match(await readUntil(res, (text) => text.includes("\n\n")), /^: keepalive\n\n/);
    controller.abort();
    const json = await fetch(mcpUrl(), { headers: { ...headers, accept: "application/json" } });
    assert.equal(json.status, 406);
    await json.arrayBuffer();
  });

  test("DELETE ends the session: 204, then 404 for POST, GET and DELETE with its id", async () => {
    const { sessionId } = await initialize(key);
    const headers = legacyHeaders(key, sessionId, LEGACY);
    const del = await fetch(mcpUrl(), { method: "DELETE", headers });
    assert.equal(del.status, 204);
    const ping = await legacyCall(key, sessionId, "ping");
    assert.equal(ping.status, 404);
    assert.equal(errorCode(ping.message), -32600);
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(mcpUrl(), { method, headers });
      assert.equal(res.status, 404, method);
      await res.arrayBuffer();
    }
    const { sessionId: fresh } = await initialize(key);
    assert.equal((await legacyCall(key, fresh, "ping")).status, 200, "a new initialize starts over");
  });

  test("both eras are told apart per request on the one endpoint", async () => {
    const { sessionId } = await initialize(key);
    const legacyTools = await legacyCall(key, sessionId, "tools/list");
    const modernTools = await modernCall(key, "tools/list", {}, { headers: { "mcp-session-id": sessionId } });
    const againLegacy = await legacyCall(key, sessionId, "ping");
    assert.equal(legacyTools.message.result.resultType, undefined);
    assert.equal(modernTools.message.result.resultType, "complete");
    assert.equal(againLegacy.status, 200);
  });
});

describe("relay session routing and tenant isolation", () => {
  let other; // a second tenant
  before(async () => {
    other = await createTenant("mcp-http-other", FAST);
  });

  test("?session=NAME picks a relay session; bad names are 400", async () => {
    const named = await relaySession(key, { session: "build-7" });
    assert.equal(named.session, "build-7");
    assert.equal(named.executor.pageUrl, `${BASE}/#session=build-7`);
    assert.equal((await relaySession(key)).session, "default");
    for (const name of ["", "a/b", "../default", `${tenant.id}/default`, "x".repeat(65), "sp ace"]) {
      const res = await modern(key, "tools/list", {}, { session: name });
      assert.equal(res.status, 400, JSON.stringify(name));
      assert.equal((await res.json()).error.name, "ValidationError");
    }
  });

  test("a legacy Mcp-Session-Id minted for one tenant is 404 for another tenant's key", async () => {
    const { sessionId } = await initialize(key);
    assert.equal((await legacyCall(key, sessionId, "ping")).status, 200);
    assert.equal((await legacyCall(other.key, sessionId, "ping")).status, 404);
    const del = await fetch(mcpUrl(), { method: "DELETE", headers: legacyHeaders(other.key, sessionId) });
    assert.equal(del.status, 404);
    assert.equal((await legacyCall(key, sessionId, "ping")).status, 200, "the other tenant could not end it");
    assert.equal((await legacyCall(key, sessionId, "ping", {}, { session: "elsewhere" })).status, 404, "nor another relay session");
  });

  test("another tenant's relay://session never shows this tenant's runs, whatever it sends", async () => {
    const { key: ownerKey, tenant: owner } = await createTenant("isolation-owner", FAST);
    await modernCall(ownerKey, "tools/call", { name: "run_js", arguments: { code: "1" } });
    const mine = await relaySession(ownerKey);
    assert.equal(mine.recentRuns.length, 1);
    assert.equal(mine.recentRuns[0].errorName, "NoExecutorAttached");
    const spoof = { "x-relay-tenant": JSON.stringify(owner), "x-relay-session": "default" };
    for (const view of [await relaySession(other.key), await relaySession(other.key, { headers: spoof })]) {
      assert.deepEqual(view.recentRuns, []);
      assert.equal(view.executor.attached, false);
    }
    assert.deepEqual((await relaySession(ownerKey, { session: "other" })).recentRuns, [], "relay sessions are apart too");
  });
});

describe("bad input never panics and never 500s", () => {
  const base = () => ({ authorization: `Bearer ${key}`, "content-type": "application/json", accept: ACCEPT });

  test("transport rules: content type 415, Accept 406, body over 1 MiB 413", async () => {
    const body = modernBody("tools/list");
    const headers = modernHeaders(key, body);
    for (const contentType of ["text/plain", "application/x-www-form-urlencoded", undefined]) {
      const res = await post({ ...headers, "content-type": contentType }, body);
      assert.equal(res.status, 415, String(contentType));
      await res.arrayBuffer();
    }
    for (const accept of ["application/json", "text/event-stream", "text/html", "application/json, text/event-stream;q=0"]) {
      const res = await post({ ...headers, accept }, body);
      assert.equal(res.status, 406, accept);
      await res.arrayBuffer();
    }
    const { accept: _, ...noAccept } = headers; // fetch would add `Accept: */*`; node:http adds none
    const missing = await rawRequest("POST", "/mcp", noAccept, JSON.stringify(body));
    assert.equal(missing.status, 406, "no Accept at all");
    const big = JSON.stringify({ ...body, params: { ...body.params, pad: "x".repeat(1 << 20) } });
    let res = await post(headers, big);
    assert.equal(res.status, 413);
    assert.equal((await res.json()).error.name, "PayloadTooLarge");
    const chunked = new Blob([big]).stream();
    res = await fetch(mcpUrl(), { method: "POST", headers, body: chunked, duplex: "half" });
    assert.equal(res.status, 413, "a streamed body with no Content-Length");
    await res.arrayBuffer();
  });

  test("malformed JSON is -32700, a batch or a broken envelope -32600, all 400", async () => {
    const cases = [
      ["{", -32700], ["", -32700], ["\u00ff\u00fe", -32700], ["null", -32600], ["42", -32600], ['"x"', -32600],
      ["[]", -32600], [JSON.stringify([modernBody("tools/list"), modernBody("tools/list", {}, 2)]), -32600],
      ['{"jsonrpc":"1.0","id":1,"method":"tools/list"}', -32600], ['{"id":1,"method":"tools/list"}', -32600],
      ['{"jsonrpc":"2.0","id":1,"method":7}', -32600], ['{"jsonrpc":"2.0","id":null,"method":"tools/list"}', -32600],
      ['{"jsonrpc":"2.0","id":{},"method":"tools/list"}', -32600], ['{"jsonrpc":"2.0","id":1}', -32600],
      ['{"jsonrpc":"2.0","id":1,"result":{},"error":{}}', -32600], ['{"jsonrpc":"2.0","id":1,"method":"tools/list","params":[1]}', -32602],
    ];
    for (const [text, code] of cases) {
      const res = await post(base(), text);
      assert.equal(res.status, 400, text);
      assert.equal(errorCode(await res.json()), code, text);
    }
  });

  test("a notification from the client is accepted with 202 and no body", async () => {
    const { sessionId } = await initialize(key);
    const messages = [
      [base(), { jsonrpc: "2.0", method: "notifications/initialized" }],
      [base(), { jsonrpc: "2.0", method: "notifications/whatever", params: { a: 1 } }],
      [{ ...base(), "mcp-session-id": sessionId }, { jsonrpc: "2.0", method: "notifications/initialized" }],
    ];
    for (const [headers, body] of messages) {
      const res = await post(headers, body);
      assert.equal(res.status, 202, JSON.stringify(body));
      assert.equal(await res.text(), "");
    }
    const cancelled = await post(base(), { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: [] } });
    assert.equal(cancelled.status, 400);
    await cancelled.arrayBuffer();
  });

  test("a JSON-RPC response from the client is 400 -32600 with no id: the server sent no request", async () => {
    const { sessionId } = await initialize(key);
    const messages = [
      [{ ...base(), "mcp-protocol-version": MODERN }, { jsonrpc: "2.0", id: 5, result: {} }],
      [base(), { jsonrpc: "2.0", id: "x", error: { code: -1, message: "no" } }],
      [{ ...base(), "mcp-session-id": sessionId }, { jsonrpc: "2.0", id: 6, result: {} }],
    ];
    for (const [headers, body] of messages) {
      const res = await post(headers, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      const answer = await res.json();
      assert.equal(errorCode(answer), -32600, JSON.stringify(answer));
      assert.equal("id" in answer, false, "an error response with no id");
      assert.match(answer.error.message, /sent no request/);
    }
    const dead = await post({ ...base(), "mcp-session-id": "mcp_gone" }, { jsonrpc: "2.0", id: 1, result: {} });
    assert.equal(dead.status, 404, "a legacy response is judged by its session first");
    await dead.arrayBuffer();
  });

  test("other methods on /mcp are 405; random bodies and headers get a 4xx JSON answer", async () => {
    for (const method of ["PUT", "PATCH"]) {
      const res = await fetch(mcpUrl(), { method, headers: base(), body: "{}" });
      assert.equal(res.status, 405, method);
      await res.arrayBuffer();
    }
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const pieces = ['{"jsonrpc":"2.0"', ',"id":', "1", '"a"', ',"method":', '"tools/call"', '"initialize"', ',"params":',
      '{"name":"run_js","arguments":{"code":1}}', '{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}',
      "}", "]", "[", "\u0000", "\\u0000", '"', "null", "9".repeat(400), "{".repeat(200)];
    for (let i = 0; i < 40; i++) {
      const pick = () => pieces[Math.floor(random() * pieces.length)];
      const text = Array.from({ length: 1 + Math.floor(random() * 8) }, pick).join("");
      const headers = { ...base(), "mcp-method": "tools/call", "mcp-session-id": random() < 0.3 ? "s" : "mcp_x" };
      if (random() < 0.5) headers["mcp-protocol-version"] = MODERN;
      const res = await post(headers, text);
      assert.ok(res.status >= 200 && res.status < 500, `${res.status} for ${text}`);
      const answer = await readAnswer(res);
      if (res.status >= 400) assert.ok(answer.message.error, text);
    }
  });
});

describe("long streams and cancellation", { concurrency: true }, () => {
  test("a long tool-call stream carries keep-alive comments before its result", async () => {
    // The Session DO comments every 2 s (TICK_MS in durable/shared.rs); this run waits 2.6 s.
    const { key: slow } = await createTenant("keepalive", { queue: { attachWaitMs: 2600 } });
    const { message, comments, text, ids } = await modernCall(slow, "tools/call", { name: "run_js", arguments: { code: "1" } });
    assert.ok(comments.includes(": keepalive"), text);
    assert.ok(text.indexOf(": keepalive") < text.indexOf("event: message"));
    assert.deepEqual(ids, [], "2026-07-28 streams have no event ids (no resumability)");
    assertNoExecutor(message.result);
  });

  test("closing a 2026-07-28 response stream cancels the request (its run leaves the queue)", async () => {
    // One waiting run fills this tenant's queue; no tab ever attaches, and the tenant would wait
    // 60 s for one. workerd notices a closed stream only when a write to it fails, so the run is
    // cancelled at the stream's second keep-alive after the close, well before its attach wait.
    const { key: own } = await createTenant("cancel-by-close", { queue: { attachWaitMs: 60_000, maxQueued: 1 } });
    const call = { name: "run_js", arguments: { code: "while (true) {}" } };
    const controller = new AbortController();
    const res = await modern(own, "tools/call", call, { signal: controller.signal });
    assert.match(res.headers.get("content-type"), /^text\/event-stream/);
    const full = await modernCall(own, "tools/call", call, { id: 2 });
    assert.equal(full.status, 429, "the queue is full while the first run waits");
    assert.ok(full.res.headers.get("retry-after"));
    controller.abort();
    const freed = await waitFor(async () => (await relaySession(own)).queueDepth === 0, 20_000);
    assert.ok(freed, "the run never left the queue after its stream closed");
    const [run] = (await relaySession(own)).recentRuns;
    assert.notEqual(run.errorName, "NoExecutorAttached", "it was cancelled, not timed out waiting for a tab");
  });

  test("a 2026-07-28 notifications/cancelled is ignored: a bare id cannot say whose request it is", async () => {
    const { key: own } = await createTenant("cancel-by-id", { queue: { attachWaitMs: 1500 } });
    const call = modernCall(own, "tools/call", { name: "run_js", arguments: { code: "1" } }, { id: 1 });
    await waitFor(async () => (await relaySession(own)).queueDepth === 1, 5_000);
    const body = { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1 } };
    const cancel = await post({ authorization: `Bearer ${own}`, "content-type": "application/json", accept: ACCEPT }, body);
    assert.equal(cancel.status, 202);
    const { message } = await call;
    assert.equal(message.result.structuredContent.error.name, "NoExecutorAttached", "the run went on");
  });

  test("legacy notifications/cancelled cancels the request it names at once, which gets no answer", async () => {
    const { key: own } = await createTenant("cancel-by-notification", { queue: { attachWaitMs: 60_000, maxQueued: 1 } });
    const { sessionId } = await initialize(own);
    const started = Date.now();
    const body = { jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "run_py", arguments: { code: "1" } } };
    const call = post(legacyHeaders(own, sessionId, LEGACY), body);
    await waitFor(async () => (await relaySession(own)).queueDepth === 1, 5_000);
    const cancel = await legacyCall(own, sessionId, "notifications/cancelled", { requestId: 7, reason: "test" }, { id: null });
    assert.equal(cancel.status, 202);
    const answer = await readAnswer(await call);
    assert.ok(Date.now() - started < 10_000, "the call ended long before its attach wait");
    assert.equal(answer.message, undefined, "2025-11-25 cancellation: no response to a cancelled request");
    const [run] = (await relaySession(own)).recentRuns;
    assert.equal(run.errorName, "Cancelled");
    assert.equal((await relaySession(own)).queueDepth, 0);
  });
});

describe("a stream ends with its result", () => {
  /** Reads an SSE response chunk by chunk: when the result came, when the stream ended, and what came after the result. */
  async function timedStream(res) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    let resultAt;
    let afterResult = "";
    for (;;) {
      const { done, value } = await reader.read();
      const now = performance.now();
      if (done) return { text, gapMs: now - resultAt, afterResult };
      const chunk = decoder.decode(value, { stream: true });
      if (resultAt !== undefined) afterResult += chunk;
      text += chunk;
      if (resultAt === undefined && /"result":/.test(text)) {
        resultAt = now;
        afterResult = text.slice(text.lastIndexOf('"result":'));
      }
    }
  }

  test("a tool call's SSE response closes right after the result event, in both eras", async () => {
    // No tab: the run ends NoExecutorAttached after 500 ms, on the stream's own tick. The
    // stream ticks every 2 s (TICK_MS); it used to stay open until its next tick. One call at
    // a time, so that no other stream's tick ends the run a moment before this one wakes.
    const { key: own } = await createTenant("closes-at-result", { queue: { attachWaitMs: 500 } });
    const { sessionId } = await initialize(own);
    const legacyBody = { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "run_js", arguments: { code: "1" } } };
    const calls = {
      "2026-07-28": () => modern(own, "tools/call", { name: "run_js", arguments: { code: "1" } }),
      [LEGACY]: () => post(legacyHeaders(own, sessionId, LEGACY), legacyBody),
    };
    for (const [era, call] of Object.entries(calls)) {
      const res = await call();
      assert.match(res.headers.get("content-type"), /^text\/event-stream/, era);
      const { text, gapMs, afterResult } = await timedStream(res);
      console.log(`${era}: the stream ended ${gapMs.toFixed(1)} ms after its result event`);
      assert.match(text, /NoExecutorAttached/, era);
      assert.doesNotMatch(afterResult, /: keepalive|event: /, `${era}: nothing follows the result`);
      assert.ok(gapMs < 1500, `${era}: the stream stayed open ${gapMs.toFixed(0)} ms after its result, as if until the next 2 s tick`);
    }
  });
});

describe("a full queue under load", () => {
  test("every call past a full queue is refused at once: 429, Retry-After, QueueFull", async () => {
    // No tab and a 2-minute attach wait: 100 calls fill the queue and stay there; 700 more,
    // each with its own code (so a capsule built before asking the queue would be built 700
    // times), come at once. 800 at once is the load of issue 23.
    const { key: own } = await createTenant("queue-flood", { queue: { attachWaitMs: 120_000 } });
    const session = "flood";
    const held = new AbortController();
    const call = (i, signal) => {
      const started = performance.now();
      const res = modern(own, "tools/call", { name: "run_js", arguments: { code: `console.log(${i})` } }, { session, id: i, signal });
      return res.then((r) => ({ res: r, ms: performance.now() - started }));
    };
    const waiting = await Promise.all(Array.from({ length: 100 }, (_, i) => call(i, held.signal)));
    try {
      assert.deepEqual([...new Set(waiting.map((w) => w.res.status))], [200]);
      assert.ok(await waitFor(async () => (await relaySession(own, { session })).queueDepth === 100, 30_000));
      const flood = await Promise.all(Array.from({ length: 700 }, (_, i) => call(100 + i)));
      for (const { res } of flood) {
        const body = await res.json();
        assert.equal(res.status, 429, JSON.stringify(body));
        assert.equal(res.headers.get("retry-after"), "5");
        assert.equal(body.error.code, -32050);
        assert.equal(body.error.data.name, "QueueFull");
        assert.match(body.error.message, /^queue full: 100 run\(s\) already waiting in relay session 'flood'; retry in 5 s/);
      }
      const ms = flood.map((f) => f.ms).sort((a, b) => a - b);
      console.log(`700 refusals at once: p50 ${ms[350].toFixed(0)} ms, max ${ms.at(-1).toFixed(0)} ms`);
      assert.equal((await relaySession(own, { session })).queueDepth, 100, "no refused call took a place");
    } finally {
      held.abort();
    }
  });
});

async function waitFor(condition, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await sleep(250);
  }
  return false;
}

/** The --persist-to directory of the wrangler dev process listening on RELAY_URL's port. */
function wranglerStateDir() {
  const port = new URL(BASE).port;
  for (const pid of safe(() => readdirSync("/proc"), []).filter((p) => /^\d+$/.test(p))) {
    const args = safe(() => readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0"), []);
    const flag = (name) => {
      const i = args.findIndex((a) => a === name || a.startsWith(`${name}=`));
      return i < 0 ? undefined : args[i].includes("=") ? args[i].slice(name.length + 1) : args[i + 1];
    };
    if (!args.some((a) => a.includes("wrangler")) || flag("--port") !== port) continue;
    const dir = flag("--persist-to");
    if (dir) return path.resolve(safe(() => readlinkSync(`/proc/${pid}/cwd`), "."), dir);
  }
  return undefined;
}

function listFiles(dir) {
  return readdirSync(dir, { recursive: true })
    .map((f) => path.join(dir, f))
    .filter((f) => safe(() => statSync(f).isFile(), false));
}

function safe(fn, fallback) {
  try {
    return fn();
  } catch {
    return fallback;
  }
}
