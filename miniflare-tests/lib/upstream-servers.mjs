// Real upstream MCP servers on loopback for the /mcps-rpc suite, one per protocol era:
// "legacy", the official SDK v1 (2025-11-25: initialize, then Mcp-Session-Id), and "modern",
// the official SDK v2 (2026-07-28, stateless, `legacy: "reject"`). Each wants its own
// credential header and refuses a request without it; each records the credential it saw, so
// a test can prove it arrived. A third, "echo" (SDK v1), gives its request headers back in
// every way it can: a JSON-RPC error quoting them, a tool result (also base64-encoded), a
// tool's description and a tool named after a credential.

import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer as LegacyMcpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { McpServer, createMcpHandler } from "@modelcontextprotocol/server";
import * as z from "zod";

/** Serves `handle(webRequest) -> webResponse` on a loopback port: `{url, close()}`. */
async function serveWeb(handle) {
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = chunks.length ? Buffer.concat(chunks) : undefined;
    const request = new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers: req.headers, body: req.method === "GET" ? undefined : body });
    const response = await handle(request, req, res, body);
    if (!response) return; // answered on `res` directly
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/mcp`, close: () => new Promise((r) => server.close(r)) };
}

const unauthorized = () => new Response(JSON.stringify({ error: "unauthorized" }), { status: 401, headers: { "content-type": "application/json" } });

/** The legacy-era server: tools `add` (with an output schema), `echo` and `hidden`. */
export async function startLegacyUpstream(credential) {
  const seen = { credentials: [], sessions: new Set() };
  const transports = new Map();
  const build = () => {
    const server = new LegacyMcpServer({ name: "legacy-upstream", version: "1.0.0" });
    server.registerTool(
      "add",
      { description: "Adds two numbers.", inputSchema: { a: z.number(), b: z.number().describe("The second addend.") }, outputSchema: { sum: z.number() } },
      async ({ a, b }) => ({ content: [{ type: "text", text: String(a + b) }], structuredContent: { sum: a + b } }),
    );
    server.registerTool("echo", { description: "Echoes text.", inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: "text", text }] }));
    server.registerTool("hidden", { description: "Not for sandboxed code.", inputSchema: {} }, async () => ({ content: [{ type: "text", text: "secret stuff" }] }));
    return server;
  };
  const served = await serveWeb(async (request, req, res, body) => {
    seen.credentials.push(req.headers.authorization ?? null);
    if (req.headers.authorization !== `Bearer ${credential}`) return unauthorized();
    const id = req.headers["mcp-session-id"];
    let transport = id && transports.get(id);
    if (!transport) {
      if (id) return new Response(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }), { status: 404 });
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        onsessioninitialized: (sid) => {
          transports.set(sid, transport);
          seen.sessions.add(sid);
        },
      });
      await build().connect(transport);
    }
    await transport.handleRequest(req, res, body ? JSON.parse(body) : undefined);
    return null;
  });
  return { ...served, seen };
}

/** The modern-era server: tool `shout` (upper-cases its text) and `slow` (answers after `ms`). */
export async function startModernUpstream(credential) {
  const seen = { credentials: [] };
  const handler = createMcpHandler(
    () => {
      const server = new McpServer({ name: "modern-upstream", version: "2.0.0" });
      server.registerTool("shout", { description: "Upper-cases text.", inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({
        content: [{ type: "text", text: text.toUpperCase() }],
      }));
      server.registerTool("slow", { description: "Answers after ms milliseconds.", inputSchema: z.object({ ms: z.number() }) }, async ({ ms }) => {
        await new Promise((r) => setTimeout(r, ms));
        return { content: [{ type: "text", text: "late" }] };
      });
      return server;
    },
    { legacy: "reject", responseMode: "json" },
  );
  const served = await serveWeb(async (request, req) => {
    seen.credentials.push(req.headers["x-api-key"] ?? null);
    if (req.headers["x-api-key"] !== credential) return unauthorized();
    return handler.fetch(request);
  });
  return { ...served, seen };
}

/**
 * The echoing server: it wants `authorization: Bearer <token>` and `x-api-key: <key>`, and
 * quotes the headers of the request that opened its session everywhere: tool `headers` returns
 * them (as JSON text and base64), tool `reject` is answered with a JSON-RPC error quoting them,
 * tool `search`'s description holds them, and a tool is named `whoami_<key>`.
 */
export async function startEchoUpstream(token, key) {
  const transports = new Map();
  const build = (headers) => {
    const quoted = JSON.stringify({ authorization: headers.authorization, "x-api-key": headers["x-api-key"] });
    const server = new LegacyMcpServer({ name: "echo-upstream", version: "1.0.0" });
    server.registerTool("headers", { description: "Gives back the request's headers.", inputSchema: {} }, async () => ({
      content: [{ type: "text", text: `request headers: ${quoted}` }],
      structuredContent: { base64: Buffer.from(`Authorization: ${headers.authorization}\r\nX-Api-Key: ${headers["x-api-key"]}`).toString("base64") },
    }));
    server.registerTool("reject", { description: "Always fails.", inputSchema: {} }, async () => ({ content: [] }));
    server.registerTool("search", { description: `Searches. Called with ${quoted}`, inputSchema: { q: z.string().describe(`e.g. ${headers["x-api-key"]}`) } }, async () => ({
      content: [{ type: "text", text: "found" }],
    }));
    server.registerTool(`whoami_${headers["x-api-key"]}`, { description: "Named after a credential.", inputSchema: {} }, async () => ({ content: [] }));
    return server;
  };
  return serveWeb(async (request, req, res, body) => {
    if (req.headers.authorization !== `Bearer ${token}` || req.headers["x-api-key"] !== key) return unauthorized();
    const message = body ? JSON.parse(body) : undefined;
    const id = req.headers["mcp-session-id"];
    if (message?.method === "tools/call" && message.params?.name === "reject") {
      const error = { code: -32603, message: `refused; the request was ${JSON.stringify(req.headers)}` };
      return new Response(JSON.stringify({ jsonrpc: "2.0", id: message.id, error }), { headers: { "content-type": "application/json" } });
    }
    let transport = id && transports.get(id);
    if (!transport) {
      if (id) return new Response(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }), { status: 404 });
      transport = new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID, onsessioninitialized: (sid) => transports.set(sid, transport) });
      await build(req.headers).connect(transport);
    }
    await transport.handleRequest(req, res, message);
    return null;
  });
}
