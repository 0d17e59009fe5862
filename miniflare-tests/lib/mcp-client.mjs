// The official MCP TypeScript SDK client, connected to the Worker with a tenant's key.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { BASE } from "./relay.mjs";

/** A connected SDK client for `session` (the `?session=` of /mcp). */
export async function connectClient(key, session = "default", name = "relay-edge-tests") {
  const url = new URL(`${BASE}/mcp${session === "default" ? "" : `?session=${session}`}`);
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  const client = new Client({ name, version: "1.0.0" });
  await client.connect(transport);
  return client;
}
