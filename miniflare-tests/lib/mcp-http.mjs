// Raw Streamable HTTP helpers for the /mcp tests: requests of the stateless 2026-07-28 era
// (with the `_meta` fields and mirrored headers it requires) and of the legacy session era,
// and a reader that turns either kind of answer (JSON or SSE) into JSON-RPC messages.

import http from "node:http";
import { BASE } from "./relay.mjs";

export const MODERN = "2026-07-28";
export const LEGACY = "2025-11-25";
export const ACCEPT = "application/json, text/event-stream";
export const TOOL_NAMES = ["run_js", "run_py", "read", "write", "search"];

/** The /mcp URL of a relay session (the tenant's `default` when `session` is not given). */
export const mcpUrl = (session) =>
  session === undefined ? `${BASE}/mcp` : `${BASE}/mcp?session=${encodeURIComponent(session)}`;

/** The `_meta` every 2026-07-28 request carries. */
export const modernMeta = (extra = {}) => ({
  "io.modelcontextprotocol/protocolVersion": MODERN,
  "io.modelcontextprotocol/clientCapabilities": {},
  "io.modelcontextprotocol/clientInfo": { name: "relay-edge-tests", version: "1" },
  ...extra,
});

/** The JSON-RPC body of a 2026-07-28 request; `params._meta` is merged over the required one. */
export function modernBody(method, params = {}, id = 1) {
  return { jsonrpc: "2.0", id, method, params: { ...params, _meta: modernMeta(params._meta) } };
}

/** The headers a 2026-07-28 request mirrors from its body, plus auth and content negotiation. */
export function modernHeaders(key, body) {
  const headers = {
    authorization: `Bearer ${key}`,
    "content-type": "application/json",
    accept: ACCEPT,
    "mcp-protocol-version": body.params?._meta?.["io.modelcontextprotocol/protocolVersion"] ?? MODERN,
    "mcp-method": body.method,
  };
  const name = body.method.startsWith("tasks/") ? body.params?.taskId : body.params?.name ?? (body.method === "resources/read" ? body.params?.uri : undefined);
  if (["tools/call", "prompts/get", "resources/read", "tasks/get", "tasks/update", "tasks/cancel"].includes(body.method) && name !== undefined) {
    headers["mcp-name"] = name;
  }
  return headers;
}

/** POSTs `body` (an object, or a string sent as is) to /mcp. */
export function post(headers, body, { session, signal } = {}) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return fetch(mcpUrl(session), { method: "POST", headers, body: text, signal });
}

/** A 2026-07-28 request; `headers` override the mirrored ones (`undefined` removes one). */
export async function modern(key, method, params = {}, { headers = {}, session, id = 1, signal } = {}) {
  const body = modernBody(method, params, id);
  const merged = Object.fromEntries(
    Object.entries({ ...modernHeaders(key, body), ...headers }).filter(([, v]) => v !== undefined),
  );
  return post(merged, body, { session, signal });
}

/** A 2026-07-28 request's answer: `{status, res, message}`, the message being the response. */
export async function modernCall(key, method, params, options) {
  const res = await modern(key, method, params, options);
  return { status: res.status, res, ...(await readAnswer(res)) };
}

/** Legacy `initialize`; returns `{res, sessionId, result}`. */
export async function initialize(key, { version = LEGACY, session, headers = {} } = {}) {
  const body = {
    jsonrpc: "2.0",
    id: 0,
    method: "initialize",
    params: { protocolVersion: version, capabilities: {}, clientInfo: { name: "relay-edge-tests", version: "1" } },
  };
  const res = await post({ ...legacyHeaders(key), ...headers }, body, { session });
  const { message } = await readAnswer(res);
  return { res, sessionId: res.headers.get("mcp-session-id"), result: message?.result, message };
}

/** Headers of a legacy request; `sessionId` and `version` are sent when given. */
export function legacyHeaders(key, sessionId, version) {
  const headers = { authorization: `Bearer ${key}`, "content-type": "application/json", accept: ACCEPT };
  if (sessionId) headers["mcp-session-id"] = sessionId;
  if (version) headers["mcp-protocol-version"] = version;
  return headers;
}

/** A legacy request (or notification, when `id` is null) in session `sessionId`. */
export async function legacyCall(key, sessionId, method, params = {}, { id = 1, version = LEGACY, session } = {}) {
  const body = id === null ? { jsonrpc: "2.0", method, params } : { jsonrpc: "2.0", id, method, params };
  const res = await post(legacyHeaders(key, sessionId, version), body, { session });
  return { status: res.status, res, ...(await readAnswer(res)) };
}

/**
 * Reads an answer whole. JSON: `{message}`. SSE: `{message, events, comments, ids}` where
 * `events` are every JSON-RPC message in order and `message` the one carrying a result or error.
 * An empty body gives `{message: undefined, text: ""}`.
 */
export async function readAnswer(res) {
  const type = res.headers.get("content-type") ?? "";
  const text = await res.text();
  if (type.startsWith("text/event-stream")) {
    const { events, comments, ids } = parseSse(text);
    return { text, events, comments, ids, message: events.find((e) => "result" in e || "error" in e) };
  }
  return { text, message: text ? JSON.parse(text) : undefined };
}

/**
 * SSE text -> the JSON `data` of each event, the comment lines (`: keepalive`), and the event
 * ids (a legacy call's stream opens with a priming event: an id and empty data).
 */
export function parseSse(text) {
  const events = [];
  const comments = [];
  const ids = [];
  for (const block of text.split(/\n\n/)) {
    const lines = block.split("\n").filter(Boolean);
    comments.push(...lines.filter((l) => l.startsWith(":")));
    ids.push(...lines.filter((l) => l.startsWith("id:")).map((l) => l.slice(3).trim()));
    const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
    if (data) events.push(JSON.parse(data));
  }
  return { events, comments, ids };
}

/** Yields `{event, data}` for each SSE event of a stream (comments skipped). */
export async function* sseEvents(body) {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    for (let end; (end = buffer.indexOf("\n\n")) >= 0; ) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (event) yield { event, data: JSON.parse(data) };
    }
  }
}

/** Reads a streaming body until `predicate(textSoFar)` holds; returns the text read. */
export async function readUntil(res, predicate, timeoutMs = 10_000) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const deadline = Date.now() + timeoutMs;
  while (!predicate(text)) {
    const left = deadline - Date.now();
    const next = await Promise.race([reader.read(), new Promise((r) => setTimeout(() => r({ timeout: true }), left))]);
    if (next.timeout) throw new Error(`stream stayed silent; got so far: ${JSON.stringify(text)}`);
    if (next.done) break;
    text += decoder.decode(next.value, { stream: true });
  }
  reader.releaseLock();
  return text;
}

/**
 * A request through node:http, which (unlike fetch) lets a test forge the Host header, as
 * DNS rebinding does. Resolves to `{status, headers, body}`.
 */
export function rawRequest(method, path, headers, body = "") {
  const url = new URL(path, BASE);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method, path: url.pathname + url.search, headers });
    req.on("response", (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

/** The `relay://session` contents a tenant sees (2026-07-28 request). */
export async function relaySession(key, { session, headers } = {}) {
  const { message } = await modernCall(key, "resources/read", { uri: "relay://session" }, { session, headers });
  return JSON.parse(message.result.contents[0].text);
}
