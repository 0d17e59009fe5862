// The edge executor's runner (issue 27), shared by its two main modules: edge-runner.js
// (QuickJS, for run_js) and edge-runner-pyodide.js (Pyodide, for run_py). Each is the main module
// of the fresh dynamic Worker each edge run gets (entry.mjs loads it, with globalOutbound null: no
// fetch, no connect). It runs the page's own code, not a copy: the capsule is checked by
// lib/capsule.js (signature, layer hashes, unzip) as a tab checks it, the engine (the page's
// runner/quickjs.js or runner/pyodide.js) runs it, serve.js's runJob caps its output. Around the
// run it does what the page's RunQueue and RunnerHost do, over this isolate's single `fetch`,
// which goes to the host entrypoint scoped to this run that run() is given (entry.mjs's
// EdgeHost), which adds the run's token (this isolate never holds it) and lets through only the run token's
// routes. So guest fetches go through lib/egress.js (the policy checked here, then by /egress,
// redirects re-checked there), `mcps.call` through /mcps-rpc, and workspace writes through
// lib/workspace-sync.js's RunWriter to /workspace/commit as they are made, all checked by the
// Worker as a tab's are. Once the run ends, its display()s (lib/displays.js: checked and bounded
// as the page does) go inline or to /out, and its /out files are uploaded (lib/out-files.js, PUT
// /files/<run>/out/...), as a tab's.
//
// Limits, enforced here because wrangler dev enforces none on dynamic workers (a busy loop
// freezes all of workerd): time by a work budget the engine counts down (QuickJS's interrupt
// handler, CPython's signal reads; the clock stands still during CPU work in production; it is
// read too, for where it moves) and a timer for a guest that only waits; memory by the engine's
// heap cap (at most EDGE_MEM_MB) and, for what the runner holds for the run outside that heap
// (writes not yet committed, events not yet sent, fetches in flight), HELD_MAX_BYTES; output by
// the tab's cap. Production's limits.cpuMs on this isolate is a second wall.
//
// An RPC entrypoint (entry.mjs calls it): run(job, host) -> a Response of NDJSON events, one a
// line, as a tab's backchannel carries them ({runId, seq, type, ...}: progress, stdout, stderr,
// denied, exit). A reader that goes away (the relay session cancelled the run) stops the guest.
// prepare() readies the isolate's engine before its run is known and take() claims the isolate
// for the run to come (a standby's: see `isolate` below).
// POST /snapshot (an engine that makes one: Pyodide) -> the engine's memory snapshot, made in
// this fresh isolate before any guest code exists.

import { WorkerEntrypoint } from "cloudflare:workers";
import { fromBase64 } from "../../public/lib/bytes.js";
import { loadCapsule, runnerJob } from "../../public/lib/capsule.js";
import { Displays, storeDisplays } from "../../public/lib/displays.js";
import { MCPS_RPC, guardedFetch, mcpsRpc } from "../../public/lib/egress.js";
import { failure, outputLimitFailure } from "../../public/lib/errors.js";
import { exitEvent } from "../../public/lib/exit-event.js";
import { KeyRing } from "../../public/lib/jws.js";
import { OutputSink } from "../../public/lib/output-sink.js";
import { notStored, uploadOutFiles } from "../../public/lib/out-files.js";
import { notKept, RunWriter } from "../../public/lib/workspace-sync.js";
import { RunRelay } from "../../public/runner/run-relay.js";
import { runJob } from "../../public/runner/serve.js";
import { runnerPolicy } from "../../public/runner/write-rule.js";

// The engine's heap at the edge: the isolate has 128 MB in production, the workspace copy and the
// runner's own memory beside it.
const EDGE_MEM_MB = 64;
// What the runner may hold for a run outside QuickJS's heap, where no memory limit counts it
// (a loop rewriting a big file, denied writes of long paths, fetches never awaited, while the
// guest keeps the isolate busy): past it the run ends as a tab's that ran out of memory.
const HELD_MAX_BYTES = 16 << 20;
// relay-core's DENIALS_AUDITED: the denials of a run sent as events; the rest are only counted.
const DENIALS_AUDITED = 16;
// relay-core's EDGE_LOAD_MS: how long a run's engine may take to start before its timeout counts.
const EDGE_LOAD_MS = 30_000;
// A denied event's target, at most (characters).
const DENIED_TARGET_CHARS = 1024;
const encoder = new TextEncoder();
// Output waiting to be sent as one event, at most (characters).
const OUTPUT_CHUNK = 16 * 1024;
// The page's code resolves paths against its location; here every path is a host route.
const ORIGIN = "https://relay.invalid";
globalThis.location = new URL(`${ORIGIN}/`);

/**
 * The dynamic Worker's default export for an engine: `modules` (the engine's wasm and policy.wasm,
 * by the names the page's runners use), `start(memMb)` making the engine's instance (made once
 * per isolate, at the edge's cap: a run that asks for less gets an instance of its own cap from
 * it), `ticksPerMs` (units of the engine's work counter a millisecond of guest work is worth,
 * measured under wrangler dev: docs/BENCHMARKS.md), and `snapshot()` if the engine makes a memory
 * snapshot to start from.
 */
export function edgeRunner(engine) {
  return class EdgeRunner extends WorkerEntrypoint {
    async fetch(request) {
      if (new URL(request.url).pathname === "/snapshot" && engine.snapshot) return new Response(await engine.snapshot());
      return new Response("this runner serves run() over RPC, and POST /snapshot if its engine makes one", { status: 404 });
    }

    /** Readies this isolate's engine for the run to come; the isolate's id. */
    async prepare() {
      await engineInstance(engine);
      return isolateId();
    }

    /**
     * Claims this isolate for the one run() to come, before its job is sent (a standby's): the
     * isolate's id, or an error once it is claimed or has run. Whoever holds a standby sends a job
     * only after this answered, so a failure up to here provably ran nothing (entry.mjs).
     */
    take() {
      if (isolate.taken) throw new Error(`edge isolate ${isolateId()} is taken by a run already`);
      isolate.taken = true;
      return isolateId();
    }

    /** Runs `job`; `host` is the run's host entrypoint, the isolate's one way out (see the header). */
    run(job, host) {
      const events = new EventStream(job.announced.runId);
      const response = new Response(events.readable, { headers: { "content-type": "application/x-ndjson" } });
      if (isolate.ran) {
        events.end(failure("Internal", `edge isolate ${isolateId()} has run a run already, and serves one only: run the tool again`));
        return response;
      }
      isolate.ran = isolate.taken = true;
      const prepared = isolate.engine !== null;
      globalThis.fetch = (input, init) => host.fetch(new Request(new URL(input, ORIGIN), init));
      this.ctx.waitUntil(execute(job, events, engine, prepared).catch((err) => events.end(failure("Internal", `the edge runner failed: ${err.message}`))));
      return response;
    }
  };
}

// This isolate and its one run. It may be a standby (entry.mjs): loaded, and its engine started
// by prepare() before its run is known; so nothing of a run is in its env, and the job and the
// run's host entrypoint come as run()'s arguments. It serves one run and refuses a second, so no
// run ever sees what another left. Its random id goes with the run's execute progress (with
// whether it was prepared before the run), so tests and benchmarks can tell isolates apart.
const isolate = { id: null, engine: null, taken: false, ran: false };

function isolateId() {
  isolate.id ??= crypto.randomUUID().slice(0, 8);
  return isolate.id;
}

/** This isolate's engine instance, started once, at the edge's cap (a failed start is not kept). */
function engineInstance(engine) {
  isolate.engine ??= engine.start(EDGE_MEM_MB).catch((err) => {
    isolate.engine = null;
    throw err;
  });
  return isolate.engine;
}

// Why a run whose events no one reads any more ends: the relay session dropped its stream.
const STOPPED = ["Cancelled", "the relay session stopped the run"];

/** The run's events as NDJSON, numbered as a tab numbers them. */
class EventStream {
  constructor(runId) {
    const { readable, writable } = new TransformStream();
    this.readable = readable;
    this.writer = writable.getWriter();
    this.runId = runId;
    this.seq = 0;
    this.unsentBytes = 0; // written to the stream and not yet taken by its reader
    this.guard = null; // stopped when no one reads any more
    this.unread = false; // no one reads any more
    this.writer.closed.catch(() => {
      this.unread = true;
      this.guard?.stop(...STOPPED);
    });
  }

  /** `guard` is the run's: stopped when no one reads, at once if no one reads already. */
  watch(guard) {
    this.guard = guard;
    if (this.unread) guard.stop(...STOPPED);
  }

  /**
   * Output is merged into one event per stream while it comes back to back, sent once
   * OUTPUT_CHUNK bytes wait or another event comes (a flood of short lines would otherwise be
   * an event each for the relay session to apply and forward); a timer sends what waits while
   * the guest waits.
   */
  output(type, data) {
    if (this.waiting?.type !== type) this.flush();
    this.waiting ??= { type, data: "" };
    this.waiting.data += data;
    if (this.waiting.data.length >= OUTPUT_CHUNK) this.flush();
    else this.timer ??= setTimeout(() => this.flush());
  }

  flush() {
    clearTimeout(this.timer);
    this.timer = null;
    const waiting = this.waiting;
    this.waiting = null;
    if (waiting) this.send(waiting);
  }

  emit(event) {
    this.flush();
    this.send(event);
  }

  send(event) {
    const bytes = encoder.encode(`${JSON.stringify({ runId: this.runId, seq: this.seq++, ...event })}\n`);
    this.unsentBytes += bytes.length;
    this.writer
      .write(bytes)
      .catch(() => {})
      .finally(() => (this.unsentBytes -= bytes.length));
  }

  end(outcome, usage = { wallMs: 0, memPeakMb: 0 }) {
    this.emit(exitEvent({ ...outcome, usage }));
    this.writer.close().catch(() => {});
  }
}

/**
 * What stops a run at the edge: a work budget the interrupt handler counts down, the wall
 * timer, or the relay session going away. `error` is set once, and the run ends with it.
 */
class Guard {
  constructor(timeoutMs, ticksPerMs) {
    this.timeoutMs = timeoutMs;
    this.ticksPerMs = ticksPerMs;
    this.error = null;
    this.onStop = () => {};
    this.timedOut = { name: "Timeout", message: `the run did not finish within its ${timeoutMs} ms timeout (policy.limits.timeoutMs); it was stopped` };
    // Until the engine has started (Pyodide's restore: 0.3-1.3 s), the start's own bound.
    this.arm(EDGE_LOAD_MS, { name: "Timeout", message: `the engine did not start within ${EDGE_LOAD_MS} ms; the run was stopped before its code ran. Run it again, or in a tab` });
  }

  /** Starts the run's timeout (budget, timer, deadline) now, once the engine has started: the guest gets all of it. */
  begin() {
    this.arm(this.timeoutMs, this.timedOut);
  }

  arm(ms, error) {
    clearTimeout(this.timer);
    this.left = ms * this.ticksPerMs;
    this.timer = setTimeout(() => this.stop(error.name, error.message), ms);
    this.deadline = Date.now() + ms;
  }

  /**
   * One interrupt-handler call of guest work: true once the run must stop. Called inside
   * QuickJS, so it only marks the run stopped: the interrupted guest unwinds and the run ends.
   */
  tick() {
    return this.spend(1);
  }

  /**
   * `ticks` of work spent (a host call's bytes; 0 just checks): true once the run must stop.
   * The clock as well, where it moves during CPU work (wrangler dev): a loop whose body is
   * heavy between two calls (figures in docs/BENCHMARKS.md) stops at its timeout, not a few
   * times later. In production the clock stands still while the guest computes, so the count
   * alone holds there, with limits.cpuMs behind it.
   */
  spend(ticks) {
    this.left -= ticks;
    if ((this.left <= 0 || Date.now() >= this.deadline) && !this.error) {
      clearTimeout(this.timer);
      this.error = this.timedOut;
    }
    return this.error !== null;
  }

  /**
   * Stops the run from a call the guest made (it is inside QuickJS): a busy guest stops at the
   * interrupt handler's next call, one that waits once the host's current work is done.
   */
  stopSoon(name, message) {
    if (this.error) return;
    clearTimeout(this.timer);
    this.error = { name, message };
    setTimeout(() => this.onStop());
  }

  /** Stops the run from outside QuickJS (a timer, the stream): it ends at once. */
  stop(name, message) {
    if (this.error) return;
    clearTimeout(this.timer);
    this.error = { name, message };
    this.onStop();
  }
}

/** Runs `job` in this isolate; `prepared`: whether its engine was started before the run came. */
async function execute(job, events, engine, prepared) {
  const started = Date.now();
  const { announced } = job;
  let capsule;
  try {
    capsule = await loadCapsule(announced, new KeyRing(async () => job.keys));
  } catch (err) {
    const name = err.name === "ValidationError" ? "ValidationError" : "Internal";
    return events.end(failure(name, `capsule ${announced.hash} refused: ${err.message}`));
  }
  const workspace = Object.fromEntries(Object.entries(job.workspace).map(([path, data]) => [path, fromBase64(data)]));
  const runnerJobOf = runnerJob(announced.runId, capsule, workspace, job.workspaceLimit);
  runnerJobOf.limits = { ...runnerJobOf.limits, memMb: Math.min(runnerJobOf.limits.memMb, EDGE_MEM_MB) };
  const guard = new Guard(runnerJobOf.limits.timeoutMs, engine.ticksPerMs);
  events.watch(guard); // the relay session may have stopped the run while its capsule loaded
  if (guard.error) return events.end(failure(guard.error.name, guard.error.message));
  const host = new EdgeHost(capsule.manifest.policy, runnerPolicy(engine.modules), events, guard, runnerJobOf.limits.stdoutBytes);
  events.emit({ type: "progress", phase: "execute", detail: `isolate ${isolateId()}, ${prepared ? "prepared before the run" : "started for it"}` });
  // A stop while the engine starts (its timeout, the relay session leaving) ends the run then:
  // a start that never settles would otherwise hold it until the relay session's deadline (the
  // run's pending timer keeps workerd from taking such an isolate for hung).
  const instance = await Promise.race([engineInstance(engine), new Promise((resolve) => (guard.onStop = () => resolve(null)))]);
  if (!instance) return events.end(failure(guard.error.name, guard.error.message));
  guard.begin();
  const exit = await runJob(instance, runnerJobOf, (message) => host.hear(message), host.relay, guard);
  // As the page does: displays inline or in /out, what the run left in /out uploaded and listed.
  const displays = await storeDisplays(announced.runId, host.displays.shown, async (path, data) => {
    if (!host.file({ op: "write", path, data })) throw new Error(`the run's policy refuses writing ${path}`);
  });
  const kept = await host.writer.done();
  const { refused, failure: lost } = kept;
  const published = await uploadOutFiles({ read: (path) => host.outFiles.get(path) }, [...host.outFiles.keys()], { runId: announced.runId, runToken: "" });
  // What was not stored, and why, goes to the agent (the run's stderr), as a tab's does.
  const unsaved = notKept(kept) + notStored(published);
  if (unsaved) events.emit({ type: "stderr", data: unsaved });
  const usage = { wallMs: Date.now() - started, memPeakMb: exit.memPeakMb, ...host.counts, fileErrors: refused.length + (lost ? 1 : 0) };
  events.end({ exitCode: exit.exitCode, error: exit.error, files: published.files, displays }, usage);
}

/** What the page does for a run, at the edge: output to the events, writes and fetches to the Worker. */
class EdgeHost {
  constructor(policy, checks, events, guard, stdoutBytes) {
    this.policy = policy;
    // Output counted again here, as the page counts it: the runner's own count covers the
    // guest's writes, not the lines this host adds (a refused display's).
    this.output = new OutputSink(stdoutBytes, ({ type, data }) => events.output(type, data));
    this.checks = checks;
    this.events = events;
    this.guard = guard;
    this.fetchBytes = 0; // the requests of the fetches in flight
    this.relay = new RunRelay((message) => this.hear(message));
    // The run token is the host entrypoint's to add: "" here.
    this.writer = new RunWriter({ hashes: new Map(), version: null }, "");
    // Each /out file the run left, by path: the runner's own bytes (no copy), for the upload.
    this.outFiles = new Map();
    this.counts = { fetches: 0, denied: 0 };
    this.displays = new Displays();
  }

  /** A message of the runner (serve.js's protocol). */
  hear(message) {
    switch (message.type) {
      case "stdout":
      case "stderr":
        this.write(message.type, message.data);
        break;
      case "denied":
        this.denied(message.what, message.target, message.reason);
        break;
      case "file":
        this.file(message);
        break;
      case "fetch":
        this.fetch(message);
        break;
      case "display":
        this.display(message);
        break;
    }
    this.holdAtMost();
  }

  /** Stops the run once it makes the runner hold more than HELD_MAX_BYTES outside QuickJS. */
  holdAtMost() {
    const held = this.writer.heldBytes + this.events.unsentBytes + this.fetchBytes;
    if (held <= HELD_MAX_BYTES) return;
    const what = `${this.writer.heldBytes} bytes of files written, ${this.events.unsentBytes} of events, ${this.fetchBytes} of fetches`;
    const message = `out of memory: the run made the runner hold more than ${HELD_MAX_BYTES >> 20} MiB outside its JavaScript heap (${what}, none yet sent); it was stopped. Write a file once rather than again and again, await each fetch, stop at a refused write; or run it in a tab`;
    this.guard.stopSoon("RuntimeCrashed", message);
  }

  /** Refused guest code `what` of `target`: the first DENIALS_AUDITED are events, all are counted. */
  denied(what, target, reason) {
    if (++this.counts.denied > DENIALS_AUDITED) return;
    const shown = target.length > DENIED_TARGET_CHARS ? `${target.slice(0, DENIED_TARGET_CHARS)}…` : target;
    this.events.emit({ type: "denied", what, target: shown, reason });
  }

  /** Output to the events, within the run's cap: past it the run ends OutputLimitExceeded. */
  write(stream, text) {
    if (this.output.write(stream, text)) return;
    const { error } = outputLimitFailure(this.output.limitBytes);
    this.guard.stopSoon(error.name, error.message);
  }

  /** A display(), checked and kept as the page does (lib/displays.js). */
  display(message) {
    const { refused, stop } = this.displays.add(message);
    if (refused) this.write("stderr", refused);
    if (stop) this.guard.stopSoon(stop.error.name, stop.error.message);
  }

  /** A workspace change, checked by the run's policy as the page checks it, then committed: whether it was. */
  file({ op, path, data }) {
    const verdict = this.checks.checkPath(this.policy.filesystem, path, "write");
    if (!verdict.allow) return false;
    const bytes = op === "remove" ? null : data;
    this.writer.push(verdict.path, bytes);
    if (!verdict.path.startsWith("/out/")) return true;
    if (bytes) this.outFiles.set(verdict.path, bytes);
    else this.outFiles.delete(verdict.path);
    return true;
  }

  async fetch({ id, request }) {
    this.counts.fetches++;
    const network = this.policy.network;
    const held = request.url.length + (request.body?.byteLength ?? 0);
    this.fetchBytes += held;
    const reply = await (request.url === MCPS_RPC
      ? mcpsRpc({ runToken: "", request })
      : guardedFetch({ policy: this.checks, network, runToken: "", request })
    ).finally(() => (this.fetchBytes -= held));
    if (reply.error?.name === "PolicyDenied") this.denied("fetch", request.url, reply.error.message);
    this.relay.answer(reply.error ? { id, error: reply.error } : { id, response: reply });
  }
}
