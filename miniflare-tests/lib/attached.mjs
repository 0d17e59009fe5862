// The setup of the end-to-end suites: a tenant, headless Chromium with the executor page
// attached to its default relay session, and an official SDK client of that session.

import { launchBrowser, openExecutor } from "./browser.mjs";
import { connectClient } from "./mcp-client.mjs";
import { createTenant } from "./relay.mjs";

/**
 * Creates tenant `name` with `defaults`, attaches an executor page and connects a client. With
 * `browser`, the page opens in a context of that browser, and close() closes that context only.
 * @returns {Promise<{key, tenant, browser, executor, client, close(): Promise<void>}>}
 */
export async function attachedExecutor(name, defaults, { browser: shared } = {}) {
  const { key, tenant } = await createTenant(name, defaults);
  const browser = shared ?? (await launchBrowser());
  const executor = await openExecutor(browser, key);
  const client = await connectClient(key);
  return {
    key,
    tenant,
    browser,
    executor,
    client,
    async close() {
      await client.close();
      await (shared ? executor.context : browser).close();
    },
  };
}
