// Runs one job at a time in the sandbox (lib/sandbox.js) and enforces, by the page's own clock
// and count, what guest code must not be able to talk its way out of. Each job takes a fresh
// runner worker and is posted to it over that worker's private port; from that moment the job
// has limits.timeoutMs, whatever the worker says. Output is counted here against
// limits.stdoutBytes; past the cap, or at the deadline, or on cancel, the worker is terminated.
// Every message on the port is checked for shape; anything after `exit` is never read.
//
// job: {runId, language:"js"|"py", runtimeId, files:{relative path: Uint8Array},
//       entry:{path, argv, env, cwd, stdin}, limits:{timeoutMs, memMb, stdoutBytes}}

import { failure, outputLimitFailure } from "./errors.js";
import { OutputSink } from "./output-sink.js";
import { Sandbox } from "./sandbox.js";

// Fetching, checking and booting a runtime the first time (Pyodide: ~10 MiB) has its own,
// generous budget; it is the page's own work and no guest code runs during it.
const LOAD_TIMEOUT_MS = 120_000;

// Which runtime family runs each language; the capsule names the exact runtime id.
const FAMILIES = { js: "quickjs", py: "pyodide" };
// Error names a runner may report: the rest (Timeout, Cancelled, ...) are the page's to give.
const RUNNER_ERRORS = new Set(["OutputLimitExceeded", "Internal"]);
// What a runner's exit may say, bounded: Python can make these any value it likes, and the
// relay reads an exit code as a 32-bit integer.
const MAX_ERROR_MESSAGE = 2048;
const MAX_MEM_MB = 1 << 20;

export class RunnerHost {
  /** @param frameUrl the URL of sandbox.html */
  constructor(frameUrl) {
    this.sandbox = new Sandbox(frameUrl);
    this.sandbox.onCrash = (runId, message) => {
      if (this.current?.job.runId === runId) this.stop(crashedOutcome(message));
    };
    this.current = null;
  }

  /**
   * Runs `job`. `handlers.onLoading(runtimeId)` (the runtime is loaded for the first time),
   * `handlers.onStart()` (the job was handed to its worker) and `handlers.onOutput(stream, text)`
   * are called as things happen; an aborted `signal` cancels.
   * @returns {Promise<{exitCode, usage:{wallMs, memPeakMb}, error?:{name, message}}>}
   */
  run(job, { onLoading = () => {}, onStart = () => {}, onOutput = () => {}, signal } = {}) {
    if (this.current) throw new Error("RunnerHost runs one job at a time");
    if (signal?.aborted) return Promise.resolve(cancelledOutcome());
    return new Promise((resolve) => {
      const sink = new OutputSink(job.limits.stdoutBytes, ({ type, data }) => onOutput(type, data));
      const run = { job, sink, resolve, timer: null, startedAt: null, port: null };
      this.current = run;
      const onAbort = () => this.stop(cancelledOutcome());
      signal?.addEventListener("abort", onAbort, { once: true });
      run.cleanup = () => signal?.removeEventListener("abort", onAbort);
      const family = FAMILIES[job.language];
      if (!family || !job.runtimeId?.startsWith(`${family}@`)) {
        const message = `runtime "${job.runtimeId}" cannot run language "${job.language}"`;
        return this.stop(failure("ValidationError", message));
      }
      if (!this.sandbox.isPrepared(job.runtimeId)) onLoading(job.runtimeId);
      this.arm(LOAD_TIMEOUT_MS, (ms) => failure("Timeout", `loading runtime ${job.runtimeId} took longer than ${ms / 1000} s`));
      this.sandbox.take(job.runtimeId, job.runId, () => this.current === run).then(
        (port) => this.start(run, port, onStart),
        (err) => this.current === run && this.stop(failure("Internal", err.message)),
      );
    });
  }

  /** Hands the job to its worker; the run's own time limit starts now. */
  start(run, port, onStart) {
    if (this.current !== run) return port.close(); // cancelled or timed out meanwhile
    run.port = port;
    port.onmessage = ({ data }) => this.onMessage(run, data);
    port.postMessage({ type: "run", job: run.job });
    run.startedAt = performance.now();
    this.arm(run.job.limits.timeoutMs, timeoutOutcome);
    onStart();
  }

  onMessage(run, message) {
    if (this.current !== run) return;
    const type = message?.type;
    if ((type === "stdout" || type === "stderr") && typeof message.data === "string") {
      if (!run.sink.write(type, message.data)) this.stop(outputLimitFailure(run.sink.limitBytes));
      return;
    }
    if (type === "exit" && Number.isInteger(message.exitCode)) return this.stop(exitOutcome(message));
    this.stop(crashedOutcome(`it sent a message the page does not accept (${JSON.stringify(type)})`));
  }

  /** (Re)starts the current run's deadline; `outcome(ms)` is what it ends with. */
  arm(ms, outcome) {
    const run = this.current;
    clearTimeout(run.timer);
    run.timer = setTimeout(() => this.stop(outcome(ms)), ms);
  }

  /** Ends the current run, if any: its worker is terminated, whatever state it is in. */
  stop(outcome) {
    const run = this.current;
    if (!run) return;
    this.current = null;
    clearTimeout(run.timer);
    run.cleanup();
    run.port?.close();
    this.sandbox.kill(run.job.runId);
    const wallMs = run.startedAt === null ? 0 : Math.round(performance.now() - run.startedAt);
    const usage = { wallMs, memPeakMb: outcome.memPeakMb ?? 0 };
    run.resolve({ exitCode: outcome.exitCode, usage, ...(outcome.error && { error: outcome.error }) });
  }
}

/** What the worker's `exit` says, bounded, with only the error names a runner may give. */
function exitOutcome({ exitCode, memPeakMb, error }) {
  const code = exitCode >= -(2 ** 31) && exitCode < 2 ** 31 ? exitCode : 1;
  const memory = Number.isFinite(memPeakMb) ? Math.min(MAX_MEM_MB, Math.max(0, Math.round(memPeakMb))) : 0;
  if (!error) return { exitCode: code, memPeakMb: memory };
  const name = RUNNER_ERRORS.has(error.name) ? error.name : "Internal";
  return { exitCode: code, memPeakMb: memory, error: { name, message: String(error.message ?? "").slice(0, MAX_ERROR_MESSAGE) } };
}

function crashedOutcome(message) {
  return failure("Internal", `the runner crashed: ${message}`);
}

function timeoutOutcome(ms) {
  return failure("Timeout", `the run exceeded its time limit of ${ms} ms (policy.limits.timeoutMs) and was stopped`);
}

export function cancelledOutcome() {
  return { ...failure("Cancelled", "the run was cancelled"), usage: { wallMs: 0, memPeakMb: 0 } };
}
