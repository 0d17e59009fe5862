// Runs JS capsules in QuickJS (quickjs-emscripten, release-sync variant). The sandbox frame
// compiles the wasm once and hands every runner worker the compiled module; a worker serves one
// run, on a fresh instance whose wasm heap is capped at the run's memMb (made while the worker
// waits as a standby, for the default cap, with its runtime and context made and the prelude
// installed, so a run starts by giving process its config). The entry is evaluated as an ES
// module (top-level await, relative imports between the capsule's files); promise jobs and
// timers are driven until the program has nothing left to do, like Node's event loop.
// Guest code lives inside the QuickJS interpreter and reaches the worker only through the host
// functions the prelude is given (HOST_FUNCTIONS): output, exit, timers, files (guest-files.js:
// the workspace, written through to the page) and fetch (answered by the page).
//
// A run in a context (job.context) keeps its runtime and context for the context's next run.
// Its entry is evaluated as a global script when it compiles as one (no import/export, no
// top-level await), so its top-level declarations stay in the global scope for the next run
// (as in a second <script>: a let/const cannot be declared again); else as a module, where
// only what it puts on globalThis (and the modules it imported) carries over.

import { newQuickJSWASMModuleFromVariant, newVariant } from "quickjs-emscripten";
import RELEASE_SYNC from "@jitl/quickjs-wasmfile-release-sync";
import DEFAULT_LIMITS from "relay-default-limits";
import { failure, namedError } from "../lib/errors.js";
import { GuestFiles } from "./guest-files.js";
import { guestPrelude } from "./guest-prelude.js";
import { MAX_FETCHES_IN_FLIGHT } from "./run-relay.js";
import { WriteRule, runnerPolicy } from "./write-rule.js";

const MiB = 1024 * 1024;
const encoder = new TextEncoder();
const PAGE = 64 * 1024;
const WASM_FILE = "emscripten-module.wasm";
// The module's own minimum heap (emscripten INITIAL_MEMORY) and the wasm32 ceiling.
const INITIAL_HEAP_MIB = 16;
const MAX_HEAP_MIB = 2048;
// Promise jobs a guarded run (the edge's) executes before it yields to the host's event loop.
const JOB_SLICE = 10_000;
// Node's exit code when the program ends while its top-level await can never settle.
const EXIT_UNSETTLED_AWAIT = 13;
// The modules a capsule imports from the runtime itself, by the name of their exports in the prelude.
const BUILTIN_MODULES = { fs: "fs", "node:fs": "fs", "fs/promises": "fs/promises", "node:fs/promises": "fs/promises" };

// The cap a standby instance is made with: the default memMb's. A run that asks for another
// gets its own instance, made when it starts.
const STANDBY_CAP_MIB = heapCap(DEFAULT_LIMITS.memMb);

export const quickJsEngine = {
  /** `memMb`: the cap the standby instance is made with (the edge's is its own, smaller one). */
  async start({ modules, memMb }) {
    const wasmModule = modules[WASM_FILE];
    if (!wasmModule) throw new Error(`QuickJS needs ${WASM_FILE}`);
    const standby = await instantiate(wasmModule, memMb ? heapCap(memMb) : STANDBY_CAP_MIB);
    const ready = freshContext(standby);
    const policy = runnerPolicy(modules);
    let context = null; // a context's interpreter, made by its first run: {fresh, memory}
    return {
      async run(job, sink, relay, guard) {
        const capMiB = heapCap(job.limits.memMb);
        if (job.context) {
          if (!context) {
            const own = capMiB === standby.capMiB ? standby : await instantiate(wasmModule, capMiB);
            context = { fresh: own === standby ? ready : freshContext(own), memory: own.memory };
          }
          const rule = new WriteRule(policy, job.filesystem, relay, job.workspaceLimit);
          const outcome = await new QuickJsRun(context.fresh, job, sink, relay, rule, true).result;
          return { ...outcome, memPeakMb: context.memory.buffer.byteLength / MiB };
        }
        const own = capMiB === standby.capMiB ? null : await instantiate(wasmModule, capMiB);
        const { memory } = own ?? standby;
        const rule = new WriteRule(policy, job.filesystem, relay, job.workspaceLimit);
        const outcome = await new QuickJsRun(own ? freshContext(own) : ready, job, sink, relay, rule, false, guard).result;
        return { ...outcome, memPeakMb: memory.buffer.byteLength / MiB };
      },
    };
  },
};

function heapCap(memMb) {
  return Math.min(MAX_HEAP_MIB, Math.max(memMb, 2 * INITIAL_HEAP_MIB));
}

/** A QuickJS instance whose wasm heap cannot grow past capMiB: the hard memory limit. */
async function instantiate(wasmModule, capMiB) {
  const memory = new WebAssembly.Memory({ initial: (INITIAL_HEAP_MIB * MiB) / PAGE, maximum: (capMiB * MiB) / PAGE });
  const module = await newQuickJSWASMModuleFromVariant(newVariant(RELEASE_SYNC, { wasmModule, wasmMemory: memory }));
  return { module, memory, capMiB, halt: haltable(module) };
}

/**
 * The switch that halts every guest of a QuickJS instance for good (see QuickJsRun.interrupt):
 * once `on`, each interrupt check throws from the wasm's import itself, so the JavaScript error
 * unwinds every QuickJS frame (no catch, finally, Promise executor or async function sees it)
 * up to the host's call into QuickJS, and the instance is never used again. It wraps the
 * emscripten module's interrupt callback because quickjs-emscripten (0.32) calls the handler
 * inside a try/catch that would turn a throw into a plain interrupt.
 */
function haltable(module) {
  const callbacks = module.module?.callbacks;
  if (typeof callbacks?.shouldInterrupt !== "function") throw new Error("quickjs-emscripten's interrupt callback moved: the runner cannot halt a guest");
  const ask = callbacks.shouldInterrupt;
  const halt = { on: false };
  callbacks.shouldInterrupt = (...args) => {
    const interrupt = ask(...args);
    if (halt.on) throw new Error("the guest was halted");
    return interrupt;
  };
  return halt;
}

// How a context's run ends when its guest had to be halted (see QuickJsRun.interrupt): with an
// error, so the page drops the context's worker and its broken interpreter.
const HALTED_CONTEXT = {
  name: "RuntimeCrashed",
  message: "the program went on running after process.exit() or the output cap stopped it (in a Promise executor or an async function), so its interpreter was halted; the context starts afresh on its next run",
};

// The functions the prelude's `host` object has; each calls the QuickJsRun method of its name.
const HOST_FUNCTIONS = ["write", "exit", "setTimer", "clearTimer", "fs", "utf8Encode", "utf8Decode", "fetch", "display"];

/**
 * A runtime and context of `instance` (instantiate()'s) no guest has touched, with the prelude
 * installed (guest-prelude.js): its host functions call whichever run `holder.run` names (the
 * run sets it before any guest code runs), and `configure` is left for the run to give process
 * its argv, env and stdin.
 */
function freshContext({ module, halt }) {
  const runtime = module.newRuntime();
  const context = runtime.newContext();
  const holder = { run: null };
  const prelude = context.unwrapResult(context.evalCode(`(${guestPrelude})`, "relay:prelude.js"));
  const host = context.newObject();
  for (const name of HOST_FUNCTIONS) {
    context.newFunction(name, (...args) => holder.run.hostCall(name, args)).consume((fn) => context.setProp(host, name, fn));
  }
  const installed = context.unwrapResult(context.callFunction(prelude, context.undefined, host));
  const [formatError, configure, display] = ["formatError", "configure", "display"].map((name) => context.getProp(installed, name));
  for (const handle of [prelude, host, installed]) handle.dispose();
  return { runtime, context, holder, formatError, configure, display, halt };
}

class QuickJsRun {
  /**
   * @param fresh freshContext()'s: this run's own runtime, context and installed prelude
   * @param rule the run's WriteRule: which of its writes the page stores
   * @param kept the runtime and context outlive the run (a context's: see the top)
   * @param guard at the edge only (durable/js/edge-runner.js): `tick()` is called with every
   *   interrupt-handler call and says when to stop, `error` why, and `onStop` is called when it
   *   stops a guest that only waits
   */
  constructor({ runtime, context, holder, formatError, configure, display, halt }, job, sink, relay, rule, kept = false, guard = undefined) {
    this.job = job;
    this.kept = kept;
    this.guard = guard;
    this.sink = sink;
    this.relay = relay;
    this.files = new GuestFiles({ capsule: job.files, workspace: job.workspace, rule, relay });
    this.timers = new Map();
    this.nextTimerId = 1;
    this.fetches = new Map(); // id -> the guest's callback, until the page answers
    this.nextFetchId = 1;
    this.exitCode = undefined; // set by process.exit()
    this.done = false;

    this.result = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });

    this.runtime = runtime;
    this.context = context;
    this.halt = halt; // its instance's: see interrupt()
    this.interrupted = false; // the interrupt handler has stopped the guest once
    this.formatError = formatError;
    this.displayValue = display; // the prelude's display(), for a script's completion value
    holder.run = this; // the prelude's host functions now call this run's
    this.configure(configure);
    // QuickJS's own accounting stops most runaway allocations with a clean "out of memory"
    // error; the capped wasm memory (instantiate) is the backstop.
    this.runtime.setMemoryLimit(job.limits.memMb * MiB);
    this.runtime.setInterruptHandler(() => this.interrupt());
    if (guard) guard.onStop = () => this.finish(1);
    this.runtime.setModuleLoader(
      (name) => (this.stopped() ? { error: new Error("the run was stopped") } : this.moduleSource(name)),
      (base, requested) => resolveModule(base, requested, job.files),
    );
    this.start();
  }

  stopped() {
    return this.exitCode !== undefined || this.sink.exceeded || Boolean(this.guard?.error);
  }

  /**
   * The interrupt handler, called regularly while guest code runs: stops it right after
   * process.exit() or the output cap, and at the edge once its guard says so (the calls count
   * its work). The first call that stops it makes QuickJS throw its uncatchable error, which
   * ends ordinary code; but QuickJS's Promise executor, its async functions and its promise jobs
   * turn that error into a rejection, and a loop around them runs on
   * (`for(;;) new Promise(() => { for(;;){} })`). So the stop is sticky: a later call means the
   * guest survived it, and halts the instance (haltable()).
   */
  interrupt() {
    if (!(this.guard?.tick() || this.stopped())) return false;
    if (this.interrupted) this.halt.on = true;
    this.interrupted = true;
    return true;
  }

  /** Calls `enter` (a call into QuickJS that may run guest code); a halted guest ends the run. */
  guestCall(enter) {
    try {
      enter();
    } catch (err) {
      if (!this.halt.on) throw err;
      this.finish(1);
    }
  }

  start() {
    this.guestCall(() => this.evaluate());
  }

  /** Evaluates the entry (a module, or a context's script) and runs what it queued. */
  evaluate() {
    const { entry } = this.job;
    const source = this.moduleSource(entry.path);
    if (typeof source !== "string") {
      this.sink.write("stderr", `${source.error.message}\n`);
      return this.finish(1);
    }
    this.script = this.kept && this.compilesAsScript(source);
    const evaluated = this.context.evalCode(source, entry.path, { type: this.script ? "global" : "module" });
    if (evaluated.error) return this.fail(evaluated.error);
    this.main = evaluated.value; // the module's evaluation promise; a script's completion value
    this.settle();
  }

  /** Whether `source` is a script (no import/export, no top-level await): compiled, not run. */
  compilesAsScript(source) {
    const compiled = this.context.evalCode(source, this.job.entry.path, { type: "global", compileOnly: true });
    (compiled.error ?? compiled.value).dispose();
    return !compiled.error;
  }

  /** Gives process this run's entry, argv, env, cwd and stdin (guest-prelude.js's configure). */
  configure(configure) {
    const ctx = this.context;
    const { entry } = this.job;
    const config = JSON.stringify({ entry: entry.path, argv: entry.argv, env: entry.env, cwd: entry.cwd, stdin: entry.stdin });
    const configHandle = ctx.newString(config);
    ctx.unwrapResult(ctx.callFunction(configure, ctx.undefined, configHandle)).dispose();
    configHandle.dispose();
    if (!this.kept) configure.dispose();
  }

  /**
   * A host function the prelude calls (HOST_FUNCTIONS), with QuickJS handles. A stopped guest
   * gets nothing more done: it runs on until the next interrupt check, which may be long in a
   * loop of host calls (a fetch of 1 MiB each), and a call that ran guest code again (a getter)
   * would take the halt's throw (quickjs-emscripten catches a host function's).
   */
  hostCall(name, args) {
    return this.stopped() || this.guard?.spend(0) ? undefined : this[name](...args);
  }

  /**
   * At the edge, host work a guest's call caused counts against its time (a tick per 256 KiB
   * moved, about what a tick of guest steps costs): a loop of a few steps around calls that
   * move megabytes otherwise reached the interrupt handler seconds late.
   */
  spend(bytes) {
    this.guard?.spend(bytes >> 18);
  }

  write(fd, text) {
    this.sink.write(this.context.getNumber(fd) === 2 ? "stderr" : "stdout", this.context.getString(text));
  }

  exit(code) {
    this.exitCode ??= this.context.getNumber(code);
  }

  setTimer(callback, ms, repeat) {
    return this.context.newNumber(this.addTimer(callback.dup(), this.context.getNumber(ms), this.context.dump(repeat)));
  }

  clearTimer(id) {
    this.dropTimer(this.context.getNumber(id));
  }

  fs(op, args, data) {
    const ctx = this.context;
    const bytes = data && ctx.typeof(data) !== "undefined" ? this.bytesOf(data) : undefined;
    return this.toGuest(this.files.call(ctx.getString(op), JSON.parse(ctx.getString(args)), bytes));
  }

  utf8Encode(text) {
    return this.toGuest(encoder.encode(this.context.getString(text)));
  }

  utf8Decode(buffer) {
    return this.context.newString(new TextDecoder().decode(this.bytesOf(buffer)));
  }

  fetch(requestJson, body, callback) {
    // Checked here too, before the request is copied: a loop of un-awaited fetches holds nothing.
    if (this.fetches.size >= MAX_FETCHES_IN_FLIGHT) {
      throw namedError("TooManyRequests", `at most ${MAX_FETCHES_IN_FLIGHT} fetches may wait at once; await some before starting more`);
    }
    const ctx = this.context;
    const request = JSON.parse(ctx.getString(requestJson));
    if (ctx.typeof(body) !== "undefined") request.body = this.bytesOf(body);
    this.startFetch(request, callback.dup());
  }

  /** display(): a MIME type ("" for bytes, which the relay sniffs) and a string or bytes. */
  display(mime, data) {
    const ctx = this.context;
    const payload = ctx.typeof(data) === "string" ? ctx.getString(data) : this.bytesOf(data);
    this.relay.display(ctx.getString(mime) || undefined, payload);
  }

  addTimer(callback, ms, repeat) {
    const id = this.nextTimerId++;
    const fire = () => {
      if (!repeat) this.timers.delete(id);
      this.callGuest(callback, [], !repeat);
    };
    const handle = repeat ? setInterval(fire, ms) : setTimeout(fire, ms);
    this.timers.set(id, { handle, callback });
    return id;
  }

  /** Calls a guest callback from the host's event loop, then runs what it queued. */
  callGuest(callback, args, last) {
    try {
      const called = this.context.callFunction(callback, this.context.undefined, ...args);
      for (const arg of args) arg.dispose();
      if (last) callback.dispose();
      if (called.error) return this.fail(called.error);
      called.value.dispose();
      this.settle();
    } catch (err) {
      if (this.halt.on) return this.finish(1);
      this.reject(err); // the wasm trapped; the runner drops this engine
    }
  }

  /** Sends a guest fetch to the page; its answer calls `callback(errorJson, responseJson, body)`. */
  startFetch(request, callback) {
    const id = this.nextFetchId++;
    this.fetches.set(id, callback);
    const answer = (args) => {
      if (this.done || !this.fetches.delete(id)) return;
      const ctx = this.context;
      this.callGuest(callback, args(ctx), true);
    };
    this.relay.fetch(request).then(
      ({ body, ...meta }) => answer((ctx) => [ctx.null, ctx.newString(JSON.stringify(meta)), ctx.newArrayBuffer(body)]),
      (error) => answer((ctx) => [ctx.newString(JSON.stringify({ name: error.name, message: error.message }))]),
    );
  }

  /** A copy of the bytes of a guest string (UTF-8) or ArrayBuffer. */
  bytesOf(handle) {
    const ctx = this.context;
    const bytes = ctx.typeof(handle) === "string" ? encoder.encode(ctx.getString(handle)) : ctx.getArrayBuffer(handle).consume((view) => view.value.slice());
    this.spend(bytes.byteLength);
    return bytes;
  }

  /** A host result as a guest value: undefined, a string, or bytes as an ArrayBuffer. */
  toGuest(value) {
    const ctx = this.context;
    if (value === undefined) return undefined;
    this.spend(value.length ?? 0);
    if (typeof value === "string") return ctx.newString(value);
    const whole = value.byteOffset === 0 && value.byteLength === value.buffer.byteLength;
    return ctx.newArrayBuffer(whole ? value.buffer : value.slice().buffer);
  }

  dropTimer(id, free = true) {
    const timer = this.timers.get(id);
    if (!timer) return;
    clearTimeout(timer.handle); // also clears intervals: they share one id space
    if (free) timer.callback.dispose();
    this.timers.delete(id);
  }

  /** Runs pending promise jobs, then ends the run if nothing can happen any more. */
  settle() {
    this.guestCall(() => this.runJobs());
  }

  runJobs() {
    if (this.done) return;
    const jobs = this.runtime.executePendingJobs(this.guard ? JOB_SLICE : -1);
    if (jobs.error) return this.fail(jobs.error);
    if (this.stopped()) return this.finish(1);
    if (this.guard && jobs.value >= JOB_SLICE) {
      // At the edge a program that only chains promises never lets the host run: after each
      // slice of jobs the run yields, so its guard's timer (and the isolate's other work) can.
      setTimeout(() => this.settle());
      return;
    }
    const state = this.context.getPromiseState(this.main);
    if (state.type === "rejected") return this.fail(state.error);
    if (this.timers.size > 0 || this.fetches.size > 0) return; // a timer or a fetch will call settle() again
    if (state.type === "fulfilled") {
      // A module without top-level await may evaluate to a plain value: then it is this.main.
      if (!state.notAPromise) state.value.dispose();
      if (this.script) return this.showCompletion();
      return this.finish(0);
    }
    this.sink.write("stderr", "Warning: Detected unsettled top-level await\n");
    this.finish(EXIT_UNSETTLED_AWAIT);
  }

  /** A context's script ends by showing its completion value (not undefined or null) as display() would. */
  showCompletion() {
    const ctx = this.context;
    if (!ctx.sameValue(this.main, ctx.undefined) && !ctx.sameValue(this.main, ctx.null)) {
      const shown = ctx.callFunction(this.displayValue, ctx.undefined, this.main);
      if (shown.error) return this.fail(shown.error);
      shown.value.dispose();
    }
    this.finish(0);
  }

  /** An exception escaped the program: print it like Node does and exit 1. */
  fail(errorHandle) {
    if (!this.stopped()) this.sink.write("stderr", `Uncaught ${this.describe(errorHandle)}\n`);
    errorHandle.dispose();
    this.finish(1);
  }

  describe(errorHandle) {
    const ctx = this.context;
    const formatted = this.formatError && ctx.callFunction(this.formatError, ctx.undefined, errorHandle);
    if (formatted && !formatted.error) return formatted.value.consume((text) => ctx.getString(text));
    formatted?.error.dispose();
    // The formatter itself failed (e.g. out of memory): fall back to the host's view.
    const dumped = ctx.dump(errorHandle);
    return dumped?.message ? `${dumped.name}: ${dumped.message}` : JSON.stringify(dumped);
  }

  /** Ends the run; an exit code passed to process.exit() wins over `exitCode`. */
  finish(exitCode) {
    if (this.done) return;
    this.done = true;
    // A halted runtime stopped in the middle of its frames: none of it is freed (its instance
    // goes with its worker or isolate), and a context's cannot serve another run.
    const free = !this.halt.on;
    for (const id of [...this.timers.keys()]) this.dropTimer(id, free);
    if (free) for (const callback of this.fetches.values()) callback.dispose();
    this.fetches.clear();
    const stoppedBy = this.guard?.error ?? (!free && this.kept ? HALTED_CONTEXT : null);
    this.resolve(stoppedBy ? failure(stoppedBy.name, stoppedBy.message) : { exitCode: this.exitCode ?? exitCode });
    if (!free) return;
    // Freeing the runtime walks the guest's whole heap: it waits until the exit is posted.
    // A context's stays for its next run.
    const handles = this.kept ? [this.main] : [this.main, this.formatError, this.displayValue, this.context, this.runtime];
    setTimeout(() => {
      for (const handle of handles) handle?.dispose();
    });
  }

  /** The module loader: the source of a capsule file by absolute path, or an error. */
  moduleSource(path) {
    if (Object.hasOwn(BUILTIN_MODULES, path)) return this.builtinSource(BUILTIN_MODULES[path]);
    if (!path.startsWith("/")) {
      const only = "only the capsule's own files and the packages of its npm.dependencies can be imported";
      const why = /^[a-z][a-z0-9+.-]*:/i.test(path)
        ? `${only}, not URLs (read a remote file with fetch())`
        : `${only}; list "${path}" in npm.dependencies (a subpath such as "pkg/sub" is bundled when the call's code imports it by a string literal)`;
      return { error: new Error(`cannot import "${path}": ${why}`) };
    }
    const bytes = this.job.files[path.slice(1)];
    if (!bytes) return { error: new Error(`cannot find module ${path}: it is not a file of this capsule`) };
    return new TextDecoder().decode(bytes);
  }

  /** A module re-exporting what the prelude made under `name` (e.g. fs): default and named. */
  builtinSource(name) {
    const ctx = this.context;
    const key = JSON.stringify(name);
    const names = ctx.unwrapResult(ctx.evalCode(`Object.keys(globalThis.__relayModules[${key}])`)).consume((h) => ctx.dump(h));
    return `const m = globalThis.__relayModules[${key}];\nexport default m;\nexport const { ${names.join(", ")} } = m;\n`;
  }
}

/**
 * The module normalizer: resolves a relative or absolute `requested` against `base`, trying
 * the usual extensions, and a package name to its bundle from the deps layer
 * (/node_modules/<name>/index.js). Anything else is returned as it is, for moduleSource() to
 * refuse (quickjs-emscripten loses a normalizer's error message).
 */
function resolveModule(base, requested, files) {
  const bundle = `node_modules/${requested}/index.js`;
  if (!/^\.{0,2}\//.test(requested)) return files[bundle] ? `/${bundle}` : requested;
  const dir = requested.startsWith("/") ? "" : base.slice(0, base.lastIndexOf("/") + 1);
  const path = normalizePath(dir + requested);
  return [path, `${path}.js`, `${path}.mjs`, `${path}/index.js`].find((p) => files[p.slice(1)]) ?? path;
}

function normalizePath(path) {
  const parts = [];
  for (const part of path.split("/")) {
    if (part === "..") parts.pop();
    else if (part && part !== ".") parts.push(part);
  }
  return `/${parts.join("/")}`;
}
