// The executor's Web Worker: runs capsules, one at a time, in QuickJS (js) or Pyodide (py).
// Each runtime is loaded once per worker and reused by later runs. The page enforces the wall
// clock limit and cancellation by terminating this worker (lib/runner-host.js).
//
// main -> worker: {type:"run", runId, language:"js"|"py", runtimeId, files:{relative path: Uint8Array},
//                  entry:{path, argv, env, cwd, stdin}, limits:{timeoutMs, memMb, stdoutBytes}}
// worker -> main: {type:"loading", runtimeId}      the runtime is being loaded (first use only)
//                 {type:"started", runId}          the runtime is ready, the program starts now
//                 {type:"stdout"|"stderr", runId, data}
//                 {type:"exit", runId, exitCode, usage:{wallMs, memPeakMb}, error?:{name, message}}

import { lockdown } from "./runner/lockdown.js";
import { OutputSink } from "./runner/output.js";
import { createPyodideEngine } from "./runner/pyodide.js";
import { createQuickJsEngine } from "./runner/quickjs.js";
import { loadRuntimeFiles } from "./runner/runtime-files.js";

// Which runtime family serves each language; the capsule names the exact runtime id.
const ENGINES = {
  js: { family: "quickjs", create: createQuickJsEngine },
  py: { family: "pyodide", create: createPyodideEngine },
};

lockdown();

const engines = new Map(); // runtimeId -> Promise<engine>
let queue = Promise.resolve();

self.onmessage = ({ data }) => {
  if (data.type === "run") queue = queue.then(() => run(data));
};

async function run(job) {
  const post = (message) => self.postMessage(message);
  let engine;
  try {
    engine = await engineFor(job.language, job.runtimeId, post);
  } catch (err) {
    const error = { name: err.name === "ValidationError" ? err.name : "Internal", message: err.message };
    post({ type: "exit", runId: job.runId, exitCode: 1, usage: { wallMs: 0, memPeakMb: 0 }, error });
    return;
  }
  post({ type: "started", runId: job.runId });
  const sink = new OutputSink(job.runId, job.limits.stdoutBytes, post);
  const started = performance.now();
  let outcome;
  try {
    outcome = await engine.run(job, sink);
  } catch (err) {
    // The runtime itself failed (e.g. a wasm trap): load it afresh for the next run.
    engines.delete(job.runtimeId);
    outcome = { exitCode: 1, error: { name: "Internal", message: `the runtime failed: ${err.message}` } };
  }
  const usage = { wallMs: Math.round(performance.now() - started), memPeakMb: Math.round(outcome.memPeakMb ?? 0) };
  const { exitCode, error } = sink.exceeded ? { exitCode: 1, error: sink.limitError() } : outcome;
  post({ type: "exit", runId: job.runId, exitCode, usage, ...(error && { error }) });
}

function engineFor(language, runtimeId, post) {
  const spec = ENGINES[language];
  if (!spec || !runtimeId?.startsWith(`${spec.family}@`)) {
    const error = new Error(`runtime "${runtimeId}" cannot run language "${language}"`);
    error.name = "ValidationError";
    return Promise.reject(error);
  }
  if (!engines.has(runtimeId)) {
    post({ type: "loading", runtimeId });
    const loading = loadRuntimeFiles(runtimeId).then(spec.create);
    // A failed load is not remembered: the next run tries again.
    loading.catch(() => engines.delete(runtimeId));
    engines.set(runtimeId, loading);
  }
  return engines.get(runtimeId);
}
