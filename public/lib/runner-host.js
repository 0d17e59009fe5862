// Runs one job at a time in the sandbox (lib/sandbox.js) and enforces, by the page's own clock
// and count, what guest code must not be able to talk its way out of. Each job takes a fresh
// runner worker and is posted to it over that worker's private port; from that moment the job
// has limits.timeoutMs, whatever the worker says. Output is counted here against
// limits.stdoutBytes; past the cap, or at the deadline, or on cancel, the worker is terminated.
// Every message on the port is checked for shape; anything after `exit` is never read.
//
// The run's side of the relay session's workspace and of guest fetch (protocol: runner/serve.js):
// each `file` message whose path the run's policy lets it write is handed to handlers.onFile in
// the order heard (the caller stores it, lib/workspace.js), and the run's outcome waits until
// every onFile has settled, whatever ended the run, so the next run sees the writes. Each
// `fetch` is handed to handlers.onFetch (the caller applies the network policy) and answered on
// the port while the run lives.
//
// job: {runId, language:"js"|"py", runtimeId, files:{relative path: Uint8Array},
//       entry:{path, argv, env, cwd, stdin}, limits:{timeoutMs, memMb, stdoutBytes},
//       workspace?:{absolute path: Uint8Array}, filesystem?:{readonly, writable},
//       context?:{name, fresh, idleMs}}
//
// A job in a context runs in that context's worker (lib/sandbox.js takeContext), which is kept
// when the run ends without an error (whatever its exit code) and killed, ending the context,
// when it ends with one: the relay's book follows the same rule (relay_core::run::contexts).
// usage.contextRuns says how many runs the worker had served before (0: it started here); a run
// that ends before it has the worker (its runtime, say) leaves it out, and the context as it was.

import { failure, outputLimitFailure, relayError } from "./errors.js";
import { OutputSink } from "./output-sink.js";
import { loadPolicy } from "./policy.js";
import { runtimeIds } from "./runtime-files.js";
import { MAX_FETCHES_IN_FLIGHT } from "../runner/run-relay.js";
import { Displays } from "./displays.js";
import { Sandbox } from "./sandbox.js";
import { DEFAULT_FILESYSTEM, WORKSPACE_LIMIT_BYTES, writeRefusal } from "./workspace-rules.js";

// Fetching, checking and booting a runtime the first time (Pyodide: ~10 MiB), or taking a worker
// from the sandbox, may take as long as the run itself may run, and never longer than this
// (the relay gives a tab as long: relay_core::run::session::LOAD_BUDGET_MS). No guest code runs
// meanwhile; a load that outlasts the run goes on for the next one.
const LOAD_TIMEOUT_MS = 120_000;

// Which runtime family runs each language; the capsule names the exact runtime id.
const FAMILIES = { js: "quickjs", py: "pyodide" };
// Error names a runner may report: the rest (Timeout, Cancelled, ...) are the page's to give.
const RUNNER_ERRORS = new Set(["OutputLimitExceeded", "Internal"]);
// What a runner's exit may say, bounded: Python can make these any value it likes, and the
// relay reads an exit code as a 32-bit integer.
const MAX_ERROR_MESSAGE = 2048;
const MAX_MEM_MB = 1 << 20;
// File changes the page is still storing: past either bound the run writes faster than the
// workspace can keep up (a loop rewriting a file), and is stopped. The workspace stores the
// changes waiting together (lib/workspace.js), so a run that makes 10,000 files at once stays
// well within; a change waiting costs the page well under 1 KiB besides its bytes.
const MAX_FILE_OPS_IN_FLIGHT = 1 << 16;
const MAX_FILE_BYTES_IN_FLIGHT = 2 * WORKSPACE_LIMIT_BYTES;
// Bounds on a fetch request's parts, before the caller's network policy looks at it.
const MAX_URL_LENGTH = 8192;
const MAX_HEADERS = 256;
const MAX_HEADER_BYTES = 64 * 1024;
const MAX_REQUEST_BODY_BYTES = 16 * 1024 * 1024;
// A method is any RFC 9110 token (M-SEARCH, PROPFIND, ...): the page passes it on and the
// Worker's egress route says which it performs. Anything else is the guest's mistake, answered
// with a TypeError as a browser's fetch would raise.
const METHOD_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$/;

export class RunnerHost {
  /** @param frameUrl the URL of sandbox.html */
  constructor(frameUrl) {
    this.sandbox = new Sandbox(frameUrl);
    this.sandbox.onCrash = (runId, err) => {
      if (this.current?.job.runId === runId) this.stop(crashOutcome(this.current, err));
    };
    this.current = null;
  }

  /**
   * Loads every runtime into the sandbox ahead of its first run (Pyodide takes seconds cold),
   * one after another so the first is ready soonest; a run that needs one meanwhile waits for
   * the same load. `onProgress({id: "loading" | "ready" | "failed"})` hears each change.
   * Resolves with the ids loaded; rejects with the first failure once all were tried.
   */
  async warm(onProgress = () => {}) {
    const ids = await runtimeIds();
    const states = Object.fromEntries(ids.map((id) => [id, "loading"]));
    onProgress({ ...states });
    let failure = null;
    for (const id of ids) {
      try {
        await this.sandbox.prepare(id);
        states[id] = "ready";
      } catch (err) {
        states[id] = "failed";
        failure ??= err;
      }
      onProgress({ ...states });
    }
    if (failure) throw failure;
    return ids;
  }

  /** `busy()`: whether the page has a run in hand (no context is expired while it has). */
  setBusy(busy) {
    this.sandbox.busy = busy;
  }

  /** Nothing runs and the run's results are delivered: the sandbox loads the next standby now. */
  refill() {
    if (!this.current) this.sandbox.refill();
  }

  /**
   * Runs `job`. `handlers.onLoading(runtimeId)` (the runtime is loaded for the first time),
   * `handlers.onStart()` (the job was handed to its worker) and `handlers.onOutput(stream, text)`
   * are called as things happen; an aborted `signal` cancels.
   * `handlers.onFile({op: "write", path, data: Uint8Array} | {op: "remove", path}) -> Promise`
   * stores a workspace change; calls come in the order the run made the changes and must be
   * applied in that order. A rejection cannot reach the guest (the run did not wait): it is
   * counted in usage.fileErrors and logged.
   * `handlers.onFetch({url, method, headers: [[name, value]], body?: Uint8Array})
   *   -> Promise<{status, statusText?, url?, headers?, body?} | {error: {name, message}}>`
   * fetches for the guest, or refuses (error.name "PolicyDenied"); without it every fetch is denied.
   * `handlers.onDisplay({mimeType, data: string | Uint8Array})`: guest code called display().
   * `handlers.onDenied({what: "fetch" | "write", target, reason})`: the run's policy refused
   * guest code a fetch (the caller's refusal) or a write (the runner's), for the audit.
   * @returns {Promise<{exitCode, usage:{wallMs, memPeakMb, fetches, denied, fileErrors}, error?:{name, message}}>}
   */
  run(job, { onLoading = () => {}, onStart = () => {}, onOutput = () => {}, onFile, onFetch = denyFetch, onDenied = () => {}, onDisplay = () => {}, signal } = {}) {
    if (this.current) throw new Error("RunnerHost runs one job at a time");
    if (signal?.aborted) return Promise.resolve(cancelledOutcome());
    return new Promise((resolve) => {
      const sink = new OutputSink(job.limits.stdoutBytes, ({ type, data }) => onOutput(type, data));
      const run = {
        job: { ...job, workspace: job.workspace ?? {}, filesystem: job.filesystem ?? DEFAULT_FILESYSTEM },
        sink,
        resolve,
        timer: null,
        startedAt: null,
        port: null,
        onFile: onFile ?? (() => Promise.resolve()),
        onFetch,
        onDenied,
        onDisplay,
        displays: new Displays(),
        storing: new Set(), // onFile promises not settled yet
        storingBytes: 0,
        fetching: new Set(), // ids of fetches not answered yet
        counts: { fetches: 0, denied: 0, fileErrors: 0 },
      };
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
      const loadMs = Math.min(LOAD_TIMEOUT_MS, job.limits.timeoutMs);
      this.arm(loadMs, (ms) => failure("Timeout", `loading runtime ${job.runtimeId} took longer than ${ms} ms, the run's own time limit (policy.limits.timeoutMs); it goes on loading: call again`));
      // The page's path rule (policy.wasm) judges the run's file changes: loaded once per page.
      Promise.all([this.worker(run), loadPolicy()]).then(
        ([port, policy]) => this.start(run, port, onStart, policy),
        (err) => this.current === run && this.stop(failure("Internal", err.message)),
      );
    });
  }

  /** The port of the worker `run` runs in: a fresh one, or its context's. */
  async worker(run) {
    const { runtimeId, runId, context } = run.job;
    const wanted = () => this.current === run;
    if (!context) return this.sandbox.take(runtimeId, runId, wanted);
    const { port, runs } = await this.sandbox.takeContext(runtimeId, context, runId, wanted);
    run.counts.contextRuns = runs;
    return port;
  }

  /** Hands the job to its worker; the run's own time limit starts now. */
  start(run, port, onStart, policy) {
    if (this.current !== run) return port.close(); // cancelled or timed out meanwhile
    run.port = port;
    run.policy = policy;
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
    if (type === "file") return this.onFileMessage(run, message);
    if (type === "fetch") return this.onFetchMessage(run, message);
    if (type === "denied") return this.onDeniedMessage(run, message);
    if (type === "display") return this.onDisplayMessage(run, message);
    if (type === "exit" && Number.isInteger(message.exitCode)) return this.stop(exitOutcome(message));
    this.stop(crashedOutcome(`it sent a message the page does not accept (${JSON.stringify(type)})`));
  }

  /** A workspace change: checked (shape, path, the run's policy), then stored by the caller. */
  onFileMessage(run, { op, path, data }) {
    const problem = fileProblem(run, op, path, data);
    if (problem) return this.stop(crashedOutcome(`it sent a file change the page refuses: ${problem}`));
    const bytes = op === "write" ? data.byteLength : 0;
    if (run.storing.size >= MAX_FILE_OPS_IN_FLIGHT || run.storingBytes + bytes > MAX_FILE_BYTES_IN_FLIGHT) {
      const message = `the run changed files faster than the workspace can store them (over ${MAX_FILE_OPS_IN_FLIGHT} changes or ${MAX_FILE_BYTES_IN_FLIGHT} bytes waiting); write fewer, larger files`;
      return this.stop(failure("OutputLimitExceeded", message));
    }
    run.storingBytes += bytes;
    const stored = Promise.resolve()
      .then(() => run.onFile(op === "write" ? { op, path, data } : { op, path }))
      .catch((err) => {
        run.counts.fileErrors++;
        console.warn(`relay-mcp: ${op} of workspace file ${path} failed: ${err.name}: ${err.message}`);
      })
      .finally(() => {
        run.storing.delete(stored);
        run.storingBytes -= bytes;
      });
    run.storing.add(stored);
  }

  /** A guest fetch: checked, handed to the caller, answered on the port while the run lives. */
  onFetchMessage(run, { id, request }) {
    const problem = fetchProblem(request);
    if (!Number.isSafeInteger(id) || run.fetching.has(id) || problem) {
      return this.stop(crashedOutcome(`it sent a fetch the page refuses: ${problem ?? `bad id ${JSON.stringify(id)}`}`));
    }
    const answer = (reply) => {
      run.fetching.delete(id);
      if (this.current !== run) return;
      if (reply.error?.name === "PolicyDenied") {
        run.counts.denied++;
        run.onDenied({ what: "fetch", target: request.url, reason: reply.error.message });
      }
      const body = reply.response?.body;
      run.port.postMessage({ type: "fetched", id, ...reply }, body ? [body] : []);
    };
    if (!METHOD_TOKEN.test(request.method)) {
      return answer({ error: { name: "TypeError", message: `${JSON.stringify(request.method.slice(0, 80))} is not a valid HTTP method (RFC 9110: a token of letters, digits and !#$%&'*+-.^_\`|~)` } });
    }
    run.counts.fetches++;
    if (run.fetching.size >= MAX_FETCHES_IN_FLIGHT) {
      return answer({ error: relayError("TooManyRequests", `at most ${MAX_FETCHES_IN_FLIGHT} fetches may wait at once; await some before starting more`) });
    }
    run.fetching.add(id);
    const { url, method, headers, body } = request;
    Promise.resolve()
      .then(() => run.onFetch({ url, method, headers, ...(body && { body }) }))
      .then(fetchReply, (err) => ({ error: { name: String(err?.name ?? "Error"), message: String(err?.message ?? err) } }))
      .then(answer);
  }

  /** A display(): its type one the relay shows, its data of the right kind, within the bounds. */
  onDisplayMessage(run, { mimeType, data }) {
    const { refused, stop } = run.displays.add({ mimeType, data });
    if (refused) {
      // A refusal is output too: past the cap it ends the run as the guest's own output does.
      if (!run.sink.write("stderr", refused)) this.stop(outputLimitFailure(run.sink.limitBytes));
      return;
    }
    if (stop) return this.stop(stop);
    run.onDisplay({ mimeType, data });
  }

  /** A write the runner refused by the run's policy (the guest got PolicyDenied already). */
  onDeniedMessage(run, { what, target, reason }) {
    if (what !== "write" || typeof target !== "string" || typeof reason !== "string") {
      return this.stop(crashedOutcome("it sent a denial the page does not accept"));
    }
    run.counts.denied++;
    run.onDenied({ what, target: target.slice(0, MAX_URL_LENGTH), reason: reason.slice(0, MAX_ERROR_MESSAGE) });
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
    if (run.job.context && run.port && !outcome.error) {
      run.port.onmessage = null; // what the context's worker says between runs is never read
      this.sandbox.release(run.job.runId);
    } else {
      run.port?.close();
      this.sandbox.kill(run.job.runId);
    }
    const wallMs = run.startedAt === null ? 0 : Math.round(performance.now() - run.startedAt);
    // The workspace changes heard before the end are stored before the outcome is told.
    Promise.allSettled(run.storing).then(() => {
      const usage = { wallMs, memPeakMb: outcome.memPeakMb ?? 0, ...run.counts };
      run.resolve({ exitCode: outcome.exitCode, usage, ...(outcome.error && { error: outcome.error }) });
    });
  }
}

/** Why a `file` message cannot be applied, or null: the runner applies the same rule first. */
function fileProblem({ policy, job }, op, path, data) {
  if (op !== "write" && op !== "remove") return `unknown op ${JSON.stringify(op)}`;
  if (typeof path !== "string") return `the path ${JSON.stringify(path)} is not a string`;
  const denied = writeRefusal(policy, job.filesystem, path);
  if (denied) return denied;
  if (op === "write" && !(data instanceof Uint8Array)) return `the contents of ${path} are not a Uint8Array`;
  return null;
}

/** Why a fetch request is malformed, or null. */
function fetchProblem(request) {
  const { url, method, headers, body } = request ?? {};
  if (typeof url !== "string" || url.length > MAX_URL_LENGTH) return `the url must be a string of at most ${MAX_URL_LENGTH} characters`;
  if (typeof method !== "string") return "the method is not a string";
  if (!Array.isArray(headers) || headers.length > MAX_HEADERS) return `headers must be at most ${MAX_HEADERS} [name, value] pairs`;
  let size = 0;
  for (const pair of headers) {
    if (!Array.isArray(pair) || pair.length !== 2 || typeof pair[0] !== "string" || typeof pair[1] !== "string") return "a header is not a [name, value] pair of strings";
    size += pair[0].length + pair[1].length;
  }
  if (size > MAX_HEADER_BYTES) return `headers exceed ${MAX_HEADER_BYTES} characters`;
  if (body !== undefined && !(body instanceof Uint8Array && body.byteLength <= MAX_REQUEST_BODY_BYTES)) {
    return `the body must be a Uint8Array of at most ${MAX_REQUEST_BODY_BYTES} bytes`;
  }
  return null;
}

/** The caller's answer to a fetch, as the port carries it: {response} with an ArrayBuffer body, or {error}. */
function fetchReply(reply) {
  if (reply?.error) return { error: { name: String(reply.error.name), message: String(reply.error.message ?? "").slice(0, MAX_ERROR_MESSAGE) } };
  const { status, statusText = "", url = "", headers = [], body } = reply ?? {};
  if (!Number.isInteger(status) || status < 200 || status > 599) {
    return { error: { name: "TypeError", message: `the fetch was answered with an invalid status ${status}` } };
  }
  const bytes = body === undefined ? new Uint8Array(0) : body instanceof ArrayBuffer ? new Uint8Array(body) : new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
  return {
    response: {
      status,
      statusText: String(statusText),
      url: String(url),
      headers: [...headers].map(([name, value]) => [String(name), String(value)]),
      body: bytes.slice().buffer, // a copy the port can transfer
    },
  };
}

function denyFetch({ url }) {
  return { error: { name: "PolicyDenied", message: `fetch of ${url} refused: this page gives guest code no network` } };
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

/** Run `run`'s worker died: its frame with it (RuntimeCrashed), or of an error the frame saw. */
function crashOutcome(run, err) {
  if (err.name !== "RuntimeCrashed") return crashedOutcome(err.message);
  const after = run.startedAt === null ? "before it started" : `after ${Math.round(performance.now() - run.startedAt)} ms`;
  const message = `${run.job.runtimeId} crashed ${after}, most likely out of memory: ${err.message}; the tab serves the next call in a new sandbox. The same code will crash it again: use less memory`;
  return failure("RuntimeCrashed", message);
}

function timeoutOutcome(ms) {
  return failure("Timeout", `the run exceeded its time limit of ${ms} ms (policy.limits.timeoutMs) and was stopped`);
}

export function cancelledOutcome() {
  return { ...failure("Cancelled", "the run was cancelled"), usage: { wallMs: 0, memPeakMb: 0, fetches: 0, denied: 0, fileErrors: 0 } };
}
