// The glue every runner worker starts with (see ../sandbox/frame.js for where workers come
// from). A worker serves one run. Its first message, from the frame, carries the runtime's
// assets and a private MessagePort; the glue keeps the only reference to that port (and a
// postMessage bound to it) in this module's scope and stops listening on the worker's global
// channel, all before any guest code exists. Guest code that takes over the worker's realm can
// post on the global channel, which nobody reads, but never on this port: everything the page
// hears on it was sent by this glue.
//
// frame -> worker (once):     {mode: "bootstrap"|"standby", modules, files: {name: Blob}, snapshot?: Blob} + [port]
// worker -> frame (on port):  {type:"ready", snapshot?} | {type:"failed", message}
// page -> worker (once):      {type:"run", job}   job: {language, runtimeId, files, entry, limits}
// worker -> page:             {type:"stdout"|"stderr", data}... then {type:"exit", exitCode, memPeakMb, error?}

import { failure, outputLimitFailure } from "../lib/errors.js";
import { OutputSink } from "../lib/output-sink.js";

/**
 * @param engine {bootstrap?(assets) -> Promise<Uint8Array|undefined>, start(assets) -> Promise<{run(job, sink)}>}
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
  port.onmessage = ({ data }) => {
    port.onmessage = null; // one run, then this worker is done
    if (data?.type === "run") run(instance, data.job, send);
  };
  send({ type: "ready" });
}

/** The Blobs the frame passed, read on this worker's thread. */
async function bytesOf(blobs) {
  const entries = await Promise.all(Object.entries(blobs).map(async ([name, blob]) => [name, new Uint8Array(await blob.arrayBuffer())]));
  return Object.fromEntries(entries);
}

async function run(instance, job, send) {
  const sink = new OutputSink(job.limits.stdoutBytes, send);
  let outcome;
  try {
    outcome = await instance.run(job, sink);
  } catch (err) {
    outcome = failure("Internal", `the runtime failed: ${err.message}`);
  }
  const { exitCode, error } = sink.exceeded ? outputLimitFailure(job.limits.stdoutBytes) : outcome;
  send({ type: "exit", exitCode, memPeakMb: Math.round(outcome.memPeakMb ?? 0), ...(error && { error }) });
}
