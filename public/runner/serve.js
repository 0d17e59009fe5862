// The glue every runner worker starts with (see ../sandbox/frame.js for where workers come
// from). A worker serves one run. Its first message, from the frame, carries the runtime's
// assets and a private MessagePort; the glue keeps the only reference to that port (and a
// postMessage bound to it) in this module's scope and stops listening on the worker's global
// channel, all before any guest code exists. Guest code that takes over the worker's realm can
// post on the global channel, which nobody reads, but never on this port: everything the page
// hears on it was sent by this glue (Python, which holds the realm, can still call the glue's
// own functions, e.g. the wrapped filesystem: the page checks every message it hears).
//
// frame -> worker (once):     {mode: "bootstrap"|"standby", modules, files: {name: Blob}, snapshot?: Blob} + [port]
// worker -> frame (on port):  {type:"ready", snapshot?} | {type:"failed", message}
// page -> worker (once; for a context's worker, once per run, each after the last's exit):
//                             {type:"run", job}
//     job: {language, runtimeId, files: {relative path: Uint8Array}, entry, limits,
//           workspace: {absolute path: Uint8Array}   the relay session's files (lib/workspace.js)
//           workspaceLimit?: bytes                  the tenant's cap on them (64 MiB unless given)
//           filesystem: {readonly: [...], writable: [...]}}   the run's policy
//           context?: {name, fresh, idleMs}          the run is one of a context's: the worker
//                                                    keeps its interpreter for the next
// worker -> page, while the run lives:
//     {type:"stdout"|"stderr", data}
//     {type:"file", op:"write", path, data: Uint8Array}   a workspace file's whole new contents,
//         sent when it is written (JS: writeFileSync, appendFileSync, ...; Python: a file opened
//         for writing is closed); a rename is a remove then a write
//     {type:"file", op:"remove", path}                    a workspace file was deleted
//     {type:"fetch", id, request: {url, method, headers: [[name, value]], body?: Uint8Array}}
//     {type:"display", mimeType, data: string | Uint8Array}   display(): see run-relay.js
// page -> worker:
//     {type:"fetched", id, response: {status, statusText, url, headers: [[name, value]], body: ArrayBuffer}}
//     {type:"fetched", id, error: {name, message}}        name "PolicyDenied" for a denial
// worker -> page, last:       {type:"exit", exitCode, memPeakMb, error?}

import { failure, outputLimitFailure } from "../lib/errors.js";
import { OutputSink } from "../lib/output-sink.js";
import { RunRelay } from "./run-relay.js";

/**
 * @param engine {bootstrap?(assets) -> Promise<Uint8Array|undefined>, start(assets) -> Promise<{run(job, sink, relay)}>}
 *   bootstrap runs in a worker of its own that never runs a guest, and may return a memory
 *   snapshot that later workers start from (assets.snapshot).
 */
export function serve(engine) {
  self.onmessage = ({ data, ports: [port] }) => {
    self.onmessage = null;
    const send = port.postMessage.bind(port);
    boot(engine, data, port, send).catch((err) => send({ type: "failed", message: err.message }));
  };
}

async function boot(engine, { mode, modules, files, snapshot }, port, send) {
  const assets = { modules, files: await bytesOf(files), snapshot: snapshot && (await bytesOf({ snapshot })).snapshot };
  if (mode === "bootstrap") {
    const snapshot = await engine.bootstrap?.(assets);
    send({ type: "ready", snapshot }, snapshot ? [snapshot.buffer] : []);
    return;
  }
  const instance = await engine.start(assets);
  await instance.warm?.();
  let relay = null; // the current run's: its fetches
  let running = false;
  let kept = true; // only a context's worker takes another run, and only after an exit
  port.onmessage = ({ data }) => {
    if (data?.type === "run" && !running && kept) {
      running = true;
      kept = Boolean(data.job?.context);
      relay = new RunRelay(send);
      runJob(instance, data.job, send, relay)
        .then(send)
        .finally(() => (running = false));
    } else if (data?.type === "fetched" && relay) {
      relay.answer(data);
    }
  };
  send({ type: "ready" });
}

/** The Blobs the frame passed, read on this worker's thread. */
async function bytesOf(blobs) {
  const entries = await Promise.all(Object.entries(blobs).map(async ([name, blob]) => [name, new Uint8Array(await blob.arrayBuffer())]));
  return Object.fromEntries(entries);
}

/**
 * Runs `job` on an engine's instance, its output capped, and returns its `exit` message. The
 * edge executor (durable/js/edge-runner.js) calls it too, with a `guard` that stops the guest
 * (time counted as work, the relay session going away); the page stops a worker by killing it.
 */
export async function runJob(instance, job, send, relay, guard) {
  const sink = new OutputSink(job.limits.stdoutBytes, send, { overshoot: true });
  let outcome;
  try {
    outcome = await instance.run(job, sink, relay, guard);
  } catch (err) {
    outcome = failure("Internal", `the runtime failed: ${err.message}`);
  }
  const { exitCode, error } = sink.exceeded ? outputLimitFailure(job.limits.stdoutBytes) : outcome;
  return { type: "exit", exitCode, memPeakMb: Math.round(outcome.memPeakMb ?? 0), ...(error && { error }) };
}
