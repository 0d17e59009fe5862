// What the person at the tab sees: every event logged to the console as a line starting
// "relay-mcp: " (so the executor's lines can be picked out of DevTools, by a person or a test),
// and a minimal status on the page (session, connection, last runs).

const PREFIX = "relay-mcp: ";
const RUNS_SHOWN = 10;
// Echoing a chatty program line by line would swamp DevTools; the full output still goes to
// the server.
const ECHO_LINES_PER_RUN = 500;

export class Status {
  constructor(doc = document) {
    this.sessionEl = doc.getElementById("session");
    this.stateEl = doc.getElementById("state");
    this.runsEl = doc.getElementById("runs");
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
    this.stateEl.textContent = detail ? `${state} (${detail})` : state;
    this.stateEl.dataset.state = state;
  }

  /** Adds a run to the page's list; returns a function that sets its outcome text. */
  addRun(hash, language) {
    const item = this.runsEl.ownerDocument.createElement("li");
    const label = `${hash.slice(0, 12)} ${language}`;
    item.textContent = `${label} running`;
    this.runsEl.prepend(item);
    while (this.runsEl.children.length > RUNS_SHOWN) this.runsEl.lastElementChild.remove();
    return (outcome) => (item.textContent = `${label} ${outcome}`);
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
