// The Worker's main module (wrangler.toml `main`): worker-build's module (the Rust Worker, its
// fetch handler and the SessionDO) as it is, plus the two entrypoints of the edge executor
// (issue 27), which workers-rs cannot export: a class extending WorkerEntrypoint has to be an
// export of the main module, and worker-build exports only the Rust ones. Both are thin; every
// rule they reach is the Rust core's.
//
// - EdgeExecutor.run(jobJson): called by the relay session's DO (ctx.exports, from Rust) for a
//   run the run machine sent to the edge. Loads a fresh dynamic Worker for it (never reused:
//   LOADER.load, not get), with no network (globalOutbound: null), no bindings, the runner of
//   the capsule's language and its runtime's files as modules (a dynamic worker may not compile
//   wasm at run time), and calls its run(job, host) with the run's host entrypoint. JavaScript:
//   the runner bundle (durable/js/edge-runner.js, built by scripts/build-assets.mjs into
//   dist/edge/) and QuickJS and policy.wasm as wasm modules, the page's own static assets (the
//   QuickJS runtime's files in runtimes.json), read once per isolate from the ASSETS binding:
//   bundled into the Worker they would add 456 KiB gzipped to it. Python: edge-pyodide.mjs
//   (Pyodide's runner and files, assets too, and its memory snapshot, kept in R2). Returns its
//   NDJSON event stream, ended with an exit event of its own if the isolate dies before it sends
//   one (edge-run.mjs).
// - EdgeExecutor.standby(): a run_js's fresh dynamic Worker made ahead of the run, its runner
//   prepared (QuickJS made, the prelude installed), as an RpcTarget (Standby) the relay session
//   holds, then claims with take() and runs a job on with run(jobJson), once. A load()ed worker's
//   stub serves only the request that loaded it, and the stub of a dynamic worker's entrypoint
//   cannot be sent over RPC, so the standby stays in the call that made it, which lives as long
//   as the relay session holds it, or as the platform lets it (docs/ARCHITECTURE.md): a standby
//   lost before take() answered costs its run nothing but the wait (a fresh runner serves it).
// - EdgeHost: the run's host (a build's HOST), an entrypoint scoped to that run by its props
//   (the run token), which the guest's isolate cannot read. Its fetch lets through only the
//   routes a tab's run uses with its run token (/egress, /mcps-rpc, /workspace/bodies/*,
//   /workspace/commit, /files/<run>/out/*), sets the token, and hands the request to the
//   Worker's own fetch handler, so it is checked exactly as a tab's.

import { RpcTarget, WorkerEntrypoint } from "cloudflare:workers";
import Worker, { LedgerDO, SessionDO } from "../build/index.js";
import BUILDER from "../../dist/generated/edge-builder.json";
import RUNNER from "../../dist/edge/runner.txt";
import { publishLayer } from "../../public/lib/packages/publish.js";
import { asset, checkedText, heldOnce, listedRuntime } from "./assets.mjs";
import { STANDBY_MAX_AGE_MS, endingWithExit, isRunRoute, standbyFits } from "./edge-run.mjs";
import { pyodideModules } from "./edge-pyodide.mjs";

export { LedgerDO, SessionDO };
export default Worker;

const COMPATIBILITY_DATE = "2026-11-01";
// Production's wall behind the runner's own limits (its work budget): CPU time of the isolate.
const CPU_MS_GRACE = 1000;
// A run's timeout when its policy names none (relay-core's default limits).
const DEFAULT_TIMEOUT_MS = 60_000;
// The CPU limit of the last run's worker: the next standby is made with it.
let lastCpuMs = DEFAULT_TIMEOUT_MS + CPU_MS_GRACE;
// This Worker isolate's one standby, until a run takes it, its relay session drops it or another
// relay session's edge run ends.
let standbySlot = null;

// The runtime whose files the edge runs, and the two of them it needs, by their runtimes.json names.
const RUNTIME = "quickjs@";
const WASM_FILES = ["emscripten-module.wasm", "policy.wasm"];
// esbuild-wasm's binary, as scripts/build-assets.mjs copies it into the page's assets.
const ESBUILD_WASM = "esbuild.wasm";

/** esbuild.wasm's bytes, from the page's assets. */
function esbuildBytes(assets) {
  return heldOnce(ESBUILD_WASM, async () => (await asset(assets, ESBUILD_WASM)).arrayBuffer());
}

/** The deps builder's module text, from the page's assets, checked against this build's integrity. */
function builderText(assets) {
  return heldOnce(BUILDER.url, () => checkedText(assets, BUILDER));
}

/** QuickJS's and policy.wasm's bytes, from the page's assets. */
function runtimeWasm(assets) {
  return heldOnce(RUNTIME, async () => {
    const [, runtime] = await listedRuntime(assets, RUNTIME);
    return Promise.all(WASM_FILES.map(async (name) => (await asset(assets, runtime.files[name].url)).arrayBuffer()));
  });
}

/** The modules of a run_js's dynamic Worker: the runner, QuickJS and policy.wasm. */
async function quickJsModules(assets) {
  const [QUICKJS, POLICY] = await runtimeWasm(assets);
  return { "runner.js": { js: RUNNER }, "quickjs.wasm": { wasm: QUICKJS }, "policy.wasm": { wasm: POLICY } };
}

export class EdgeExecutor extends WorkerEntrypoint {
  async run(jobJson) {
    return runAtEdge(this, JSON.parse(jobJson));
  }

  /**
   * A Standby for the calling relay session: this Worker isolate's one, taken from the relay
   * session that held it (the one whose edge run ended last gets it; the other's next run finds
   * it let go and loads a fresh runner).
   */
  async standby() {
    standbySlot?.release();
    const modules = await quickJsModules(this.env.ASSETS);
    standbySlot = new Standby(this, loadRunner(this.env, modules, lastCpuMs), lastCpuMs);
    return standbySlot;
  }

  async build(jobJson) {
    const { build, caps } = JSON.parse(jobJson);
    const { runToken } = build;
    const worker = this.env.LOADER.load({
      compatibilityDate: COMPATIBILITY_DATE,
      mainModule: "builder.js",
      modules: { "builder.js": { js: await builderText(this.env.ASSETS) }, "esbuild.wasm": { wasm: await esbuildBytes(this.env.ASSETS) } },
      globalOutbound: null,
      env: { HOST: this.ctx.exports.EdgeHost({ props: { runToken, build: true } }) },
      limits: { cpuMs: caps.cpuMs },
    });
    const built = await withinWall(caps.wallMs, (signal) => guestBuild(worker, { build: build.build, sources: build.sources, caps }, signal));
    if (!built.layer) return JSON.stringify(built);
    // The run token only in the host's own requests; an upload's grant stands in its place.
    const send = async (path, init) => {
      const headers = new Headers({ authorization: `Bearer ${runToken}`, ...init.headers });
      const res = await ownFetch(this, new Request(new URL(path, "https://relay.internal"), { ...init, headers }));
      if (res.ok) return res;
      const body = await res.json().catch(() => null);
      throw Object.assign(new Error(body?.error?.message ?? `${init.method} ${path} answered ${res.status}`), { name: body?.error?.name });
    };
    try {
      await publishLayer(built.layer, built.resolved, send, () => {});
      return JSON.stringify({ ok: true });
    } catch (err) {
      return JSON.stringify({ error: { name: err.name, message: err.message } });
    }
  }
}

/** A fresh dynamic Worker running a runner (`modules`), no binding in its env, `cpuMs` its CPU limit. */
function loadRunner(env, modules, cpuMs) {
  return env.LOADER.load({ compatibilityDate: COMPATIBILITY_DATE, mainModule: "runner.js", modules, globalOutbound: null, env: {}, limits: { cpuMs } });
}

/**
 * Runs `job` on `entry`'s behalf in `standby`'s worker ({worker, cpuMs, madeAt}: a run_js's,
 * claimed) when it fits the run (standbyFits), else in a fresh one: its events, ended with an
 * exit (see the header).
 */
async function runAtEdge(entry, job, standby = null) {
  const runToken = job.announced.runToken;
  // The isolate holds no credential: its host adds the run token, and it needs no other.
  delete job.announced.runToken;
  delete job.announced.token;
  const manifest = JSON.parse(job.announced.inline.manifest);
  const { timeoutMs = DEFAULT_TIMEOUT_MS } = manifest.policy?.limits ?? {};
  const cpuMs = timeoutMs + CPU_MS_GRACE;
  let worker;
  if (manifest.language === "py") worker = loadRunner(entry.env, await pyodideModules(entry.env, COMPATIBILITY_DATE), cpuMs);
  else {
    lastCpuMs = cpuMs;
    const fits = standby && standbyFits(standby, { cpuMs, now: Date.now() });
    worker = fits ? standby.worker : loadRunner(entry.env, await quickJsModules(entry.env.ASSETS), cpuMs);
  }
  const host = entry.ctx.exports.EdgeHost({ props: { runToken } });
  const started = Date.now();
  const response = await worker.getEntrypoint().run(job, host);
  const events = endingWithExit(response.body, { runId: job.announced.runId, started, timeoutMs });
  return new Response(events, { headers: response.headers });
}

/**
 * A runner loaded and prepared before its run (the header's EdgeExecutor.standby), for one run:
 * take() claims it, run() then runs a job on it; a run that comes once it is stale (isFresh), for
 * another CPU limit, or in Python runs on a fresh runner. Stale, taken or disposed (its relay
 * session let go of it), it lets go of its worker, and this Worker isolate may make another.
 */
class Standby extends RpcTarget {
  constructor(entry, worker, cpuMs) {
    super();
    this.entry = entry;
    this.worker = worker;
    this.claimed = null;
    this.cpuMs = cpuMs;
    this.madeAt = Date.now();
    this.expiry = setTimeout(() => this.release(), STANDBY_MAX_AGE_MS);
    // Not awaited: a run that comes before it is done shares the QuickJS it is making.
    worker
      .getEntrypoint()
      .prepare()
      .catch(() => {});
  }

  /**
   * Claims the runner for the run to come, before its job is sent: whether it is claimed (not
   * when stale or taken already). Rejects when the runner's isolate cannot be reached: no job
   * was sent to it, so the run may go on a fresh runner without running twice.
   */
  async take() {
    const worker = this.worker;
    this.release();
    if (!worker) return false;
    await worker.getEntrypoint().take();
    this.claimed = worker;
    return true;
  }

  /** Runs `jobJson` on the runner take() claimed, or on a fresh one if it claimed none. */
  async run(jobJson) {
    const claimed = this.claimed && { worker: this.claimed, cpuMs: this.cpuMs, madeAt: this.madeAt };
    this.claimed = null;
    return runAtEdge(this.entry, JSON.parse(jobJson), claimed);
  }

  release() {
    clearTimeout(this.expiry);
    this.worker = null;
    if (standbySlot === this) standbySlot = null;
  }

  [Symbol.dispose]() {
    this.release();
  }
}

/**
 * The build's guest answer: {layer, resolved}, {cap, value, what} or {error}. An answer cut short or
 * malformed (its isolate died while answering) is the isolate dying.
 */
async function guestBuild(worker, job, signal) {
  const started = Date.now();
  try {
    const res = await worker.getEntrypoint().fetch("https://edge.invalid/build", { method: "POST", body: JSON.stringify(job), signal });
    if (!res.ok) return await res.json();
    const resolved = JSON.parse(res.headers.get("x-relay-resolved"));
    if (!Array.isArray(resolved)) throw new Error("its answer lists no resolved packages");
    return { layer: new Uint8Array(await res.arrayBuffer()), resolved };
  } catch (err) {
    if (signal.aborted) throw err;
    const message = `its isolate died after ${Date.now() - started} ms (${err.message}), most likely of its CPU time or its 128 MB of memory: list fewer or smaller packages, or build it once in a browser tab`;
    return { error: { name: "DepsResolutionFailed", message } };
  }
}

/**
 * `work(signal)`'s answer, or {cap: "wallMs", value} once `wallMs` have passed on this isolate's
 * timer (the guest's answer then aborted: the build yields to the event loop at each of the
 * bundler's plugin calls, so the timer fires).
 */
async function withinWall(wallMs, work) {
  const started = Date.now();
  const controller = new AbortController();
  let timer;
  const overtime = new Promise((resolve) => {
    timer = setTimeout(() => {
      controller.abort();
      resolve({ cap: "wallMs", value: Date.now() - started });
    }, wallMs);
  });
  try {
    return await Promise.race([work(controller.signal), overtime]);
  } finally {
    clearTimeout(timer);
  }
}

/** The Worker's own fetch handler, on behalf of entrypoint `entry` (its env). */
function ownFetch(entry, request) {
  return Worker.prototype.fetch.call(entry, request);
}

export class EdgeHost extends WorkerEntrypoint {
  async fetch(request) {
    const url = new URL(request.url);
    const { runToken, build = false } = this.ctx.props;
    if (!isRunRoute(request.method, url.pathname, { build })) {
      const message = `a ${build ? "build" : "run"} at the edge reaches only its own routes, not ${request.method} ${url.pathname}`;
      return Response.json({ error: { name: "Forbidden", message } }, { status: 403 });
    }
    const headers = new Headers(request.headers);
    headers.set("authorization", `Bearer ${runToken}`);
    const forwarded = new Request(new URL(url.pathname + url.search, "https://relay.internal"), { method: request.method, headers, body: request.body });
    return ownFetch(this, forwarded);
  }
}
