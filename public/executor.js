// The executor page: a person opens it to lend this tab to relay-edge. It attaches to a relay
// session with the person's API key, takes commands over SSE (lib/session.js), runs the
// capsules it receives one at a time (lib/run-queue.js) over its copy of the relay session's
// workspace (lib/workspace.js: OPFS, or IndexedDB where OPFS is missing), and streams their
// output back over the NDJSON backchannel (lib/backchannel.js). For the person it shows its
// state, the tabs of the relay session, the runs with their output (lib/status.js), how to
// connect an MCP client (lib/connect-snippets.js), a try-it box and the MCP clients seen
// recently (lib/page-mcp.js: the page as an MCP client of its own relay session).
//
// The key comes from the URL fragment (#key=<key>, then removed from the address bar) or from
// localStorage, else from a small form; #session=<name> picks the relay session ("default").

import { Backchannel } from "./lib/backchannel.js";
import { browserName, cacheKeeps, degradations, missingFeatures } from "./lib/browser-support.js";
import { ResultSocket } from "./lib/result-socket.js";
import { renderSnippets } from "./lib/connect-snippets.js";
import { DepsBuilder } from "./lib/deps-build.js";
import { HttpError, backoffMs, sleep } from "./lib/http.js";
import { KeyRing, keySetFromServer } from "./lib/jws.js";
import { McpsTree } from "./lib/mcps-tree.js";
import { loadPolicy } from "./lib/policy.js";
import { RunQueue } from "./lib/run-queue.js";
import { RunnerHost } from "./lib/runner-host.js";
import { SessionClient } from "./lib/session.js";
import { Status } from "./lib/status.js";
import { PAGE_CLIENT_NAME, readRelaySession, tryRun } from "./lib/page-mcp.js";
import { openWorkspace } from "./lib/workspace.js";
import { WorkspaceSync } from "./lib/workspace-sync.js";

const KEY_STORAGE = "relay.key";
const ATTACH_RETRY_MAX_MS = 30_000;
const CLIENTS_REFRESH_MS = 30_000;
// After a run ends the list is read again, but not more often than this: one relay-session
// read per run would compete with the runs themselves.
const CLIENTS_AFTER_RUN_MS = 10_000;

const fragment = readFragment();
const status = new Status(document, fragment.session);
const runner = new RunnerHost(new URL("sandbox.html", import.meta.url));
const keyRing = new KeyRing(keySetFromServer());
const builder = new DepsBuilder(new URL("build-worker.js", import.meta.url));

main().catch((err) => status.error(err.message));

async function main() {
  if (!window.isSecureContext) {
    // WebCrypto (signature checks) and the Cache API exist only in secure contexts.
    throw new Error("open this page over https or on localhost: capsule signatures cannot be checked here");
  }
  const missing = await missingFeatures();
  if (missing.length) {
    status.setState("unsupported", missing.join(", "));
    throw new Error(`this browser cannot be an executor: it has no ${missing.join(", ")}`);
  }
  const { key, session } = fragment;
  let client;
  let readiness = null; // the runtimes' states, as told to the server
  const found = { workspace: null, cache: true, resultsByPost: false }; // what the browser section shows
  const showBrowser = () => status.setBrowser(browserName(), degradations(found));
  const resultSocket = new ResultSocket(
    () => client.resultSocketEndpoint(),
    (type, data) => client.command(type, data),
    (opened) => {
      found.resultsByPost = !opened;
      if (found.workspace) showBrowser();
    },
  );
  const backchannel = new Backchannel(() => client.endpoint("result"), {
    socket: resultSocket,
    onUnauthorized: () => client.renew(),
    onRefused: (refused) => stopUnwanted(queue, refused),
    onDropped: (err) => status.error(`results lost after retries: ${err.message}`),
  });
  const [workspace, policy, cache] = await Promise.all([openWorkspace(session), loadPolicy(), cacheKeeps()]);
  status.log(`Workspace of relay session "${session}": ${workspace.list().length} files (${workspace.backend})`);
  Object.assign(found, { workspace: workspace.backend, cache });
  showBrowser();
  const sync = new WorkspaceSync({ workspace, session, endpoint: (action) => client.endpoint(action), status });
  const queue = new RunQueue({ runner, keyRing, backchannel, status, workspace, policy, builder, sync });
  const mcps = new McpsTree({ workspace, endpoint: () => client.endpoint("mcps"), status });
  const handlers = {
    onCommand(type, data) {
      switch (type) {
        case "hello":
          status.setState("connected");
          showPersonTools(client.key, session);
          keyRing.load(false).catch(() => {}); // the signing keys, ahead of the first capsule
          resultSocket.open(); // for this tab id: ready before the first batch
          warmRuntimes((states) => {
            readiness = states;
            status.setRuntimes(states);
            client.reportReadiness(readiness);
          });
          if (readiness) client.reportReadiness(readiness); // a new tab id after a reconnect
          status.log(`Connected to server (session: ${client.sessionId})`);
          status.log("Ready. Waiting for execution requests...");
          mcps.sync();
          queue
            .whenIdle() // a run under way keeps its writes (RunQueue.whenIdle)
            .then(() => sync.sync())
            .then(({ files, fetched, ms }) => status.log(`Workspace: ${files} file(s) from the relay session, ${fetched} fetched, in ${Math.round(ms)} ms`))
            .catch((err) => status.error(`could not bring the workspace up to date: ${err.message}`));
          break;
        case "tabs":
          status.setTabs(data, client.tabId);
          break;
        case "capsule":
        case "build":
          queue.add(data);
          break;
        case "cancel":
          queue.cancel(data.runId);
          break;
        case "ran":
          status.runs.record(data);
          break;
      }
    },
    async onState(state, detail) {
      status.setState(state, detail);
      if (state === "reconnecting") status.error(`lost the connection to the server; ${detail}`);
      if (state !== "unauthorized") return;
      refuseKey(detail);
      client = await connect(null, session, handlers);
    },
  };
  client = await connect(key ?? localStorage.getItem(KEY_STORAGE), session, handlers);
  addEventListener("pagehide", () => client.detach());
}

/**
 * Attaches to the relay session and opens its command stream, asking for the key while the
 * server refuses it and retrying with backoff while the server cannot be reached.
 */
async function connect(key, session, handlers) {
  for (let failures = 0; ; ) {
    key ??= await askForKey();
    const client = new SessionClient({ key, session, leaseWorker: new URL("lease-worker.js", import.meta.url), ...handlers });
    status.setState("attaching");
    try {
      await client.start();
      localStorage.setItem(KEY_STORAGE, key);
      document.getElementById("key-error").textContent = "";
      status.setSession(client.sessionId);
      return client;
    } catch (err) {
      if (err instanceof HttpError && (err.status === 401 || err.status === 403)) {
        refuseKey(err.body?.error?.message ?? err.message);
        status.setState("unauthorized");
        key = null;
      } else {
        const delay = backoffMs(failures++, ATTACH_RETRY_MAX_MS);
        status.error(`could not attach (${err.message}); retrying in ${delay / 1000} s`);
        status.setState("offline");
        await sleep(delay);
      }
    }
  }
}

/**
 * Says once, next to the key form, that the server refused the key, why, and where keys come
 * from; and forgets the key. (The banner only points at the form.)
 */
function refuseKey(why) {
  status.error(`the server refused the API key: ${why}`);
  document.getElementById("key-error").textContent =
    `The server refused this key (${why}). Keys come from whoever runs this relay: its admin creates a tenant ` +
    "with POST /admin/tenants, which shows the tenant's key once; on your own machine, scripts/dev.sh prints the dev tenant's key.";
  localStorage.removeItem(KEY_STORAGE);
}

/**
 * Stops runs the server refused events of: it no longer wants them from this tab. They ended
 * there (a timeout, a cancel whose command this tab missed, results lost on the way), went to
 * another tab, or the server restarted and forgot them.
 */
function stopUnwanted(queue, refused) {
  for (const { runId, reason } of refused) {
    status.error(`the server refused results of run ${runId} (${reason}); stopping it`);
    queue.cancel(runId);
  }
}

/** Reads #key= and #session= from the URL fragment; the key is then removed from the URL. */
function readFragment() {
  const params = new URLSearchParams(location.hash.slice(1));
  const key = params.get("key");
  if (key) {
    localStorage.setItem(KEY_STORAGE, key);
    params.delete("key");
    const rest = params.toString();
    history.replaceState(null, "", `${location.pathname}${location.search}${rest ? `#${rest}` : ""}`);
  }
  return { key, session: params.get("session") || "default" };
}

function askForKey() {
  const form = document.getElementById("key-form");
  form.hidden = false;
  if (status.state !== "unauthorized") status.setState("waiting for an API key");
  form.elements.key.focus();
  return new Promise((resolve) => {
    form.onsubmit = (event) => {
      event.preventDefault();
      const key = new FormData(form).get("key").trim();
      if (!key) return;
      form.hidden = true;
      resolve(key);
    };
  });
}

/** What a person needs once the tab is attached: the connect snippets, the try-it box, and a
 * way to take the key out of this browser. */
function showPersonTools(key, session) {
  renderSnippets(document.getElementById("snippets"), document.getElementById("show-key"), { origin: location.origin, session, key });
  document.getElementById("connect").hidden = false;
  document.getElementById("try").hidden = false;
  const forget = document.getElementById("forget-key");
  forget.hidden = false;
  forget.onclick = () => {
    localStorage.removeItem(KEY_STORAGE);
    location.reload();
  };
  showClients(key, session);
  const form = document.getElementById("try-form");
  const output = document.getElementById("try-output");
  form.onsubmit = async (event) => {
    event.preventDefault();
    const { tool, code } = Object.fromEntries(new FormData(form));
    const button = form.querySelector("button");
    button.disabled = true;
    output.textContent = "Running…";
    try {
      output.textContent = await tryRun({ key, session, tool, code });
    } catch (err) {
      output.textContent = `could not reach the server: ${err.message}`;
    } finally {
      button.disabled = false;
    }
  };
}

/** Lists the MCP clients the relay session has seen recently, but for this page itself: every
 * CLIENTS_REFRESH_MS, and after a run here when the list is older than CLIENTS_AFTER_RUN_MS. */
function showClients(key, session) {
  const list = document.getElementById("clients");
  let readAt = 0;
  const refresh = async () => {
    readAt = Date.now();
    const relay = await readRelaySession({ key, session }).catch(() => null);
    if (!relay) return;
    const clients = relay.clients.filter(({ name }) => name !== PAGE_CLIENT_NAME); // not this page itself
    list.replaceChildren(
      ...clients.map(({ name, version, lastSeenMs }) =>
        Object.assign(document.createElement("li"), { textContent: `${name} ${version} (last request ${new Date(lastSeenMs).toLocaleTimeString()})` }),
      ),
    );
    document.getElementById("clients-section").hidden = clients.length === 0;
  };
  clearInterval(showClients.timer);
  showClients.timer = setInterval(refresh, CLIENTS_REFRESH_MS);
  status.runs.onFinish = () => Date.now() - readAt > CLIENTS_AFTER_RUN_MS && refresh();
  refresh();
}

/** Loads the runtimes as soon as the tab is attached, once, so that not even the first
 * run_py waits for Pyodide to boot; `onProgress` hears each runtime's state (RunnerHost.warm). */
function warmRuntimes(onProgress) {
  warmRuntimes.started ??= runner.warm(onProgress).then(
    (ids) => status.log(`Runtimes ready: ${ids.join(", ")}`),
    (err) => status.error(`could not load the runtimes ahead of the first run (${err.message}); they load on first use`),
  );
}
