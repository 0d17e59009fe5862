// Runs what the server sends to this tab, one at a time in arrival order: builds (a run's
// dependencies built into a capsule by deps-build.js, which then runs like any capsule), capsules (fetch and
// check the capsule (capsule.js), bring this tab's copy of the relay session's workspace up to
// date (workspace-sync.js), run it in the runner worker (runner-host.js) over it, its writes
// sent to the relay session as they are made, with guest fetches sent through the Worker's
// egress route, then upload what the run left in /out). Every step is reported over the
// backchannel and in the console. A capsule that fails a check is refused and never runs. Each run is acknowledged at once; one that must wait here behind another is
// told what that one is doing (a `queued` progress note, again whenever that changes), which
// the relay passes on to its client and quotes if the wait outlasts the run's deadline. (That
// the tab is alive at all is its lease's business: lease-worker.js.) Once idle, with the
// results delivered, the sandbox is told to load the standby workers runs took
// (RunnerHost.refill), when standby-refill.js says.

import { loadCapsule, runnerJob } from "./capsule.js";
import { MCPS_RPC, guardedFetch, mcpsRpc } from "./egress.js";
import { failure, isErrorName } from "./errors.js";
import { HttpError } from "./http.js";
import { storeDisplays } from "./displays.js";
import { exitEvent } from "./exit-event.js";
import { notStored, uploadOutFiles } from "./out-files.js";
import { notKept } from "./workspace-sync.js";
import { cancelledOutcome } from "./runner-host.js";
import { StandbyRefill } from "./standby-refill.js";
import { runtimeName } from "./status.js";

// A waiting run hears of the stored file changes of the run ahead at most this often.
const QUEUED_NOTE_EVERY_MS = 5_000;

export class RunQueue {
  /**
   * @param options.workspace the relay session's files (lib/workspace.js)
   * @param options.policy the policy checks (lib/policy.js)
   * @param options.builder builds dependencies (lib/deps-build.js)
   * @param options.sync keeps the workspace a copy of the relay session's (lib/workspace-sync.js)
   */
  constructor({ runner, keyRing, backchannel, status, workspace, policy, builder, sync }) {
    this.sync = sync;
    this.runner = runner;
    this.builder = builder;
    this.keyRing = keyRing;
    this.backchannel = backchannel;
    this.status = status;
    this.workspace = workspace;
    this.policy = policy;
    this.pending = [];
    // {runId, abort: AbortController, doing: what it is at, stored: file changes stored}
    this.current = null;
    this.notedAt = 0; // when the waiting runs were last told what the current one is doing
    this.idle = []; // whenIdle's resolvers
    this.refills = new StandbyRefill(() => this.runner.refill());
    this.runner.setBusy(() => this.current !== null);
  }

  /**
   * @param announced the `capsule` command ({runId, hash, manifestUrl, language, size, token,
   *   runToken}) or the `build` command ({runId, language, build, sources, runToken})
   */
  add(announced) {
    // The same run announced again (e.g. re-sent after a reconnect) is already in hand.
    const known = (run) => run?.runId === announced.runId;
    if (known(this.current) || this.pending.some(known)) return;
    const report = this.backchannel.forRun(announced.runId);
    report({ type: "progress", phase: "received" });
    this.pending.push(announced);
    if (!this.current) return this.next();
    report({ type: "progress", phase: "queued", detail: this.waitingBehind() });
  }

  /**
   * Settles once no run is in hand here (at once if none is). A sync of the workspace other than
   * a run's own waits for this: in the middle of a run it would overwrite what the run wrote with
   * the relay session's older bytes, and the run's commit, landing after, would vouch for them.
   */
  whenIdle() {
    if (!this.current) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /** What a run waiting here waits for: the current run, and what it is doing. */
  waitingBehind() {
    const { runId, doing, stored } = this.current;
    const changes = stored === 1 ? "1 file change" : `${stored} file changes`;
    return `behind run ${runId}, which is ${doing}${stored ? ` (${changes} stored)` : ""}`;
  }

  /**
   * The current run is now `doing` this, or has `stored` more file changes: the waiting runs
   * hear of it (of stored changes, at most every QUEUED_NOTE_EVERY_MS).
   */
  noteDoing(doing = this.current.doing, stored = 0) {
    const changed = doing !== this.current.doing;
    this.current.doing = doing;
    this.current.stored += stored;
    if (!this.pending.length || (!changed && performance.now() - this.notedAt < QUEUED_NOTE_EVERY_MS)) return;
    this.notedAt = performance.now();
    const detail = this.waitingBehind();
    for (const { runId } of this.pending) this.backchannel.forRun(runId)({ type: "progress", phase: "queued", detail });
  }

  cancel(runId) {
    if (this.current?.runId === runId) return this.current.abort.abort();
    const index = this.pending.findIndex((announced) => announced.runId === runId);
    if (index < 0) return;
    const [announced] = this.pending.splice(index, 1);
    this.status.log(`Cancelled run ${runId} before it started`);
    this.backchannel.forRun(runId)(exitEvent(cancelledOutcome()));
  }

  async next() {
    const announced = this.pending.shift();
    if (!announced) return;
    this.current = { runId: announced.runId, abort: new AbortController(), doing: "starting", stored: 0 };
    try {
      this.refills.runStarts();
      if (announced.build) await this.buildThenExecute(announced, this.current.abort.signal);
      else await this.execute(announced, this.current.abort.signal);
    } catch (err) {
      // The relay must not wait out the run's deadline for an exit that will never come.
      this.status.error(`run ${announced.runId}: ${err.message}`);
      const error = { name: "Internal", message: `the executor tab failed to run it: ${err.message}` };
      this.backchannel.forRun(announced.runId)(exitEvent({ exitCode: 1, usage: { wallMs: 0, memPeakMb: 0 }, error }));
    }
    this.current = null;
    if (this.pending.length) return this.next();
    for (const resolve of this.idle.splice(0)) resolve();
    // Idle: once the results are on their way, the sandbox may use the CPU for the next standby.
    this.backchannel.drained().then(() => this.current || this.refills.idle());
  }

  /** Builds the run's dependencies into its capsule, then runs that; a failed build ends the run. */
  async buildThenExecute(command, signal) {
    const { runId, language, build } = command;
    const report = this.backchannel.forRun(runId);
    const started = performance.now();
    this.noteDoing("building its dependencies");
    this.status.log(`Building the dependencies of run ${runId}: ${describeBuild(build)}`);
    const progress = (phase, detail) => {
      report({ type: "progress", phase, detail });
      this.status.log(`Build ${phase}: ${detail}`);
    };
    let announced;
    try {
      announced = await this.builder.build(command, progress, signal);
    } catch (err) {
      const view = this.status.runs.start({ runId, tool: language === "py" ? "run_py" : "run_js", language });
      const outcome = signal.aborted ? cancelledOutcome() : buildFailure(err);
      return this.complete(report, view, { ...outcome, usage: { wallMs: Math.round(performance.now() - started), memPeakMb: 0 } });
    }
    this.status.log(`Built capsule ${announced.hash} in ${formatSeconds(performance.now() - started)}`);
    return this.execute(announced, signal);
  }

  async execute(announced, signal) {
    const { runId, hash, language, size } = announced;
    const report = this.backchannel.forRun(runId);
    const view = this.status.runs.start({ runId, tool: language === "py" ? "run_py" : "run_js", language });
    this.status.log(`Received capsule ${hash} (language: ${language}, size: ${formatSize(size)})`);
    this.noteDoing("loading its capsule");

    let capsule;
    try {
      capsule = await loadCapsule(announced, this.keyRing, { signal });
    } catch (err) {
      if (signal.aborted) return this.complete(report, view, cancelledOutcome());
      const refused = capsuleFailure(hash, err);
      report({ type: "error", ...refused.error });
      return this.complete(report, view, { ...refused, usage: { wallMs: 0, memPeakMb: 0 } });
    }

    view.code(new TextDecoder().decode(capsule.files[capsule.manifest.entry.path.slice(1)]));
    this.noteDoing("bringing its workspace up to date");
    try {
      await this.sync.sync(runId, announced.workspace);
    } catch (err) {
      const stale = failure("Internal", `could not bring this tab's copy of the workspace up to date: ${err.message}; run again`);
      return this.complete(report, view, { ...stale, usage: { wallMs: 0, memPeakMb: 0 } });
    }
    const echo = this.status.echo();
    const { policy } = capsule.manifest;
    const outWrites = new Set(); // paths under /out this run wrote
    const displays = []; // what display() showed, in order
    const writer = this.sync.writer(announced.runToken);
    const outcome = await this.runner.run(job(announced, capsule, this.workspace), {
      signal,
      onFile: (op) => this.applyFileOp(op, policy.filesystem, outWrites, writer).then(() => this.noteDoing(undefined, 1)),
      onFetch: (request) =>
        request.url === MCPS_RPC
          ? mcpsRpc({ runToken: announced.runToken, request })
          : guardedFetch({ policy: this.policy, network: policy.network, runToken: announced.runToken, request }),
      onDenied: (denial) => report({ type: "denied", ...denial }),
      onDisplay: (display) => displays.push(display),
      onLoading: (runtimeId) => {
        this.noteDoing(`loading the ${runtimeName(runtimeId)} runtime`);
        this.status.log(`Loading ${runtimeName(runtimeId)} runtime from this server...`);
        report({ type: "progress", phase: "load-runtime", runtimeId });
      },
      onStart: () => {
        this.noteDoing("executing");
        this.status.log(`Executing capsule ${hash}...`);
        report({ type: "progress", phase: "execute" });
      },
      onOutput: (stream, data) => {
        report({ type: stream, data });
        echo.write(stream, data);
        view.output(stream, data);
      },
    });
    echo.end();
    const { fileErrors } = outcome.usage;
    if (fileErrors) this.status.error(`run ${runId}: ${fileErrors} file change(s) could not be stored`);
    const shown = await storeDisplays(runId, displays, (path, data) => this.applyFileOp({ op: "write", path, data }, policy.filesystem, outWrites, writer));
    this.noteDoing("sending its file changes to the relay session");
    const kept = await writer.done();
    const { refused, failure: lost } = kept;
    for (const { path, name, message } of refused) this.status.error(`run ${runId}: the relay session refused ${path}: ${name}: ${message}`);
    if (lost) this.status.error(`run ${runId}: file changes did not reach the relay session: ${lost.message}`);
    if (outWrites.size) this.noteDoing("uploading its /out files");
    const published = await uploadOutFiles(this.workspace, [...outWrites], { runId, runToken: announced.runToken, tab: writer.tab });
    // What was not stored, and why, goes to the agent too (the run's stderr).
    const unsaved = notKept(kept) + notStored(published);
    if (unsaved) {
      report({ type: "stderr", data: unsaved });
      view.output("stderr", unsaved);
    }
    this.complete(report, view, { ...outcome, files: published.files, displays: shown });
  }

  /**
   * Persists a runner's file change once the policy admits it (the runner checked too, but it
   * runs guest code: this check is the one that holds).
   */
  async applyFileOp({ op, path, data }, filesystem, outWrites, writer) {
    const verdict = this.policy.checkPath(filesystem, path, "write");
    if (!verdict.allow) throw new Error(`refused a ${op} of ${path}: ${verdict.reason}`);
    if (op === "remove") {
      outWrites.delete(verdict.path);
      await this.workspace.remove(verdict.path);
      return writer.push(verdict.path, null);
    }
    await this.workspace.write(verdict.path, data);
    if (verdict.path.startsWith("/out/")) outWrites.add(verdict.path); // once written: not an older copy
    writer.push(verdict.path, data);
  }

  complete(report, view, { exitCode, usage, error, files = [], displays = [] }) {
    report(exitEvent({ exitCode, usage, error, files, displays }));
    const runtime = formatSeconds(usage.wallMs);
    this.status.log(`Execution completed (exitCode: ${exitCode}, runtime: ${runtime})`);
    if (error) this.status.error(`${error.name}: ${error.message}`);
    view.finish({ exitCode, usage, error, files });
  }
}

/** The runner's job (lib/capsule.js) with the context the run names (the relay's order: {name, fresh, idleMs}), if any. */
function job({ runId, context }, capsule, workspace) {
  return { ...runnerJob(runId, capsule, workspace.snapshot(), workspace.limitBytes), ...(context && { context }) };
}

function capsuleFailure(hash, err) {
  if (err.name === "ValidationError") return failure("ValidationError", `capsule ${hash} refused: ${err.message}`);
  return failure("Internal", `could not fetch capsule ${hash}: ${err.message}`);
}

/**
 * A build that failed: the build's own named error, or the server's refusal of its upload or
 * finalize for the storedBytes quota (QuotaExceeded: its message names the quota and says when to
 * retry; a bare DepsResolutionFailed would hide both). Any other refusal is the build's failure,
 * not the agent's arguments: DepsResolutionFailed.
 */
function buildFailure(err) {
  if (isErrorName(err.name)) return failure(err.name, err.message);
  if (err instanceof HttpError && err.serverName === "QuotaExceeded") return failure(err.serverName, err.message);
  return failure("DepsResolutionFailed", `the dependency build failed: ${err.message}`);
}

function describeBuild(build) {
  if (build.ecosystem === "npm") return Object.entries(build.dependencies).map(([name, range]) => `${name}@${range}`).join(", ");
  return [...build.requirements, ...build.wheelUrls].join(", ");
}

function formatSize(bytes) {
  if (!Number.isFinite(bytes)) return "unknown";
  return bytes < 1024 * 1024 ? `${Math.max(1, Math.round(bytes / 1024))}KB` : `${(bytes / 1048576).toFixed(1)}MB`;
}

function formatSeconds(ms) {
  return `${(ms / 1000).toFixed(ms < 1000 ? 3 : 1)}s`;
}
