// Guest code's fetch, as the page performs it: the URL is checked against the run's signed
// policy (the Rust rule compiled to wasm, lib/policy.js), then the request goes to the Worker's
// egress route with the run's own token. The Worker checks the policy again, follows each
// redirect only after checking it, and caps the body; the page's origin and cookies never reach
// the target, and guest code never holds the token.

import { toBase64 } from "./bytes.js";

/**
 * @param request {url, method, headers: [[name, value]], body?: Uint8Array}
 * @returns {Promise<{status, statusText, url, headers, body: ArrayBuffer} | {error: {name, message}}>}
 */
export async function guardedFetch({ policy, network, runToken, request }) {
  const verdict = policy.checkUrl(network, request.url);
  if (!verdict.allow) return { error: { name: "PolicyDenied", message: `fetch ${request.url} refused: ${verdict.reason}` } };
  const envelope = { url: request.url, method: request.method, headers: request.headers };
  if (request.body?.length) envelope.body = toBase64(request.body);
  let res;
  try {
    res = await fetch("/egress", {
      method: "POST",
      headers: { authorization: `Bearer ${runToken}`, "content-type": "application/json" },
      body: JSON.stringify(envelope),
    });
  } catch (err) {
    return { error: { name: "Internal", message: `fetch ${request.url}: the relay could not be reached (${err.message})` } };
  }
  if (!res.ok) return { error: await routeError(res, request.url) };
  const meta = (name) => res.headers.get(`x-relay-${name}`);
  return {
    status: Number(meta("status")),
    statusText: meta("status-text") ?? "",
    url: meta("url") ?? request.url,
    headers: JSON.parse(meta("headers") ?? "[]"),
    body: await res.arrayBuffer(),
  };
}

/** The route's `{error: {name, message}}`, or one that says what the route answered. */
async function routeError(res, url) {
  const body = await res.json().catch(() => null);
  const { name, message } = body?.error ?? {};
  if (typeof name === "string" && typeof message === "string") return { name, message };
  return { name: "Internal", message: `fetch ${url}: the relay's egress route answered ${res.status}` };
}

/** The path guest code fetches to call a tool of the tenant's upstream MCP servers. */
export const MCPS_RPC = "/mcps-rpc";

/**
 * Guest code's `fetch("/mcps-rpc", {method: "POST", body: {mcp, tool, params}})` (what
 * `mcps.call` does): sent to the relay's route with the run's token. The route checks the call
 * against the tenant's servers and the run's policy; its answer, whatever the status, is the
 * guest's response (errors are `{error: {name, message}}`).
 */
export async function mcpsRpc({ runToken, request }) {
  if (request.method !== "POST") {
    return { error: { name: "ValidationError", message: `${MCPS_RPC} takes POST {"mcp", "tool", "params"}, not ${request.method}` } };
  }
  let res;
  try {
    res = await fetch(MCPS_RPC, {
      method: "POST",
      headers: { authorization: `Bearer ${runToken}`, "content-type": "application/json" },
      body: request.body ?? new Uint8Array(),
    });
  } catch (err) {
    return { error: { name: "Internal", message: `${MCPS_RPC}: the relay could not be reached (${err.message})` } };
  }
  const type = res.headers.get("content-type") ?? "application/json";
  return { status: res.status, statusText: res.statusText, url: MCPS_RPC, headers: [["content-type", type]], body: await res.arrayBuffer() };
}
