// The page's side of the runner Web Worker (runner.js): starts it, hands it one run at a time,
// and enforces what the worker cannot enforce on itself. A run past its wall-clock limit
// (limits.timeoutMs, counted from when the program starts, so loading a runtime is not charged
// to it) or cancelled is stopped with worker.terminate(); the next run gets a fresh worker.

// Loading a runtime the first time (Pyodide: ~10 MiB) has its own, generous budget.
const LOAD_TIMEOUT_MS = 120_000;

export const EXIT_TIMEOUT = 124; // as GNU timeout(1)
export const EXIT_CANCELLED = 130; // as a program stopped by SIGINT

export class RunnerHost {
  constructor(workerUrl) {
    this.workerUrl = workerUrl;
    this.worker = null;
    this.current = null;
  }

  /**
   * Runs `job` (see runner.js for its shape). `handlers.onLoading(runtimeId)`,
   * `handlers.onStart()` and `handlers.onOutput(stream, text)` are called as things happen; an
   * aborted `signal` cancels.
   * @returns {Promise<{exitCode, usage:{wallMs, memPeakMb}, error?:{name, message}}>}
   */
  run(job, { onLoading = () => {}, onStart = () => {}, onOutput = () => {}, signal } = {}) {
    if (this.current) throw new Error("RunnerHost runs one job at a time");
    if (signal?.aborted) return Promise.resolve(cancelledOutcome());
    return new Promise((resolve) => {
      const run = { job, onLoading, onStart, onOutput, resolve, timer: null, startedAt: performance.now() };
      this.current = run;
      const onAbort = () => this.stop(cancelledOutcome());
      signal?.addEventListener("abort", onAbort, { once: true });
      run.cleanup = () => signal?.removeEventListener("abort", onAbort);
      this.arm(job.limits.timeoutMs, timeoutOutcome);
      this.ensureWorker().postMessage({ type: "run", ...job });
    });
  }

  ensureWorker() {
    if (!this.worker) {
      this.worker = new Worker(this.workerUrl, { type: "module", name: "relay-runner" });
      this.worker.onmessage = ({ data }) => this.onMessage(data);
      this.worker.onerror = (event) => {
        event.preventDefault();
        this.stop({ exitCode: 1, error: { name: "Internal", message: `the runner crashed: ${event.message}` } });
      };
    }
    return this.worker;
  }

  onMessage(message) {
    const run = this.current;
    if (!run || (message.runId !== undefined && message.runId !== run.job.runId)) return;
    switch (message.type) {
      case "loading":
        run.onLoading(message.runtimeId);
        this.arm(LOAD_TIMEOUT_MS, (ms) => ({
          exitCode: EXIT_TIMEOUT,
          error: { name: "Timeout", message: `loading runtime ${message.runtimeId} took longer than ${ms / 1000} s` },
        }));
        break;
      case "started":
        run.startedAt = performance.now();
        this.arm(run.job.limits.timeoutMs, timeoutOutcome);
        run.onStart();
        break;
      case "stdout":
      case "stderr":
        run.onOutput(message.type, message.data);
        break;
      case "exit":
        this.finish({ exitCode: message.exitCode, usage: message.usage, error: message.error });
        break;
    }
  }

  /** (Re)starts the current run's deadline; `outcome(ms)` is what it ends with. */
  arm(ms, outcome) {
    const run = this.current;
    clearTimeout(run.timer);
    run.timer = setTimeout(() => this.stop(outcome(ms)), ms);
  }

  /** Stops the current run by terminating the worker. */
  stop(outcome) {
    if (!this.current) return;
    this.worker?.terminate();
    this.worker = null;
    const wallMs = Math.round(performance.now() - this.current.startedAt);
    this.finish({ ...outcome, usage: { wallMs, memPeakMb: 0 } });
  }

  finish(outcome) {
    const run = this.current;
    this.current = null;
    clearTimeout(run.timer);
    run.cleanup();
    run.resolve(Object.fromEntries(Object.entries(outcome).filter(([, value]) => value !== undefined)));
  }
}

function timeoutOutcome(ms) {
  return {
    exitCode: EXIT_TIMEOUT,
    error: { name: "Timeout", message: `the run exceeded its time limit of ${ms} ms (policy.limits.timeoutMs) and was stopped` },
  };
}

export function cancelledOutcome() {
  return { exitCode: EXIT_CANCELLED, error: { name: "Cancelled", message: "the run was cancelled" }, usage: { wallMs: 0, memPeakMb: 0 } };
}
