// The official TypeScript MCP SDK (Client + StreamableHTTPClientTransport, which speaks the
// legacy 2025-11-25 era) against the Worker: connect with a bearer key, list and validate the
// tools, read relay://session, get the prompt, call run_js with no tab attached (a tool error,
// never a fake success), cancel a call, and terminate the session.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { readRelaySession } from "./lib/mcp-client.mjs";
import { LEGACY, TOOL_NAMES, legacyCall, mcpUrl, relaySession } from "./lib/mcp-http.mjs";
import { BASE, createTenant } from "./lib/relay.mjs";

/** A connected SDK client of the tenant holding `key`. */
async function connect(key, { session } = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl(session)), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
  const client = new Client({ name: "relay-edge-sdk-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

let key;
let client;
let transport;
before(async () => {
  ({ key } = await createTenant("mcp-sdk", { queue: { attachWaitMs: 300 } }));
  ({ client, transport } = await connect(key));
});
after(() => client?.close());

test("connects: initialize negotiates 2025-11-25 and a session id", () => {
  assert.match(transport.sessionId, /^[\x21-\x7e]+$/);
  assert.equal(transport.protocolVersion, LEGACY);
  assert.equal(client.getServerVersion().name, "relay-edge");
  const capabilities = client.getServerCapabilities();
  assert.ok(capabilities.tools && capabilities.resources && capabilities.prompts);
  assert.match(client.getInstructions(), /run_js/);
});

test("ping answers", async () => {
  assert.deepEqual(await client.ping(), {});
});

test("lists the five tools, with output schemas and annotations", async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name), TOOL_NAMES);
  for (const tool of tools) {
    assert.equal(tool.inputSchema.type, "object", tool.name);
    assert.ok(tool.outputSchema, tool.name);
    assert.ok(tool.annotations?.title, tool.name);
  }
  assert.equal(tools.find((t) => t.name === "read").annotations.readOnlyHint, true);
  assert.equal(tools.find((t) => t.name === "run_py").annotations.openWorldHint, true);
});

test("reads relay://session", async () => {
  const { resources } = await client.listResources();
  assert.deepEqual(resources.map((r) => r.uri), ["relay://session", "relay://audit", "relay://workspace", "relay://contexts", "relay://usage"]);
  const status = await readRelaySession(client);
  assert.equal(status.session, "default");
  assert.equal(status.executor.attached, false);
  assert.equal(status.executor.pageUrl, `${BASE}/`);
});

test("gets the use-relay prompt", async () => {
  const { prompts } = await client.listPrompts();
  assert.deepEqual(prompts.map((p) => p.name), ["use-relay"]);
  const prompt = await client.getPrompt({ name: "use-relay", arguments: { task: "plot a chart" } });
  assert.equal(prompt.messages[0].role, "user");
  const text = prompt.messages[0].content.text;
  assert.match(text, /NoExecutorAttached/);
  assert.match(text, /plot a chart/);
});

test("run_js with no tab attached: isError NoExecutorAttached, after the tenant's attach wait", async () => {
  const started = Date.now();
  const result = await client.callTool({ name: "run_js", arguments: { code: "console.log(6 * 7)" } });
  const waited = Date.now() - started;
  assert.ok(waited >= 300 && waited < 4000, `waited ${waited} ms`);
  assert.equal(result.isError, true, "never a fake success");
  assert.equal(result.structuredContent.error.name, "NoExecutorAttached");
  assert.match(result.content[0].text, /^NoExecutorAttached: no browser tab is attached/);
  assert.ok(result.content[0].text.includes(`open ${BASE}/`), result.content[0].text);
  assert.equal((await readRelaySession(client)).recentRuns[0].errorName, "NoExecutorAttached");
});

test("bad arguments come back as a ValidationError tool result naming the field", async () => {
  const result = await client.callTool({ name: "run_py", arguments: { code: "print(1)", args: "x" } });
  assert.equal(result.isError, true);
  assert.equal(result.structuredContent.error.name, "ValidationError");
  assert.match(result.structuredContent.error.message, /args/);
});

test("aborting a call cancels its run (notifications/cancelled)", async () => {
  const { key: own } = await createTenant("mcp-sdk-cancel", { queue: { attachWaitMs: 60_000, maxQueued: 1 } });
  const { client: other } = await connect(own);
  try {
    const controller = new AbortController();
    const call = other.callTool({ name: "run_js", arguments: { code: "1" } }, undefined, { signal: controller.signal });
    await waitFor(async () => (await relaySession(own)).queueDepth === 1);
    controller.abort("enough");
    await assert.rejects(call);
    assert.ok(await waitFor(async () => (await relaySession(own)).queueDepth === 0), "the run left the queue");
    assert.equal((await relaySession(own)).recentRuns[0].errorName, "Cancelled");
  } finally {
    await other.close();
  }
});

test("a wrong key cannot connect", async () => {
  await assert.rejects(connect(`rk_${"B".repeat(43)}`), /401|Unauthorized/);
});

test("terminating the session ends it: its id then gets 404", async () => {
  const { client: own, transport: ownTransport } = await connect(key);
  const sessionId = ownTransport.sessionId;
  await ownTransport.terminateSession();
  assert.equal(ownTransport.sessionId, undefined);
  assert.equal((await legacyCall(key, sessionId, "ping")).status, 404);
  await own.close();
});

async function waitFor(condition, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}
