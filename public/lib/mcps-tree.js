// The /mcps tree of the relay session's workspace: what the tenant's upstream MCP servers
// offer (/mcps/index.json, /mcps/<server>.d.ts, /mcps/<server>/tools/<tool>/schema.json),
// listed by the relay session (GET /session/<id>/mcps) and written here, so that guest code,
// `read` and `search` see it like any file. Guest code cannot write under /mcps; only this
// does. It is synced when the tab attaches and every REFRESH_MS after, never in a run's way.

import { fetchOk } from "./http.js";

const REFRESH_MS = 5 * 60_000;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class McpsTree {
  /**
   * @param options.workspace the relay session's files (lib/workspace.js)
   * @param options.endpoint () => {url, headers} of `GET /session/<id>/mcps`
   * @param options.status where failures are reported
   */
  constructor({ workspace, endpoint, status }) {
    this.workspace = workspace;
    this.endpoint = endpoint;
    this.status = status;
    this.timer = null;
    this.syncing = null;
  }

  /** Syncs now (one sync at a time), then again every REFRESH_MS. */
  sync() {
    clearTimeout(this.timer);
    this.syncing ??= this.syncOnce()
      .catch((err) => this.status.error(`could not list the upstream MCP servers for /mcps: ${err.message}`))
      .finally(() => {
        this.syncing = null;
        this.timer = setTimeout(() => this.sync(), REFRESH_MS);
      });
    return this.syncing;
  }

  async syncOnce() {
    const { url, headers } = this.endpoint();
    const { files } = await (await fetchOk(url, { headers })).json();
    const listed = new Set();
    for (const { path, text } of files) {
      listed.add(path);
      const old = this.workspace.read(path);
      if (old && decoder.decode(old) === text) continue;
      await this.workspace.write(path, encoder.encode(text));
    }
    const stale = this.workspace.list().filter((path) => path.startsWith("/mcps/") && !listed.has(path));
    for (const path of stale) await this.workspace.remove(path);
    const servers = files.filter(({ path }) => path.endsWith(".d.ts")).length;
    if (servers) this.status.log(`/mcps: ${servers} upstream MCP server(s) listed`);
  }
}
