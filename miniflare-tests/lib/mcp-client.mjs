// The official MCP TypeScript SDK client, connected to the Worker with a tenant's key.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { BASE } from "./relay.mjs";

/** A connected SDK client for `session` (the `?session=` of /mcp) of the Worker at `base`. */
export async function connectClient(key, session = "default", name = "relay-edge-tests", base = BASE) {
  const url = new URL(`${base}/mcp${session === "default" ? "" : `?session=${session}`}`);
  const transport = new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  const client = new Client({ name, version: "1.0.0" });
  await client.connect(transport);
  return client;
}

/** The `relay://session` resource, read through `client` and parsed. */
export async function readRelaySession(client) {
  const { contents } = await client.readResource({ uri: "relay://session" });
  return JSON.parse(contents[0].text);
}
