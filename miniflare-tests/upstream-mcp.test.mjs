// End to end, the tenant's upstream MCP servers: two real servers on loopback, one per protocol
// era (lib/upstream-servers.mjs), configured through the admin route with a credential header
// each; JS and Python code on a real executor page in headless Chromium calls their tools with
// `mcps.call` and raw fetch("/mcps-rpc"); refusals are named; the credentials reach the
// upstreams and nothing else, not even through a third upstream that echoes them back in its
// errors, results and tool list; the /mcps tree and .d.ts match what the upstreams list; every
// call and refusal is on the audit chain, which verifies.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { launchBrowser, openExecutor } from "./lib/browser.mjs";
import { connectClient } from "./lib/mcp-client.mjs";
import { BASE, ROOT, createTenant, devVars, relayCapsule } from "./lib/relay.mjs";
import { startEchoUpstream, startLegacyUpstream, startModernUpstream } from "./lib/upstream-servers.mjs";

const LEGACY_SECRET = "up_legacy_credential_7c1e9a40b2d8f3";
const MODERN_SECRET = "up_modern_credential_52ab07e9d14c6f";
const ECHO_TOKEN = "up_echo_token_9d2c41f07ab3e6+/q=";
const ECHO_KEY = "up_echo_key_3d9f0a7b61c2e5";
const SECRETS = [LEGACY_SECRET, MODERN_SECRET, ECHO_TOKEN, ECHO_KEY];
const admin = { authorization: `Bearer ${devVars.ADMIN_TOKEN}`, "content-type": "application/json" };

let legacy;
let modern;
let echo;
let tenant;
let key;
let browser;
let client;
const texts = []; // every answer the relay gave in these tests, to search for the credentials
let rawAnswer; // the body a guest's fetch("/mcps-rpc") got, as it got it

const putUpstream = (name, spec, tenantId = tenant.id) =>
  fetch(`${BASE}/admin/tenants/${tenantId}/upstreams/${name}`, { method: "PUT", headers: admin, body: JSON.stringify(spec) });

async function call(name, args) {
  const result = await client.callTool({ name, arguments: args });
  texts.push(JSON.stringify(result));
  return result;
}

/** Runs JS and returns its stdout, failing with the whole result when the run failed. */
async function runJs(code, policy) {
  const result = await call("run_js", policy ? { code, policy } : { code });
  assert.equal(result.isError, false, JSON.stringify(result));
  return result.structuredContent.stdout;
}

async function readFile(path) {
  const result = await call("read", { path });
  return result.isError ? null : result.structuredContent.content;
}

async function waitForFile(path, timeoutMs = 20_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const content = await readFile(path);
    if (content !== null) return content;
    if (Date.now() > end) throw new Error(`${path} never appeared in the workspace`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

before(async () => {
  [legacy, modern, echo] = await Promise.all([
    startLegacyUpstream(LEGACY_SECRET),
    startModernUpstream(MODERN_SECRET),
    startEchoUpstream(ECHO_TOKEN, ECHO_KEY),
  ]);
  ({ key, tenant } = await createTenant("upstreams", { queue: { attachWaitMs: 5000 } }));
  const put = [
    await putUpstream("legacy", { url: legacy.url, headers: { authorization: `Bearer ${LEGACY_SECRET}` }, tools: ["add", "echo"] }),
    await putUpstream("modern", { url: modern.url, headers: { "x-api-key": MODERN_SECRET } }),
    await putUpstream("echo", { url: echo.url, headers: { authorization: `Bearer ${ECHO_TOKEN}`, "x-api-key": ECHO_KEY } }),
  ];
  for (const res of put) assert.equal(res.status, 200, await res.text());
  browser = await launchBrowser();
  await openExecutor(browser, key);
  client = await connectClient(key);
});

after(async () => {
  await client?.close();
  await browser?.close();
  await legacy?.close();
  await modern?.close();
  await echo?.close();
});

/** Whether `text` gives `secret` away: as it is, or base64-encoded (either alphabet, any
 * alignment) inside a run of base64 characters. */
function givesAway(text, secret) {
  if (text.includes(secret)) return true;
  for (const run of text.split(/[^A-Za-z0-9+/_-]+/)) {
    for (let offset = 0; offset < 4; offset++) {
      const chars = run.slice(offset);
      const decoded = Buffer.from(chars.slice(0, chars.length - (chars.length % 4)).replace(/-/g, "+").replace(/_/g, "/"), "base64");
      if (decoded.includes(secret)) return true;
    }
  }
  return false;
}

describe("the admin routes", () => {
  test("list the servers with header names only, never a value", async () => {
    const res = await fetch(`${BASE}/admin/tenants/${tenant.id}/upstreams`, { headers: admin });
    const text = await res.text();
    texts.push(text);
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(text).upstreams, [
      { name: "legacy", url: legacy.url, headers: ["authorization"], tools: ["add", "echo"] },
      { name: "modern", url: modern.url, headers: ["x-api-key"], tools: null },
      { name: "echo", url: echo.url, headers: ["authorization", "x-api-key"], tools: null },
    ]);
  });

  test("refuse a missing admin token, a bad name, a URL with credentials and a reserved header", async () => {
    const noToken = await fetch(`${BASE}/admin/tenants/${tenant.id}/upstreams`);
    assert.equal(noToken.status, 401);
    const cases = [
      ["bad name!", { url: modern.url }, /upstream server name/],
      ["x", { url: "http://user:pw@127.0.0.1/mcp" }, /no user info/],
      ["x", { url: "ftp://127.0.0.1/mcp" }, /http:\/\/ or https:\/\//],
      ["x", { url: modern.url, headers: { "mcp-session-id": "1" } }, /not a header name/],
      ["x", { url: modern.url, extra: 1 }, /unknown field/],
    ];
    for (const [name, spec, message] of cases) {
      const res = await putUpstream(encodeURIComponent(name), spec);
      const body = await res.json();
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(body.error.name, "ValidationError");
      assert.match(body.error.message, message);
    }
  });

  test("delete a server, and say so when there is none", async () => {
    assert.equal((await putUpstream("spare", { url: modern.url })).status, 200);
    const removed = await fetch(`${BASE}/admin/tenants/${tenant.id}/upstreams/spare`, { method: "DELETE", headers: admin });
    assert.equal(removed.status, 200);
    const again = await fetch(`${BASE}/admin/tenants/${tenant.id}/upstreams/spare`, { method: "DELETE", headers: admin });
    assert.equal(again.status, 404);
  });
});

describe("calls from code in a run", () => {
  test("JavaScript calls a legacy-era and a modern-era server with mcps.call", async () => {
    const out = await runJs(`
      const sum = await mcps.call("legacy", "add", { a: 2, b: 40 });
      const loud = await mcps.call("modern", "shout", { text: "hello" });
      console.log(JSON.stringify([sum.structuredContent, loud.content[0].text]));
    `);
    assert.equal(out.trim(), JSON.stringify([{ sum: 42 }, "HELLO"]));
  });

  test("Python calls both with the builtin mcps", async () => {
    const result = await call("run_py", {
      code: [
        'added = await mcps.call("legacy", "add", {"a": 1.5, "b": 2})',
        'echoed = await mcps.call("modern", "shout", {"text": "py"})',
        'print(added["structuredContent"]["sum"], echoed["content"][0]["text"])',
      ].join("\n"),
    });
    assert.equal(result.isError, false, JSON.stringify(result));
    assert.equal(result.structuredContent.stdout.trim(), "3.5 PY");
  });

  test("the raw route works with fetch('/mcps-rpc')", async () => {
    const out = await runJs(`
      const res = await fetch("/mcps-rpc", { method: "POST", body: JSON.stringify({ mcp: "legacy", tool: "echo", params: { text: "raw" } }) });
      console.log(res.status, await res.text());
    `);
    const [status, ...body] = out.trim().split(" ");
    assert.equal(status, "200");
    rawAnswer = body.join(" ");
    assert.equal(JSON.parse(rawAnswer).content[0].text, "raw");
  });

  test("an unknown server, a tool the tenant does not allow and one the call's policy leaves out are refused by name", async () => {
    const out = await runJs(`
      for (const [server, tool] of [["nope", "x"], ["legacy", "hidden"], ["legacy", "echo"]]) {
        try {
          await mcps.call(server, tool, { text: "t" });
          console.log("called", server, tool);
        } catch (e) {
          console.log(e.name + ": " + e.message);
        }
      }
    `, { mcps: ["modern", "legacy/add"] });
    const [unknown, hidden, narrowed] = out.trim().split("\n");
    assert.match(unknown, /^ValidationError: unknown upstream MCP server "nope": this tenant has legacy, modern/);
    assert.match(hidden, /^PolicyDenied: tool "hidden" of upstream server "legacy" is not one this tenant lets code call/);
    assert.match(narrowed, /^PolicyDenied: the run's policy.mcps \(modern, legacy\/add\) does not allow tool "echo"/);
  });

  test("Python sees a refusal as mcps.Error naming it", async () => {
    const result = await call("run_py", {
      code: 'try:\n    await mcps.call("legacy", "hidden")\nexcept mcps.Error as e:\n    print(e.name, "|", e)\n',
    });
    assert.equal(result.isError, false, JSON.stringify(result));
    assert.match(result.structuredContent.stdout, /^PolicyDenied \| PolicyDenied: tool "hidden"/);
  });

  test("an upstream that fails is UpstreamFailed with its message; the run goes on", async () => {
    assert.equal((await putUpstream("broken", { url: modern.url, headers: { "x-api-key": "wrong" } })).status, 200);
    const out = await runJs(`
      try { await mcps.call("broken", "shout", { text: "x" }); } catch (e) { console.log(e.name + ": " + e.message); }
      console.log("still running");
    `);
    assert.match(out, /^UpstreamFailed: upstream MCP server "broken", tool "shout": .*401/);
    assert.match(out, /still running/);
  });

  test("a token of a run that has ended is refused", async () => {
    const res = await fetch(`${BASE}/mcps-rpc`, { method: "POST", body: "{}" });
    assert.equal(res.status, 401);
  });
});

describe("an upstream that echoes the credentials it was sent", () => {
  test("gets them back redacted in its JSON-RPC error and its result, in every form", async () => {
    const out = await runJs(`
      try { await mcps.call("echo", "reject", {}); } catch (e) { console.log(e.name + ": " + e.message); }
      console.log(JSON.stringify(await mcps.call("echo", "headers", {})));
    `);
    const [refusal, result] = out.trim().split("\n");
    assert.match(refusal, /^UpstreamFailed: upstream MCP server "echo", tool "reject": it answered error -32603: refused; the request was \{/);
    assert.match(refusal, /"authorization":"\*\*\*"/, "the header is quoted, its value is not");
    const headers = JSON.parse(result);
    assert.equal(headers.content[0].text, 'request headers: {"authorization":"***","x-api-key":"***"}');
    assert.match(headers.structuredContent.base64, /\*\*\*/, "the base64 of the headers lost the credentials' characters");
    for (const secret of [ECHO_TOKEN, ECHO_KEY]) assert.ok(!givesAway(out, secret), `${secret} reached guest code: ${out}`);
  });

  test("its tool list reaches /mcps without them: names, descriptions, schemas, types", async () => {
    const index = JSON.parse(await waitForFile("/mcps/index.json"));
    assert.deepEqual(index.servers.echo.tools, ["headers", "reject", "search"]);
    assert.deepEqual(index.servers.echo.skipped, ['"whoami_***": not an MCP tool name']);
    const files = [JSON.stringify(index), await waitForFile("/mcps/echo/tools/search/schema.json"), await waitForFile("/mcps/echo.d.ts")];
    texts.push(...files);
    assert.match(files[1], /Called with \{\\"authorization\\":\\"\*\*\*\\",\\"x-api-key\\":\\"\*\*\*\\"\}/);
    for (const secret of [ECHO_TOKEN, ECHO_KEY]) assert.ok(!files.some((f) => givesAway(f, secret)), `${secret} is in the /mcps tree`);
  });
});

describe("the credentials", () => {
  test("reach each upstream, and only its own", () => {
    assert.ok(legacy.seen.credentials.includes(`Bearer ${LEGACY_SECRET}`));
    assert.ok(modern.seen.credentials.includes(MODERN_SECRET));
    assert.ok(!legacy.seen.credentials.some((c) => c?.includes(MODERN_SECRET)));
    assert.ok(!modern.seen.credentials.some((c) => c?.includes(LEGACY_SECRET)));
    assert.ok(!legacy.seen.credentials.some((c) => c?.includes(ECHO_TOKEN)), "the echo credential went to its server only");
  });

  test("appear in no line of the server's log", () => {
    const log = readFileSync(process.env.RELAY_SERVER_LOG, "utf8");
    assert.ok(log.includes('"route":"POST /mcps-rpc"'), "the calls were logged");
    for (const secret of SECRETS) assert.ok(!log.includes(secret), secret);
  });

  test("appear in no answer, resource or audit record", async () => {
    for (const uri of ["relay://session", "relay://audit"]) {
      const read = await client.readResource({ uri });
      texts.push(JSON.stringify(read));
    }
    const all = texts.join("\n");
    assert.ok(all.length > 1000);
    for (const secret of SECRETS) assert.ok(!givesAway(all, secret), `${secret} leaked`);
  });
});

describe("the /mcps tree", () => {
  let listed;

  before(async () => {
    // The tool list straight from each upstream, with the official client.
    listed = {};
    for (const [name, server, headers] of [
      ["legacy", legacy, { authorization: `Bearer ${LEGACY_SECRET}` }],
      ["modern", modern, { "x-api-key": MODERN_SECRET }],
    ]) {
      if (name === "modern") {
        listed.modern = await modernToolsList(server.url, headers);
        continue;
      }
      const direct = new Client({ name: "direct", version: "1" });
      await direct.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers } }));
      listed[name] = (await direct.listTools()).tools;
      await direct.close();
    }
  });

  test("index.json lists each server's tools the tenant allows", async () => {
    const index = JSON.parse(await waitForFile("/mcps/index.json"));
    assert.deepEqual(index.servers.legacy.tools, ["add", "echo"]);
    assert.deepEqual(index.servers.modern.tools, ["shout", "slow"]);
    assert.match(index.usage, /mcps\.call\(server, tool, params\)/);
  });

  test("each tool's schema.json is the upstream's own description of it", async () => {
    for (const [server, names] of [["legacy", ["add", "echo"]], ["modern", ["shout", "slow"]]]) {
      for (const name of names) {
        const schema = JSON.parse(await waitForFile(`/mcps/${server}/tools/${name}/schema.json`));
        const upstream = listed[server].find((t) => t.name === name);
        assert.deepEqual(schema.inputSchema, upstream.inputSchema, `${server}/${name}`);
        assert.equal(schema.description, upstream.description);
        assert.deepEqual(schema.outputSchema, upstream.outputSchema);
      }
    }
    assert.equal(await readFile("/mcps/legacy/tools/hidden/schema.json"), null, "a tool the tenant does not allow is not listed");
  });

  test("the .d.ts files type-check, and a wrong call of a tool does not", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "relay-dts-"));
    for (const server of ["legacy", "modern"]) writeFileSync(path.join(dir, `${server}.d.ts`), await waitForFile(`/mcps/${server}.d.ts`));
    const good = `export {};\nconst r = await mcps.call("legacy", "add", { a: 1, b: 2 });\nconst s: number | undefined = r.structuredContent?.sum;\nawait mcps.call("modern", "shout", { text: "x" });\n`;
    const bad = `export {};\nawait mcps.call("legacy", "add", { a: "one", b: 2 });\n`;
    assert.equal(typecheck(dir, good), "", "the definitions type-check a right call");
    assert.match(typecheck(dir, bad), /main\.ts\(2,\d+\): error TS(2322|2345|2769)/, "a wrong argument type is caught");
  });

  test("guest code reads the tree, and cannot write under /mcps", async () => {
    const out = await runJs(`
      import fs from "fs";
      console.log(fs.readdirSync("/mcps").join(","));
      try { fs.writeFileSync("/mcps/legacy.d.ts", "x"); } catch (e) { console.log(e.name); }
    `);
    assert.deepEqual(out.trim().split("\n"), ["echo,echo.d.ts,index.json,legacy,legacy.d.ts,modern,modern.d.ts", "PolicyDenied"]);
  });
});

describe("the audit", () => {
  let records;

  before(async () => {
    const read = await client.readResource({ uri: "relay://audit" });
    records = JSON.parse(read.contents[0].text).records;
  });

  test("has one upstream_call record per call, with the result's size and hash, never the result", () => {
    const calls = records.filter((r) => r.kind === "upstream_call");
    const targets = calls.map((r) => r.tool);
    for (const target of ["legacy/add", "modern/shout", "legacy/echo", "broken/shout"]) assert.ok(targets.includes(target), target);
    const echo = calls.find((r) => r.tool === "legacy/echo" && r.args.text === "raw");
    assert.equal(echo.stdoutBytes, Buffer.byteLength(rawAnswer));
    assert.equal(echo.stdoutSha256, createHash("sha256").update(rawAnswer).digest("hex"));
    assert.equal(echo.errorName, null);
    assert.ok(!JSON.stringify(calls).includes('"content"'), "no record holds a result");
    assert.equal(calls.find((r) => r.tool === "broken/shout").errorName, "UpstreamFailed");
  });

  test("has a policy_denial record per refusal, naming the target and why", () => {
    const denials = records.filter((r) => r.kind === "policy_denial");
    const byTarget = Object.fromEntries(denials.map((r) => [r.args.target, r]));
    assert.equal(byTarget["nope/x"].errorName, "ValidationError");
    assert.equal(byTarget["legacy/hidden"].errorName, "PolicyDenied");
    assert.match(byTarget["legacy/echo"].args.reason, /policy.mcps/);
    for (const target of ["nope/x", "legacy/hidden", "legacy/echo"]) assert.equal(byTarget[target].tool, "mcps-rpc");
    assert.equal(byTarget["/mcps/legacy.d.ts"].tool, "write", "guest code's write under /mcps was refused and recorded too");
  });

  test("the tenant's metrics count the calls by server and outcome, and the refusals", async () => {
    const res = await fetch(`${BASE}/admin/metrics?tenant=${tenant.id}`, { headers: admin });
    const text = await res.text();
    const count = (sample) => Number(text.match(new RegExp(`^${sample.replace(/[{}|]/g, "\\$&")} (\\d+)$`, "m"))?.[1] ?? 0);
    const t = `tenant="${tenant.id}"`;
    assert.ok(count(`relay_upstream_calls_total{${t},server="legacy",outcome="ok"}`) >= 3, text);
    assert.ok(count(`relay_upstream_calls_total{${t},server="modern",outcome="ok"}`) >= 2, text);
    assert.equal(count(`relay_upstream_calls_total{${t},server="broken",outcome="UpstreamFailed"}`), 1);
    assert.equal(count(`relay_policy_denials_total{${t},kind="mcps-rpc"}`), 4);
  });

  test("the chain with these records verifies, and an edited upstream record is named", () => {
    const lines = (list) => list.map((r) => JSON.stringify(r)).join("\n");
    assert.match(relayCapsule(["audit-verify"], lines(records)), new RegExp(`^ok: ${records.length} records`));
    const index = records.findIndex((r) => r.kind === "upstream_call");
    const edited = records.map((r, i) => (i === index ? { ...r, stdoutBytes: r.stdoutBytes + 1 } : r));
    assert.throws(() => relayCapsule(["audit-verify"], lines(edited)), (e) => String(e.stderr).includes(`seq ${records[index].seq}`));
  });
});

/** tools/list of a 2026-07-28 server over raw HTTP (the v1 client speaks only the 2025 era). */
async function modernToolsList(url, headers) {
  const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} };
  const res = await fetch(url, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: { _meta: meta } }),
  });
  return (await res.json()).result.tools;
}

/** tsc's complaints about `source` next to the .d.ts files in `dir` ("" when none). */
function typecheck(dir, source) {
  writeFileSync(path.join(dir, "main.ts"), source);
  const tsc = path.join(ROOT, "node_modules/typescript/bin/tsc");
  const args = [tsc, "--noEmit", "--strict", "--target", "es2022", "--module", "es2022", ...["legacy.d.ts", "modern.d.ts", "main.ts"].map((f) => path.join(dir, f))];
  try {
    execFileSync(process.execPath, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    return "";
  } catch (e) {
    return String(e.stdout) + String(e.stderr);
  }
}
