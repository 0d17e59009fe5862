// Runs Python capsules in Pyodide. Its JS glue (pyodide.mjs, pyodide.asm.mjs) is bundled into
// the runner worker; the sandbox frame hands over the wasm compiled once, the standard library
// and the lock file. A first worker, before any guest exists, boots the interpreter once and
// returns a memory snapshot (bootstrap); every later worker starts from that snapshot in a
// fraction of the time, serves one run, and is thrown away.
//
// Python's `js` module is an object holding only what asyncio and pyodide.http.pyfetch need:
// timers, fetch (sent to the page over the run's port, answered with a Response built here),
// Request, AbortController, AbortSignal, Object. That is a convenience, not the wall: Pyodide's
// FFI (pyodide_js, pyodide.ffi, ctypes into emscripten) reaches the worker's realm anyway, and
// the realm is what is sealed (see ../sandbox/frame.js).
//
// The relay session's workspace is written into the interpreter's filesystem before the guest
// runs, and changes to it go to the page as they happen (python-files.js).

import { loadPyodide } from "pyodide/pyodide.mjs";
import { failure, outputLimitFailure } from "../lib/errors.js";
import createPyodideModule from "pyodide/pyodide.asm.mjs";
import { inWorkspace } from "../lib/workspace-rules.js";
import { clearWorkspace, loadWorkspace, writeThrough } from "./python-files.js";
import { SignalCounter } from "./python-limits.js";
import { WriteRule, runnerPolicy } from "./write-rule.js";
import relayRunSource from "./relay_run.py";
import { MCPS_RPC } from "../lib/egress.js";
import { RunRelay } from "./run-relay.js";

const MiB = 1024 * 1024;
const WASM_FILE = "pyodide.asm.wasm";
// Where Pyodide thinks its files live; every request for them is answered from memory.
const INDEX_URL = "https://runtime.invalid/pyodide/";
// Statuses a Response cannot have a body with.
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

const SNAPSHOT_IMPORTS = "import urllib.request, urllib.response, urllib.error, email.message";

// The run this worker serves, once it has started: where guest fetches go.
let activeRelay = null;

export const pyodideEngine = {
  async bootstrap(assets) {
    const pyodide = await load(assets, { _makeSnapshot: true });
    // Stdlib modules relay_run.py imports that are slow to import (urllib.request: about 270 ms
    // of a standby's start) go into the snapshot, so no standby pays for them again.
    pyodide.runPython(SNAPSHOT_IMPORTS);
    return pyodide.makeMemorySnapshot();
  },

  async start(assets) {
    const pyodide = await load(assets, assets.snapshot ? { _loadSnapshot: assets.snapshot } : {});
    pyodide.runPython(relayRunSource);
    pyodide.runPython("relay_warm()");
    const relayRun = pyodide.globals.get("relay_run");
    const policy = runnerPolicy(assets.modules);
    let unwrap = null; // a context's last run's write-through, undone before its next run
    return {
      /** The tab's standby only (serve.js): see warmRun. */
      warm: () => warmRun(pyodide, relayRun, policy),
      /** `guard`: at the edge only (durable/js/edge-runner-pyodide.js), see guarded(). */
      async run(job, sink, relay, guard) {
        const rule = new WriteRule(policy, job.filesystem, relay, job.workspaceLimit);
        if (unwrap) {
          unwrap();
          clearWorkspace(pyodide.FS);
        }
        const running = () => runCapsule(pyodide, relayRun, { job, sink, relay, rule, guard });
        const { exitCode, unwrapped } = guard ? await guarded(pyodide, guard, job.limits.memMb, running) : await running();
        if (job.context) unwrap = unwrapped;
        // The interpreter's whole wasm heap: it only grows, so this is the run's peak.
        const memPeakMb = pyodide._module.HEAPU8.buffer.byteLength / MiB;
        return guard?.error ? { ...failure(guard.error.name, guard.error.message), memPeakMb } : { exitCode, memPeakMb };
      },
    };
  },
};

/**
 * Runs `running()` at the edge, where nothing else stops a busy interpreter (wrangler dev
 * enforces no limit on a dynamic worker: a runaway freezes all of workerd): each of CPython's
 * signal reads spends work on the `guard` (edge-serve.js's Guard: a budget of ticks, the clock
 * where it moves), which answers KeyboardInterrupt once the run must stop and halts the
 * interpreter a little later (python-limits.js); a stop from outside (the guard's timer, the
 * relay session leaving) halts it at its next read and ends the run now. The wasm heap is
 * capped at `memMb` (the patched getHeapMax): past it Python raises MemoryError.
 */
async function guarded(pyodide, guard, memMb, running) {
  globalThis.relayHeapMax = memMb * MiB;
  seal(pyodide);
  const counter = new SignalCounter(pyodide._module, (ticks) => guard.spend(ticks));
  // Sets CPython's flag that it has a buffer to read; the patched helper reads this one, out of
  // the guest's reach (Module.Py_EmscriptenSignalBuffer, were the Module reached, is not read).
  globalThis.relaySignalBuffer = counter.buffer();
  pyodide.setInterruptBuffer(globalThis.relaySignalBuffer);
  guard.onStop = () => counter.haltSoon();
  try {
    return await Promise.race([running(), counter.stopped]);
  } catch (err) {
    // A halted interpreter: the guard says why (its error), and the isolate is thrown away.
    if (err?.relayHardStop || guard.error) return { exitCode: 1, unwrapped: () => {} };
    throw err;
  }
}

/**
 * Takes Pyodide's JavaScript API (pyodide_js: the Module, its heap, its FS, setInterruptBuffer)
 * from the guest's reach before it runs, and the edge's other walls (relay_run.py's relay_seal).
 * The edge only: a tab's worker is its own thread, stopped from outside.
 */
function seal(pyodide) {
  pyodide.unregisterJsModule("pyodide_js");
  pyodide.runPython("relay_seal()");
}

async function load({ modules, files }, options) {
  const wasmModule = modules[WASM_FILE];
  if (!wasmModule) throw new Error(`Pyodide needs ${WASM_FILE}`);
  // Bound: Pyodide calls them as methods of the `js` object.
  const timers = Object.fromEntries(["setTimeout", "clearTimeout", "setInterval", "clearInterval"].map((name) => [name, self[name].bind(self)]));
  const { AbortController, AbortSignal, Object: JsObject } = self;
  const fetchApi = { fetch: guestFetch, Request: GuestRequest, AbortController, AbortSignal, Object: JsObject };
  return withAssets(wasmModule, files, () =>
    loadPyodide({
      indexURL: INDEX_URL,
      lockFileContents: new TextDecoder().decode(files["pyodide-lock.json"]),
      createPyodideModule,
      jsglobals: Object.freeze(Object.assign(Object.create(null), timers, fetchApi)),
      ...options,
    }),
  );
}

/**
 * Runs `load` while Pyodide's two requests for its files are answered from memory: fetch() of
 * a file under INDEX_URL, and instantiating pyodide.asm.wasm, which uses the compiled module.
 */
async function withAssets(wasmModule, files, load) {
  const { fetch, WebAssembly: wasm } = self;
  const instantiateStreaming = wasm.instantiateStreaming;
  self.fetch = async (input) => {
    const name = String(input).startsWith(INDEX_URL) ? String(input).slice(INDEX_URL.length) : null;
    if (name === WASM_FILE) return new Response(new Uint8Array(0), { headers: { "content-type": "application/wasm" } });
    if (files[name]) return new Response(files[name]);
    throw new TypeError(`the runner has no network: ${input}`);
  };
  wasm.instantiateStreaming = async (_response, imports) => ({
    instance: await wasm.instantiate(wasmModule, imports),
    module: wasmModule,
  });
  try {
    return await load();
  } finally {
    self.fetch = fetch;
    wasm.instantiateStreaming = instantiateStreaming;
  }
}

// The relay's route for upstream MCP calls (mcps.call) is the one relative URL a guest may
// fetch; this worker has no base URL to resolve it against, so it stands for it here.
const MCPS_RPC_URL = `https://relay.invalid${MCPS_RPC}`;

/** The guest's Request (pyfetch makes one first): `new Request("/mcps-rpc", ...)` works too. */
class GuestRequest extends Request {
  constructor(input, init) {
    super(input === MCPS_RPC ? MCPS_RPC_URL : input, init);
  }
}

/**
 * The guest's fetch: sent to the page over the run's port; the answer becomes a Response, so
 * pyodide.http.pyfetch works on it. An answer with an error rejects with an Error named after
 * it whose message starts with that name ("PolicyDenied: ..."), which pyfetch raises in Python.
 */
async function guestFetch(input, init) {
  if (!activeRelay) throw new TypeError("fetch is only available while a run is running");
  const request = new GuestRequest(input, init);
  const relayRoute = request.url === MCPS_RPC_URL;
  const hasBody = request.method !== "GET" && request.method !== "HEAD";
  const body = hasBody ? new Uint8Array(await request.arrayBuffer()) : undefined;
  let answer;
  try {
    answer = await activeRelay.fetch({ url: relayRoute ? MCPS_RPC : request.url, method: request.method, headers: [...request.headers], ...(body && { body }) });
  } catch (error) {
    throw Object.assign(new Error(`${error.name}: ${error.message}`), { name: error.name });
  }
  const { status, statusText, headers, url } = answer;
  const response = new Response(NULL_BODY_STATUSES.has(status) ? null : answer.body, { status, statusText, headers });
  Object.defineProperty(response, "url", { value: url });
  return response;
}

// The empty program warmRun runs.
const WARM_ENTRY = "/.relay-warm.py";

/**
 * Runs an empty program down a run's whole path (its files, the workspace, the write-through,
 * the output handlers, relay_run through stack switching) while a tab's worker waits as a
 * standby: a fresh worker compiles that JavaScript when it first runs it, ~32 ms of a fresh
 * worker's `print(1)` against ~5 ms in a context's (docs/BENCHMARKS.md). No guest exists yet,
 * and nothing of the program stays: its file is removed, its write-through undone, and the
 * run's own handlers replace its output handlers and relay.
 */
async function warmRun(pyodide, relayRun, policy) {
  const relay = new RunRelay(() => {}); // an empty program sends nothing
  const job = { files: { [WARM_ENTRY.slice(1)]: new Uint8Array(0) }, workspace: {}, entry: { path: WARM_ENTRY, argv: [], env: {}, cwd: "/", stdin: "" } };
  const sink = { write: () => true };
  const { unwrapped } = await runCapsule(pyodide, relayRun, { job, sink, relay, rule: new WriteRule(policy, undefined, relay) });
  unwrapped();
  pyodide.FS.unlink(WARM_ENTRY);
  activeRelay = null;
}

/** Runs the capsule: `{exitCode, unwrapped}`, unwrapped() undoing its write-through. */
async function runCapsule(pyodide, relayRun, { job, sink, relay, rule, guard }) {
  writeFiles(pyodide.FS, job.files);
  // Before the workspace and its write-through: installing unpacks each wheel through /tmp.
  await installWheels(pyodide, job.files);
  loadWorkspace(pyodide.FS, job.workspace);
  const unwrapped = writeThrough(pyodide.FS, { rule, relay, workspace: job.workspace, warn: (text) => sink.write("stderr", text) });
  activeRelay = relay;
  pyodide.setStdout({ write: streamWriter(sink, "stdout", guard) });
  pyodide.setStderr({ write: streamWriter(sink, "stderr", guard) });
  const { entry } = job;
  const config = { entry: entry.path, argv: entry.argv, env: entry.env, cwd: entry.cwd, stdin: entry.stdin, context: Boolean(job.context) };
  // What relay_run.py's audit hook asks before a write: the same rule as above.
  // And where display() goes (bytes come as a PyProxy of a buffer: copied out here).
  const writeGuard = {
    deniedWrite: (path) => rule.denied(path) ?? undefined,
    inWorkspace: (path) => inWorkspace(path),
    display: (mime, data) => relay.display(mime || undefined, typeof data === "string" ? data : bytesOfProxy(data)),
  };
  return { exitCode: await callRelayRun(pyodide, relayRun, JSON.stringify(config), writeGuard), unwrapped };
}

/**
 * The run's exit code. callPromising lets the program block on JS promises (stack switching,
 * JSPI), which asyncio.run() and urllib need in Pyodide. Where the browser has no JSPI (WebKit)
 * relay_run is called plainly and hands a top-level await back as an awaitable, awaited here.
 */
async function callRelayRun(pyodide, relayRun, ...args) {
  if (pyodide._module.jspiSupported) return relayRun.callPromising(...args);
  const outcome = relayRun(...args, false);
  if (typeof outcome === "number") return outcome;
  try {
    return await outcome;
  } finally {
    outcome.destroy();
  }
}

/**
 * Installs the capsule's wheels (its deps layer's wheels/) as Pyodide's loadPackage does, with
 * the installer it uses: shared libraries (wheels/dynlib/) first, into the library directory,
 * then each wheel (or zip) into site-packages, the compiled modules (.so) it holds loaded.
 */
async function installWheels(pyodide, files) {
  const dynlib = (path) => path.startsWith("wheels/dynlib/");
  const paths = Object.keys(files)
    .filter((path) => path.startsWith("wheels/") && /\.(whl|zip)$/.test(path))
    .sort((a, b) => Number(dynlib(b)) - Number(dynlib(a)) || (a < b ? -1 : 1));
  const { package_loader: loader, install } = pyodide._api;
  for (const path of paths) {
    const target = loader.get_install_dir(dynlib(path) ? "dynlib" : "site");
    await install(files[path], path.slice(path.lastIndexOf("/") + 1), target, new Map([["INSTALLER", "relay"]]));
  }
}

/** Writes the capsule's files at /<relative path>. */
function writeFiles(FS, files) {
  for (const [relative, bytes] of Object.entries(files)) {
    const path = `/${relative}`;
    const dir = path.slice(0, path.lastIndexOf("/"));
    if (dir) FS.mkdirTree(dir);
    FS.writeFile(path, bytes);
  }
}

/**
 * A Pyodide raw write handler for one stream. Past the output cap it throws, which raises in
 * the Python code that printed, so a printing loop ends instead of running to the timeout.
 */
function streamWriter(sink, stream, guard) {
  const decoder = new TextDecoder();
  return (bytes) => {
    // A stopped run's interpreter may still print on its way down (the KeyboardInterrupt's
    // traceback, Pyodide's report of its halt): the run's error says why it ended instead.
    if (guard?.error) return bytes.length;
    if (!sink.write(stream, decoder.decode(bytes, { stream: true }))) {
      throw new Error(outputLimitFailure(sink.limitBytes).error.message);
    }
    return bytes.length;
  };
}

/** A copy of the bytes of a Python bytes-like object handed to JavaScript. */
function bytesOfProxy(proxy) {
  try {
    return proxy.toJs ? new Uint8Array(proxy.toJs()) : new Uint8Array(proxy);
  } finally {
    proxy.destroy?.();
  }
}
