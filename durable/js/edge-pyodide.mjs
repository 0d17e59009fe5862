// What the edge executor's Python runs start with (issue 27 item 4), for entry.mjs's
// EdgeExecutor: the modules of each run_py's dynamic Worker. The runner
// (durable/js/edge-runner-pyodide.js, 1.3 MB with Pyodide's JS) and Pyodide's files are the
// page's own static assets, read once per isolate from the ASSETS binding (bundled into the
// Worker they would break the deploy check's bound; Pyodide's wasm is 9.6 MB, its stdlib 2.5 MB);
// the memory snapshot it boots from is made once by a dynamic Worker and kept in R2, sealed
// with a MAC that the Worker's Rust makes and checks (relay_core::runtime_snapshot: its key
// too), under a key that never comes here.

import { RuntimeSnapshot } from "../build/index.js";
import { sha256Hex } from "../../public/lib/bytes.js";
import { asset, heldOnce, listedRuntime } from "./assets.mjs";

// Pyodide's files by their runtimes.json names: each module's name and kind (the files that shape
// the snapshot's key: relay_core::runtime_snapshot::EDGE_FILES).
const FILES = {
  "pyodide.asm.wasm": ["pyodide.asm.wasm", "wasm"],
  "python_stdlib.zip": ["python_stdlib.zip", "data"],
  "pyodide-lock.json": ["pyodide-lock.json", "text"],
  "policy.wasm": ["policy.wasm", "wasm"],
};
// The runtime and the runner whose texts shape the snapshot's key: relay_core::runtime_snapshot's
// RUNTIME and RUNNER_ASSET.
const RUNTIME = "pyodide@";
const RUNNER = "edge/runner-pyodide.mjs";
const MAIN_MODULE = "runner.js";
// A snapshot is made in 2-10 s of CPU here: its maker's wall in production.
const SNAPSHOT_CPU_MS = 60_000;

/**
 * The modules of a run_py's dynamic Worker (its main module is `runner.js`): the runner,
 * Pyodide's files and the memory snapshot. `compatibilityDate` is the edge's.
 */
export async function pyodideModules(env, compatibilityDate) {
  const runtime = await runtimeFiles(env.ASSETS);
  const snapshot = await snapshotOf(env, runtime, compatibilityDate);
  return { ...runtime.modules, "snapshot.bin": { data: snapshot } };
}

/**
 * The runner and Pyodide's files as modules, and `key`: the R2 key of a snapshot made with
 * them, by the Rust's rule from runtimes.json and the runner's text (the retention sweep's
 * too). A failed read is not kept.
 */
function runtimeFiles(assets) {
  return heldOnce(RUNTIME, async () => {
    const [, listed] = await listedRuntime(assets, RUNTIME);
    const modules = { [MAIN_MODULE]: { js: await (await asset(assets, RUNNER)).text() } };
    const reads = Object.entries(FILES).map(async ([file, [name, kind]]) => {
      const res = await asset(assets, listed.files[file].url);
      modules[name] = { [kind]: kind === "text" ? await res.text() : await res.arrayBuffer() };
    });
    await Promise.all(reads);
    const runtimesJson = await (await asset(assets, "runtimes.json")).text();
    return { modules, key: RuntimeSnapshot.key(runtimesJson, modules[MAIN_MODULE].js) };
  });
}

/**
 * Pyodide's memory snapshot for `runtime`: read from R2 under its key when its seal checks
 * (the Worker's Rust checks it: the seal's key stays there), else made by a fresh
 * dynamic Worker of the runner itself (POST /snapshot: no guest code exists there), sealed and
 * kept. Two isolates making it at once each put a whole, sealed snapshot: the last stays. A
 * failure is not kept: the next run tries again.
 */
function snapshotOf(env, runtime, compatibilityDate) {
  const { key } = runtime;
  return heldOnce(key, async () => {
    const stored = await env.R2_CAPSULES.get(key);
    if (stored) {
      const bytes = await stored.arrayBuffer();
      if (RuntimeSnapshot.verify(env, key, await sha256Hex(bytes), stored.customMetadata?.hmac ?? "")) return bytes;
      console.warn(`edge: the stored Python snapshot ${key} is not sealed by this Worker's snapshot key (derived from CAPSULE_SIGNING_KEY): made again`);
    }
    const started = Date.now();
    const maker = env.LOADER.load({
      compatibilityDate,
      mainModule: MAIN_MODULE,
      modules: { ...runtime.modules, "snapshot.bin": { data: new ArrayBuffer(0) } },
      globalOutbound: null,
      env: {},
      limits: { cpuMs: SNAPSHOT_CPU_MS },
    });
    const res = await maker.getEntrypoint().fetch("https://edge.invalid/snapshot", { method: "POST" });
    if (!res.ok) throw new Error(`the edge could not make Python's memory snapshot: ${await res.text()}`);
    const bytes = await res.arrayBuffer();
    const sha256 = await sha256Hex(bytes);
    await env.R2_CAPSULES.put(key, bytes, { sha256, customMetadata: { hmac: RuntimeSnapshot.seal(env, key, sha256) } });
    console.log(`edge: made Python's memory snapshot ${key} (${bytes.byteLength} bytes) in ${Date.now() - started} ms`);
    return bytes;
  });
}
