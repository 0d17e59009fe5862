// The page as an MCP client of its own relay session (seed 000 section 1.3): 2026-07-28
// requests to POST /mcp with the tenant's key, exactly as an agent sends them. The try-it box
// runs code this way, so a person can see that everything works before connecting an agent,
// and the page reads `relay://session` for the MCP clients seen recently.

import { mcpUrl } from "./connect-snippets.js";

const VERSION = "2026-07-28";
/** The name this page gives itself as an MCP client (its `clientInfo`): the list of clients
 * seen recently leaves it out. */
export const PAGE_CLIENT_NAME = "relay-edge page";

/**
 * Calls `tool` (run_js, run_py) with `code` on relay session `session`.
 * @returns {Promise<string>} the result as text for the page (its output, exit code, error)
 */
export async function tryRun({ key, session, tool, code }) {
  const { status, answer } = await request(key, session, "tools/call", { name: tool, arguments: { code } });
  if (answer?.error) return `error ${answer.error.code}: ${answer.error.message}`;
  if (!answer?.result) return `the server answered HTTP ${status}${status === 401 ? ": the key was refused" : ""}`;
  return describe(answer.result);
}

/** `relay://session` (tabs, queue, recent runs, clients seen), or null when it cannot be read. */
export async function readRelaySession({ key, session }) {
  const { answer } = await request(key, session, "resources/read", { uri: "relay://session" });
  const text = answer?.result?.contents?.[0]?.text;
  return text ? JSON.parse(text) : null;
}

/** One request: `{status, answer}` (the JSON-RPC response, or null). */
async function request(key, session, method, params) {
  const meta = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": { name: PAGE_CLIENT_NAME, version: "1" },
  };
  const name = params.name ?? params.uri;
  const res = await fetch(mcpUrl(location.origin, session), {
    method: "POST",
    headers: {
      authorization: `Bearer ${key}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": VERSION,
      "mcp-method": method,
      ...(name && { "mcp-name": name }),
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: { ...params, _meta: meta } }),
  });
  return { status: res.status, answer: await readAnswer(res) };
}

/** The JSON-RPC response, from a JSON body or the last message of an SSE stream. */
async function readAnswer(res) {
  const text = await res.text();
  if (!(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    try {
      return JSON.parse(text);
    } catch {
      return null;
    }
  }
  const messages = text.split("\n").filter((line) => line.startsWith("data:")).map((line) => JSON.parse(line.slice(5)));
  return messages.findLast((message) => "result" in message || "error" in message) ?? null;
}

function describe(result) {
  const { exitCode, stdout = "", stderr = "", usage } = result.structuredContent ?? {};
  if (exitCode === undefined) return result.content?.map((c) => c.text ?? "").join("\n") ?? "";
  const parts = [`exit ${exitCode} in ${usage?.wallMs ?? "?"} ms${result.isError ? " (error)" : ""}`];
  if (stdout) parts.push(`--- stdout ---\n${stdout}`);
  if (stderr) parts.push(`--- stderr ---\n${stderr}`);
  if (result.isError && !stderr) parts.push(result.content?.[0]?.text ?? "");
  return parts.join("\n");
}
