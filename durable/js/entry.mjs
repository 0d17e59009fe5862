// The Worker's main module (wrangler.toml `main`): worker-build's module (the Rust Worker, its
// fetch handler and the SessionDO) as it is, plus the two entrypoints of the edge executor
// (issue 27), which workers-rs cannot export: a class extending WorkerEntrypoint has to be an
// export of the main module, and worker-build exports only the Rust ones. Both are thin; every
// rule they reach is the Rust core's.
//
// - EdgeExecutor.run(jobJson): called by the relay session's DO (ctx.exports, from Rust) for a
//   run the run machine sent to the edge. Loads a fresh dynamic Worker for it (never reused:
//   LOADER.load, not get), with no network (globalOutbound: null), the runner of the capsule's
//   language (durable/js/edge-runner.js for JavaScript, edge-runner-pyodide.js for Python; built
//   by scripts/build-assets.mjs) and its runtime's files as modules (a dynamic worker may not
//   compile wasm at run time): QuickJS and policy.wasm; or Pyodide's wasm, stdlib, lock and
//   memory snapshot, and policy.wasm. Its one binding is HOST. Returns its NDJSON event stream,
//   ended with an exit event of its own if the isolate dies before it sends one (edge-run.mjs).
//   The files are the page's own static assets, listed in runtimes.json, read once per isolate
//   from the ASSETS binding; Python's memory snapshot is made once by a dynamic Worker and kept
//   in R2 (snapshotOf).
// - EdgeHost: HOST, an entrypoint scoped to that run by its props (the run token), which the
//   guest's isolate cannot read. Its fetch lets through only the routes a tab's run uses with its
//   run token (/egress, /mcps-rpc, /workspace/bodies/*, /workspace/commit, /files/<run>/out/*), sets the token,
//   and hands the request to the Worker's own fetch handler, so it is checked exactly as a tab's.

import { WorkerEntrypoint } from "cloudflare:workers";
import Worker, { LedgerDO, SessionDO } from "../build/index.js";
import RUNNER from "../../dist/edge/runner.txt";
import { endingWithExit, isRunRoute } from "./edge-run.mjs";

export { LedgerDO, SessionDO };
export default Worker;

const COMPATIBILITY_DATE = "2026-11-01";
// Production's wall behind the runner's own limits (its work budget): CPU time of the isolate.
const CPU_MS_GRACE = 1000;

/**
 * Each runtime the edge runs, by the manifest's language: its runtimes.json id's start: its files there, each passed to
 * the dynamic Worker as a module of that kind under that name; and its runner (QuickJS's in this
 * bundle; Pyodide's, 1.3 MB of Pyodide's JS, one of the page's assets, RUNNER_FILE).
 */
const RUNTIMES = {
  js: { id: "quickjs@", files: { "emscripten-module.wasm": ["quickjs.wasm", "wasm"], "policy.wasm": ["policy.wasm", "wasm"] } },
  py: {
    id: "pyodide@",
    files: {
      "pyodide.asm.wasm": ["pyodide.asm.wasm", "wasm"],
      "python_stdlib.zip": ["python_stdlib.zip", "data"],
      "pyodide-lock.json": ["pyodide-lock.json", "text"],
      "policy.wasm": ["policy.wasm", "wasm"],
    },
    runner: "edge/runner-pyodide.mjs",
  },
};
const RUNNER_FILE = "runner.js";
const runtimeModules = {}; // language -> Promise<{modules, shape}> of this isolate, once read

/** What this isolate read from the page's assets once: a failed read is not kept. */
function once(cache, key, read) {
  cache[key] ??= read().catch((err) => {
    delete cache[key];
    throw err;
  });
  return cache[key];
}

/**
 * The modules of `language`'s runtime, from the page's assets, and `shape`: what shaped them
 * (the runtime's id, each file's integrity, the runner's text) for the memory snapshot's key.
 * Bundled into the Worker, QuickJS's wasm alone would add 456 KiB gzipped to it, Pyodide's 30 MiB.
 */
function runtimeOf(assets, language) {
  return once(runtimeModules, language, async () => {
    const runtime = RUNTIMES[language];
    const read = async (path) => {
      const res = await assets.fetch(new URL(path, "https://assets.invalid/"));
      if (!res.ok) throw new Error(`the asset ${path} answered ${res.status}: is the page built?`);
      return res;
    };
    const runtimes = await (await read("runtimes.json")).json();
    const [id, listed] = Object.entries(runtimes).find(([id]) => id.startsWith(runtime.id)) ?? [];
    if (!listed) throw new Error(`runtimes.json lists no ${runtime.id} runtime`);
    const modules = runtime.runner ? { [RUNNER_FILE]: { js: await (await read(runtime.runner)).text() } } : { [RUNNER_FILE]: { js: RUNNER } };
    const kinds = Object.entries(runtime.files).map(async ([file, [name, kind]]) => {
      const res = await read(listed.files[file].url);
      modules[name] = { [kind]: kind === "text" ? await res.text() : await res.arrayBuffer() };
    });
    await Promise.all(kinds);
    const integrities = Object.keys(runtime.files).map((file) => listed.files[file].integrity);
    return { modules, shape: `${id}/${await sha256Hex(new TextEncoder().encode([modules[RUNNER_FILE].js, ...integrities].join("\n")))}` };
  });
}

async function sha256Hex(bytes) {
  return [...new Uint8Array(await crypto.subtle.digest("SHA-256", bytes))].map((b) => b.toString(16).padStart(2, "0")).join("");
}

// R2: Pyodide's memory snapshot, by what shaped it (runtimeOf's shape); its sha256 in its
// custom metadata. Not a tenant's: the retention sweeps list only their own prefixes.
const SNAPSHOT_PREFIX = "runtime-snapshots/";
const snapshots = {}; // shape -> Promise<ArrayBuffer> of this isolate

/**
 * Pyodide's memory snapshot for `runtime`: read from R2 (and checked against its sha256), else
 * made by a fresh dynamic Worker of the runner itself before any guest code exists, and kept.
 * Two isolates making it at once each write a whole, checked snapshot: the last stays.
 */
function snapshotOf(env, runtime) {
  return once(snapshots, runtime.shape, async () => {
    const key = SNAPSHOT_PREFIX + runtime.shape;
    const stored = await env.R2_CAPSULES.get(key);
    if (stored) {
      const bytes = await stored.arrayBuffer();
      if ((await sha256Hex(bytes)) === stored.customMetadata?.sha256) return bytes;
      console.warn(`edge: the stored Python snapshot ${key} does not match its sha256: made again`);
    }
    const started = Date.now();
    const maker = env.LOADER.load(dynamicWorker(runtime.modules, { "snapshot.bin": { data: new ArrayBuffer(0) } }, null, 60_000));
    const res = await maker.getEntrypoint().fetch("https://edge.invalid/snapshot", { method: "POST" });
    if (!res.ok) throw new Error(`the edge could not make Python's memory snapshot: ${await res.text()}`);
    const bytes = await res.arrayBuffer();
    const sha256 = await sha256Hex(bytes);
    await env.R2_CAPSULES.put(key, bytes, { sha256, customMetadata: { sha256 } });
    console.log(`edge: made Python's memory snapshot ${key} (${bytes.byteLength} bytes) in ${Date.now() - started} ms`);
    return bytes;
  });
}

/** A dynamic Worker's code: the runner and its modules, no network, `host` its one binding. */
function dynamicWorker(modules, extra, host, cpuMs) {
  return {
    compatibilityDate: COMPATIBILITY_DATE,
    mainModule: RUNNER_FILE,
    modules: { ...modules, ...extra },
    globalOutbound: null,
    env: host ? { HOST: host } : {},
    limits: { cpuMs },
  };
}

export class EdgeExecutor extends WorkerEntrypoint {
  async run(jobJson) {
    const job = JSON.parse(jobJson);
    const manifest = JSON.parse(job.announced.inline.manifest);
    const language = manifest.language === "py" ? "py" : "js";
    const runtime = await runtimeOf(this.env.ASSETS, language);
    const extra = language === "py" ? { "snapshot.bin": { data: await snapshotOf(this.env, runtime) } } : {};
    const runToken = job.announced.runToken;
    // The isolate holds no credential: HOST adds the run token, and it needs no other.
    delete job.announced.runToken;
    delete job.announced.token;
    const { timeoutMs = 60_000 } = manifest.policy?.limits ?? {};
    const host = this.ctx.exports.EdgeHost({ props: { runToken } });
    const worker = this.env.LOADER.load(dynamicWorker(runtime.modules, extra, host, timeoutMs + CPU_MS_GRACE));
    const started = Date.now();
    const response = await worker.getEntrypoint().fetch("https://edge.invalid/run", { method: "POST", body: JSON.stringify(job) });
    const events = endingWithExit(response.body, { runId: job.announced.runId, started, timeoutMs });
    return new Response(events, { headers: response.headers });
  }
}

export class EdgeHost extends WorkerEntrypoint {
  async fetch(request) {
    const url = new URL(request.url);
    if (!isRunRoute(request.method, url.pathname)) {
      const message = `a run at the edge reaches only its own routes, not ${request.method} ${url.pathname}`;
      return Response.json({ error: { name: "Forbidden", message } }, { status: 403 });
    }
    const headers = new Headers(request.headers);
    headers.set("authorization", `Bearer ${this.ctx.props.runToken}`);
    const forwarded = new Request(new URL(url.pathname + url.search, "https://relay.internal"), { method: request.method, headers, body: request.body });
    return Worker.prototype.fetch.call(this, forwarded);
  }
}
