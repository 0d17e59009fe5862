// Runs the capsules the server sends to this tab, one at a time in arrival order: fetch and
// check the capsule (capsule.js), run it in the runner worker (runner-host.js), and report
// every step over the backchannel and in the console. A capsule that fails a check is refused
// and never runs. The server holds a lease on this tab for each run: it is acknowledged at
// once and renewed every LEASE_RENEW_MS until the run ends, so a closed tab is noticed quickly.

import { loadCapsule } from "./capsule.js";
import { failure } from "./errors.js";
import { cancelledOutcome } from "./runner-host.js";

const LEASE_RENEW_MS = 2_000;

export class RunQueue {
  constructor({ runner, keyRing, backchannel, status }) {
    this.runner = runner;
    this.keyRing = keyRing;
    this.backchannel = backchannel;
    this.status = status;
    this.pending = [];
    this.current = null; // {runId, abort: AbortController}
  }

  /** @param announced the `capsule` command: {runId, hash, manifestUrl, language, size} */
  add(announced) {
    // The same run announced again (e.g. re-sent after a reconnect) is already in hand.
    const known = (run) => run?.runId === announced.runId;
    if (known(this.current) || this.pending.some(known)) return;
    this.backchannel.forRun(announced.runId)({ type: "progress", phase: "received" });
    this.pending.push(announced);
    if (!this.current) this.next();
  }

  cancel(runId) {
    if (this.current?.runId === runId) return this.current.abort.abort();
    const index = this.pending.findIndex((announced) => announced.runId === runId);
    if (index < 0) return;
    const [announced] = this.pending.splice(index, 1);
    this.status.log(`Cancelled capsule ${announced.hash} before it started`);
    this.backchannel.forRun(runId)({ type: "exit", ...cancelledOutcome() });
  }

  async next() {
    const announced = this.pending.shift();
    if (!announced) return;
    this.current = { runId: announced.runId, abort: new AbortController() };
    const report = this.backchannel.forRun(announced.runId);
    const lease = setInterval(() => report({ type: "progress", phase: "running" }), LEASE_RENEW_MS);
    try {
      await this.execute(announced, this.current.abort.signal);
    } catch (err) {
      this.status.error(`run ${announced.runId}: ${err.message}`);
    } finally {
      clearInterval(lease);
    }
    this.current = null;
    this.next();
  }

  async execute(announced, signal) {
    const { runId, hash, language, size } = announced;
    const report = this.backchannel.forRun(runId);
    const showOutcome = this.status.addRun(hash, language);
    this.status.log(`Received capsule ${hash} (language: ${language}, size: ${formatSize(size)})`);

    let capsule;
    try {
      capsule = await loadCapsule(announced, this.keyRing, { signal });
    } catch (err) {
      if (signal.aborted) return this.complete(report, showOutcome, cancelledOutcome());
      const refused = capsuleFailure(hash, err);
      report({ type: "error", ...refused.error });
      return this.complete(report, showOutcome, { ...refused, usage: { wallMs: 0, memPeakMb: 0 } });
    }

    const echo = this.status.echo();
    const outcome = await this.runner.run(job(runId, capsule), {
      signal,
      onLoading: (runtimeId) => {
        this.status.log(`Loading ${runtimeName(runtimeId)} runtime from this server...`);
        report({ type: "progress", phase: "load-runtime", runtimeId });
      },
      onStart: () => {
        this.status.log(`Executing capsule ${hash}...`);
        report({ type: "progress", phase: "execute" });
      },
      onOutput: (stream, data) => {
        report({ type: stream, data });
        echo.write(stream, data);
      },
    });
    echo.end();
    this.complete(report, showOutcome, outcome);
  }

  complete(report, showOutcome, { exitCode, usage, error }) {
    report({ type: "exit", exitCode, usage, ...(error && { error }) });
    const runtime = formatSeconds(usage.wallMs);
    this.status.log(`Execution completed (exitCode: ${exitCode}, runtime: ${runtime})`);
    if (error) this.status.error(`${error.name}: ${error.message}`);
    showOutcome(`exit ${exitCode} in ${runtime}${error ? ` (${error.name})` : ""}`);
  }
}

/** What the runner gets from a checked capsule. stdin travels in the manifest's entry. */
function job(runId, { manifest, files, limits }) {
  const { path, argv = [], env = {}, cwd = "/", stdin = "" } = manifest.entry;
  return {
    runId,
    language: manifest.language,
    runtimeId: manifest.runtime.id,
    files,
    entry: { path, argv, env, cwd, stdin },
    limits,
  };
}

function capsuleFailure(hash, err) {
  if (err.name === "ValidationError") return failure("ValidationError", `capsule ${hash} refused: ${err.message}`);
  return failure("Internal", `could not fetch capsule ${hash}: ${err.message}`);
}

function runtimeName(runtimeId) {
  return runtimeId.startsWith("pyodide@") ? "Pyodide" : "QuickJS";
}

function formatSize(bytes) {
  if (!Number.isFinite(bytes)) return "unknown";
  return bytes < 1024 * 1024 ? `${Math.max(1, Math.round(bytes / 1024))}KB` : `${(bytes / 1048576).toFixed(1)}MB`;
}

function formatSeconds(ms) {
  return `${(ms / 1000).toFixed(ms < 1000 ? 3 : 1)}s`;
}
