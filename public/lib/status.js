// What the person at the tab sees: a banner saying what state the tab is in and what to do
// about it, the relay session's facts (session, connection, tabs, runtimes, what works
// differently in this browser), and the runs
// (run-list.js);
// and every event logged to the console as a line starting "relay-mcp: " (so the executor's
// lines can be picked out of DevTools, by a person or a test).

import { WORKING_BROWSERS } from "./browser-support.js";
import { RunList } from "./run-list.js";

const PREFIX = "relay-mcp: ";
// Echoing a chatty program line by line would swamp DevTools; the full output still goes to
// the server, and the page keeps the start of it.
const ECHO_LINES_PER_RUN = 500;

/** The banner's words for each state; `detail` is the server's or the network's own. */
const BANNERS = {
  starting: () => "Starting…",
  "waiting for an API key": () => "Enter your API key below to attach this tab to your relay session.",
  attaching: () => "Attaching to the relay session…",
  connected: () => "Attached. Calls of your MCP clients to this relay session run in this tab.",
  reconnecting: (detail) => `Lost the connection to the server; ${detail}. Calls wait in the relay session's queue meanwhile.`,
  offline: (detail) => `Cannot reach the server (${detail ?? "offline"}); retrying.`,
  // What was wrong with the key, and where keys come from, is said once: next to the form.
  unauthorized: () => "Not attached: enter a valid API key below.",
  standby: () => "Attached, on standby: another tab of this relay session, opened later, runs the calls. This tab takes over if that one closes.",
  unsupported: (detail) => `This browser cannot be an executor: it has no ${detail}. The executor works in ${WORKING_BROWSERS}.`,
};

export class Status {
  constructor(doc = document, session = "default") {
    this.bannerEl = doc.getElementById("banner");
    this.sessionEl = doc.getElementById("session");
    this.stateEl = doc.getElementById("state");
    this.tabsEl = doc.getElementById("tabs");
    this.runtimesEl = doc.getElementById("runtimes");
    this.browserEl = doc.getElementById("browser");
    this.degradedSaid = new Set(); // the degradations the console was told of
    this.runs = new RunList(doc.getElementById("runs"), doc.getElementById("runs-empty"), `relay.runs.${session}`);
    this.state = "starting";
    this.tabId = null;
  }

  log(text) {
    console.log(PREFIX + text);
  }

  error(text) {
    console.error(`${PREFIX}ERROR - ${text}`);
  }

  setSession(sessionId) {
    this.sessionEl.textContent = sessionId;
  }

  setState(state, detail) {
    this.state = state;
    // A refused key's detail is shown with the key form (executor.js), not repeated here.
    this.stateEl.textContent = detail && state !== "unauthorized" ? `${state} (${detail})` : state;
    this.stateEl.dataset.state = state;
    this.bannerEl.dataset.state = state;
    this.bannerEl.textContent = (BANNERS[state] ?? (() => state))(detail);
  }

  /** The tabs of the relay session (`tabs` command): how many, and whether this one runs next. */
  setTabs({ count, next }, tabId) {
    const runsNext = next === tabId;
    this.tabsEl.textContent =
      count === 1
        ? "1 (this tab)"
        : `${count} attached; ${runsNext ? "this tab runs the next call" : "another tab, opened later, runs the next calls (this one takes over if it closes)"}`;
    this.tabsEl.dataset.runsNext = String(runsNext);
    if (this.state === "connected" || this.state === "standby") {
      this.setState(runsNext ? "connected" : "standby");
    }
  }

  /**
   * This browser and what works differently in it (browser-support.js `degradations`: `{id:
   * sentence}`), each said once in the console too; the ids in `data-degraded`.
   */
  setBrowser(name, degraded) {
    const doc = this.browserEl.ownerDocument;
    const list = doc.createElement("ul");
    list.append(...Object.values(degraded).map((sentence) => Object.assign(doc.createElement("li"), { textContent: sentence })));
    if (list.childElementCount) this.browserEl.replaceChildren(`${name}, where the page works differently:`, list);
    else this.browserEl.replaceChildren(`${name}: everything works`);
    this.browserEl.dataset.degraded = Object.keys(degraded).join(" ");
    for (const id of Object.keys(degraded)) {
      if (!this.degradedSaid.has(id)) this.log(`In this browser: ${degraded[id]}`);
    }
    this.degradedSaid = new Set(Object.keys(degraded));
  }

  /** What this tab's runtimes are doing (RunnerHost.warm): `{"<id>": "loading" | "ready" | "failed"}`. */
  setRuntimes(states) {
    const words = { loading: "loading…", ready: "ready", failed: "failed (loads again on first use)" };
    this.runtimesEl.textContent = Object.entries(states)
      .map(([id, state]) => `${runtimeName(id)} ${words[state] ?? state}`)
      .join(" · ");
    this.runtimesEl.dataset.ready = String(Object.values(states).every((state) => state === "ready"));
    this.runtimesEl.title = Object.keys(states).join(", "); // the exact runtime ids
  }

  /** Echoes a run's output to the console line by line ("relay-mcp: stdout: <line>"). */
  echo() {
    const partial = { stdout: "", stderr: "" };
    let lines = 0;
    const emit = (stream, line) => {
      if (lines++ < ECHO_LINES_PER_RUN) this.log(`${stream}: ${line}`);
      else if (lines === ECHO_LINES_PER_RUN + 1) this.log(`(more output than ${ECHO_LINES_PER_RUN} lines: not echoed here)`);
    };
    return {
      write(stream, text) {
        const parts = (partial[stream] + text).split("\n");
        partial[stream] = parts.pop();
        for (const line of parts) emit(stream, line);
      },
      end() {
        for (const stream of ["stdout", "stderr"]) if (partial[stream]) emit(stream, partial[stream]);
      },
    };
  }
}

/** A runtime's name for people, from its id: "pyodide@314" -> "Pyodide". */
export function runtimeName(runtimeId) {
  const name = runtimeId.split("@")[0];
  return { pyodide: "Pyodide", quickjs: "QuickJS" }[name] ?? name;
}
