// The sandbox frame: the one place that creates the Web Workers guest code runs in, one worker
// per run. The page loads it as <iframe sandbox="allow-scripts" src="sandbox.html">, so this
// frame and every worker it creates have an opaque origin: none of the page's storage (Cache
// API, IndexedDB, OPFS, cookies) exists for them. sandbox.html's Content-Security-Policy, which
// blob: workers inherit, admits no network at all (no fetch, import(), importScripts,
// WebSocket, EventSource), no eval or Function, and no script but this frame's own inline one;
// wasm may compile. So a worker holds nothing worth escaping to, and guest code that takes
// over its worker's realm (Pyodide's FFI hands Python that realm) finds no way out.
//
// A worker serves exactly one run. When a run takes a worker, the worker that ran before it is
// terminated first, so no two guests are ever alive at once, and nothing a run leaves behind
// (globals, timers, patched functions, interpreter state) is seen by the next. To keep that
// cheap, each runtime keeps standby workers loaded and waiting: QuickJS two, so that a call
// sent back to back finds one ready while the next loads (one alone was still loading for
// about half of them), Pyodide one (each holds ~100 MB, and back to back a second would only
// move the wait: a Pyodide worker takes longer to load than a call). One that was taken is
// replaced when the page says it is idle (`refill`: the run's results are delivered), not when
// the run ends: on two cores, loading a worker (QuickJS ~20-40 ms, Pyodide ~300 ms of CPU)
// beside a run's last requests held those requests up by as much (and when, after that, is the
// page's choice: lib/standby-refill.js).
//
// A ready standby is offered to the page ahead (`standby`, with its port), so a run starts
// with one message to its worker instead of a round trip through this frame first; the page
// then says which run `took` it. An offer is made only while no guest runs, and says how many
// `kill`s this frame had handled (each terminating its run's worker, if it had one). The page
// uses an offer only if that count equals the kills it has sent: then every worker a guest ever
// ran in was dead when the offer was made, and no run has started since. Otherwise it
// `discard`s the offer and `take`s a worker the slow way. An offer the page still holds when the
// frame handles later kills is confirmed (`current`) with the new count, under the same rule.
//
// Messages (page <-> frame, window.postMessage; the frame answers only its parent):
//   page -> frame  {type:"prepare", runtimeId, files:{name: ArrayBuffer}}   runtime files, SRI-checked by the page
//                  {type:"take", runtimeId, runId}                          a ready worker for this run
//                  {type:"took", runtimeId, id, runId}                      the run was posted to offer `id`
//                  {type:"discard", runtimeId, id}                          offer `id` is stale: terminate it
//                  {type:"kill", runId}                                     the run is over: terminate its worker
//                  {type:"refill"}                                          the page is idle: load the standbys taken
//                  {type:"take"|"took", ..., context}                       the run starts context `context` (see below)
//                  {type:"enter", runId, context}                           the run runs in context `context`'s worker
//                  {type:"release", runId}                                  the run in a context ended well: keep its worker
//                  {type:"drop", context}                                   end context `context`: terminate its worker
//                  {type:"ping", id}                                        are you alive? (lib/sandbox.js)
//   frame -> page  {type:"hello"}                                           the frame is listening
//                  {type:"prepared", runtimeId, snapshot?} | {type:"failed", runtimeId, message}
//                  {type:"taken", runId} + [port]                           the port reaches the worker's glue
//                  {type:"standby", runtimeId, id, killed} + [port]        an offer (see above)
//                  {type:"current", runtimeId, id, killed}                  offer `id` is current as of `killed` kills
//                  {type:"crashed", runId, message}                         the run's worker died of an error
//                  {type:"pong", id, ready:{runtimeId: n}}                  the answer to ping `id`, with the standbys ready
//                  {type:"lost", context, message}                          context `context`'s worker died between its runs
// The frame never reads what a worker says after it is ready: the page talks to it over the
// port and judges every message itself (lib/runner-host.js).
//
// Contexts (an agent's `context`, run::contexts in the core) are the one exception to "a
// worker serves one run": a run that starts a context takes a worker as any run does, and
// when it ends well the page `release`s it instead of killing it; the worker is kept under the
// context's key (runtime id and name) and later runs of that context `enter` it. It stays in
// this frame, with this frame's walls, and the page still judges each of its runs. A kill of a
// run in a context (a timeout, a cancel, a crash) ends the context with it. A context's worker
// is alive beside other runs: that is what an agent asked for by naming one, and it shares
// nothing with them (no port, no memory, no storage).

// Only ever the sandboxed frame of a relay page: framed, and in an opaque origin (the Worker
// serves this file with `Content-Security-Policy: sandbox allow-scripts`; this is a second check).
if (self.origin !== "null" || window.parent === window) {
  throw new Error("sandbox.html runs only inside <iframe sandbox=allow-scripts> of the relay page");
}

const runtimes = new Map(); // runtimeId -> Runtime
let running = null; // {runId, runtime, worker}: the one worker a run holds
let takes = 0; // how many takes were asked for: only the latest may end up running
let taking = 0; // takes still waiting for their worker
let killed = 0; // kill messages handled, whether or not their run still had a worker
let offers = 0; // offer ids handed out
const contexts = new Map(); // context key -> the worker a context's runs share

window.addEventListener("message", ({ source, data }) => {
  if (source !== window.parent || !data) return;
  const handler = HANDLERS[data.type];
  if (handler) handler(data).catch((err) => console.error(`sandbox: ${data.type}: ${err.message}`));
});
window.parent.postMessage({ type: "hello" }, "*");

const HANDLERS = {
  async prepare({ runtimeId, files }) {
    try {
      const { runtime, made } = await Runtime.create(runtimeId, files);
      runtimes.set(runtimeId, runtime);
      offerStandbys(); // before `prepared`: the first run finds its offer
      // A snapshot made here goes back to the page, which keeps it for the next page load.
      reply({ type: "prepared", runtimeId, ...(made && { snapshot: made }) });
    } catch (err) {
      reply({ type: "failed", runtimeId, message: err.message });
    }
  },

  async take({ runtimeId, runId, context }) {
    const take = ++takes;
    stopRunning();
    const runtime = runtimes.get(runtimeId);
    if (!runtime) return reply({ type: "crashed", runId, message: `runtime ${runtimeId} was never prepared` });
    let standby;
    taking++;
    try {
      standby = await runtime.takeStandby();
    } catch (err) {
      return reply({ type: "crashed", runId, message: `could not start ${runtimeId}: ${err.message}` });
    } finally {
      taking--;
    }
    if (take !== takes) {
      // A later take was asked for while this one waited: its run holds the worker now.
      standby.worker.terminate();
      return reply({ type: "crashed", runId, message: "a later run took the sandbox first" });
    }
    startRunning(runId, runtime, standby.worker, context);
    reply({ type: "taken", runId }, [standby.port]);
  },

  async took({ runtimeId, id, runId, context }) {
    const runtime = runtimes.get(runtimeId);
    const offer = runtime?.offer;
    if (offer?.id !== id) return reply({ type: "crashed", runId, message: `standby ${id} of ${runtimeId} is gone` });
    runtime.offer = null;
    stopRunning(); // never one here (offers are made while none runs, and used before the next run)
    startRunning(runId, runtime, offer.worker, context);
    if (offer.crashed) reply({ type: "crashed", runId, message: offer.crashed });
  },

  async enter({ runId, context }) {
    stopRunning();
    const worker = contexts.get(context);
    if (!worker) return reply({ type: "crashed", runId, message: `context ${context} is not in this sandbox` });
    running = { runId, worker, context };
  },

  async release({ runId }) {
    if (running?.runId === runId && running.context) running = null;
    offerStandbys();
  },

  async drop({ context }) {
    if (running?.context === context) running = null;
    contexts.get(context)?.terminate();
    contexts.delete(context);
    offerStandbys();
  },

  async discard({ runtimeId, id }) {
    const runtime = runtimes.get(runtimeId);
    if (runtime?.offer?.id !== id) return;
    runtime.offer.worker.terminate();
    runtime.offer = null;
  },

  async kill({ runId }) {
    if (running?.runId === runId) stopRunning();
    killed++;
    offerStandbys();
  },

  async refill() {
    if (running || taking) return; // not idle after all: the next take loads its own
    for (const runtime of runtimes.values()) runtime.refill();
  },

  // This thread runs no guest code and waits on nothing, so it answers at once while its
  // process lives; the page takes silence for the process's death.
  async ping({ id }) {
    const ready = Object.fromEntries([...runtimes].map(([runtimeId, runtime]) => [runtimeId, runtime.readyCount()]));
    reply({ type: "pong", id, ready });
  },
};

/**
 * `worker` is run `runId`'s now: an error in it is that run's crash (or, for a context's
 * worker between its runs, the context's loss). A run that starts a context keeps it there.
 */
function startRunning(runId, runtime, worker, context) {
  running = { runId, runtime, worker, context };
  if (context) {
    contexts.get(context)?.terminate();
    contexts.set(context, worker);
  }
  worker.onerror = (event) => {
    event.preventDefault();
    const message = event.message ?? "error";
    if (running?.worker === worker) return reply({ type: "crashed", runId: running.runId, message });
    if (context && contexts.get(context) === worker) {
      contexts.delete(context);
      worker.terminate();
      reply({ type: "lost", context, message });
    }
  };
}

/** Ends the running worker: a context's, released or not, goes with its context. */
function stopRunning() {
  if (!running) return;
  if (running.context) {
    // Entered but never released: the page is starting another run, so this one was killed.
    if (contexts.get(running.context) === running.worker) contexts.delete(running.context);
  }
  running.worker.terminate();
  running = null;
}

/** Offers the page every ready standby not offered yet, while no guest runs (see the top). */
function offerStandbys() {
  if (running || taking) return;
  for (const runtime of runtimes.values()) {
    // One offer at a time (the page holds one port per runtime): one made before kills this
    // frame has handled since is confirmed as current again, or the page would discard a ready
    // worker (a whole Pyodide load, ~300 ms) for a run of another runtime having ended.
    if (runtime.offer) {
      confirmCurrent(runtime);
      continue;
    }
    const ready = runtime.takeReady();
    if (!ready) continue;
    const offer = { id: ++offers, worker: ready.worker, crashed: null, killed };
    runtime.offer = offer;
    ready.worker.onerror = (event) => {
      event.preventDefault();
      offer.crashed = event.message ?? "error";
    };
    reply({ type: "standby", runtimeId: runtime.id, id: offer.id, killed }, [ready.port]);
  }
}

/**
 * Tells the page that `runtime`'s offer is current as of the kills handled now, if it was older.
 * A crashed one is left stale: the page discards it and its run takes a worker that works.
 */
function confirmCurrent({ id: runtimeId, offer }) {
  if (offer.crashed || offer.killed === killed) return;
  offer.killed = killed;
  reply({ type: "current", runtimeId, id: offer.id, killed });
}

function reply(message, transfer = []) {
  window.parent.postMessage(message, "*", transfer);
}

/**
 * One runtime (e.g. pyodide@314): its runner script as a blob: URL, its wasm compiled once, an
 * optional memory snapshot its first, guest-free worker made, and the standby worker. Files go
 * to workers as Blobs and modules as compiled modules: both are passed by reference, so starting
 * a worker copies nothing on this (the page's) thread; the worker reads the Blobs itself.
 */
class Runtime {
  /** @returns {{runtime: Runtime, made?: Uint8Array}} `made`: a snapshot booted here, if any */
  static async create(runtimeId, files) {
    const { "runner.js": runnerSource, "snapshot.bin": cached, ...rest } = files;
    if (!runnerSource) throw new Error(`runtime ${runtimeId} has no runner.js`);
    const modules = {};
    const blobs = {};
    for (const [name, buffer] of Object.entries(rest)) {
      if (name.endsWith(".wasm")) modules[name] = await WebAssembly.compile(buffer);
      else blobs[name] = new Blob([buffer]);
    }
    const url = URL.createObjectURL(new Blob([runnerSource], { type: "text/javascript" }));
    const runtime = new Runtime(runtimeId, url, { modules, files: blobs });
    const made = cached ? undefined : await runtime.bootstrap();
    const snapshot = cached ?? made;
    runtime.snapshot = snapshot && new Blob([snapshot]);
    runtime.refill();
    // Prepared means a run can start at once: the first standby is loaded (a failed one is
    // retried by the first run's take).
    await runtime.standbys[0]?.loading.catch(() => {});
    return { runtime, made };
  }

  constructor(id, url, assets) {
    this.id = id;
    this.url = url;
    this.assets = assets;
    this.snapshot = undefined;
    this.depth = id.startsWith("quickjs@") ? 2 : 1; // standbys kept, the offered one included
    this.standbys = []; // [{loading: Promise<{worker, port}>, ready?}]: the frame's, oldest first
    this.offer = null; // {id, worker, crashed}: a ready standby whose port the page holds
  }

  /** Runs the runtime's bootstrap in a worker of its own (no guest ever runs there). */
  async bootstrap() {
    const { worker, answer } = this.start("bootstrap");
    try {
      return (await answer).snapshot;
    } finally {
      worker.terminate();
    }
  }

  /** A worker that has loaded the runtime and waits for its one run. */
  async spawn() {
    const { worker, port, answer } = this.start("standby");
    try {
      await answer;
    } catch (err) {
      worker.terminate();
      throw err;
    }
    return { worker, port };
  }

  /** A standby, ready ones first (loading one now if there is none); `refill` replaces it. */
  takeStandby() {
    const standby = this.standbys.find((s) => s.ready) ?? this.standbys[0];
    if (!standby) return this.spawn();
    this.standbys.splice(this.standbys.indexOf(standby), 1);
    return standby.loading;
  }

  /** A ready standby to offer to the page, if there is one; it is no longer the frame's to take. */
  takeReady() {
    const standby = this.standbys.find((s) => s.ready);
    if (!standby) return null;
    this.standbys.splice(this.standbys.indexOf(standby), 1);
    return standby.ready;
  }

  /** The ready standbys, the offered one included. */
  readyCount() {
    return this.standbys.filter((s) => s.ready).length + (this.offer ? 1 : 0);
  }

  /** Starts loading standbys until `depth` are kept, loading or ready. A failed one is not kept. */
  refill() {
    while (this.standbys.length + (this.offer ? 1 : 0) < this.depth) {
      const standby = { loading: this.spawn(), ready: null };
      this.standbys.push(standby);
      const kept = () => this.standbys.includes(standby);
      standby.loading.then(
        (ready) => {
          if (!kept()) return;
          standby.ready = ready;
          offerStandbys();
        },
        () => {
          if (kept()) this.standbys.splice(this.standbys.indexOf(standby), 1);
        },
      );
    }
  }

  /** Starts a worker in `mode`; `answer` settles with its first message on the port. */
  start(mode) {
    const worker = new Worker(this.url, { name: "relay-runner" });
    const { port1, port2 } = new MessageChannel();
    const answer = new Promise((resolve, reject) => {
      port1.onmessage = ({ data }) => {
        port1.onmessage = null;
        if (data?.type === "ready") resolve(data);
        else reject(new Error(data?.message ?? "the runner failed to start"));
      };
      worker.onerror = (event) => {
        event.preventDefault();
        reject(new Error(event.message ?? "the runner failed to load"));
      };
    });
    worker.postMessage({ mode, ...this.assets, snapshot: this.snapshot }, [port2]);
    return { worker, port: port1, answer };
  }
}
