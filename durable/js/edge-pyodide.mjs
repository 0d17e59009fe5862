// What the edge executor's Python runs start with (issue 27 item 4), for entry.mjs's
// EdgeExecutor: the modules of each run_py's dynamic Worker. The runner
// (durable/js/edge-runner-pyodide.js, 1.3 MB with Pyodide's JS) and Pyodide's files are the
// page's own static assets, read once per isolate from the ASSETS binding (bundled into the
// Worker they would break the deploy check's bound; Pyodide's wasm is 9.6 MB, its stdlib 2.5 MB);
// the memory snapshot it boots from is made once by a dynamic Worker and kept in R2.

import { sha256Hex } from "../../public/lib/bytes.js";
import { asset, heldOnce, listedRuntime } from "./assets.mjs";

// Pyodide's files by their runtimes.json names: each module's name and kind.
const FILES = {
  "pyodide.asm.wasm": ["pyodide.asm.wasm", "wasm"],
  "python_stdlib.zip": ["python_stdlib.zip", "data"],
  "pyodide-lock.json": ["pyodide-lock.json", "text"],
  "policy.wasm": ["policy.wasm", "wasm"],
};
const RUNTIME = "pyodide@";
const RUNNER = "edge/runner-pyodide.mjs";
const MAIN_MODULE = "runner.js";
// R2: the snapshot, by what shaped it (runtime()'s shape); its sha256 in its custom metadata.
// Not a tenant's: the retention sweeps list only their own prefixes.
const SNAPSHOT_PREFIX = "runtime-snapshots/";
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
 * The runner and Pyodide's files as modules, and `shape`: what shaped a snapshot made with them
 * (the runtime's id, each file's integrity, the runner's text, which holds Pyodide's patched JS
 * and the bootstrap imports). A failed read is not kept.
 */
function runtimeFiles(assets) {
  return heldOnce(RUNTIME, async () => {
    const [id, listed] = await listedRuntime(assets, RUNTIME);
    const modules = { [MAIN_MODULE]: { js: await (await asset(assets, RUNNER)).text() } };
    const reads = Object.entries(FILES).map(async ([file, [name, kind]]) => {
      const res = await asset(assets, listed.files[file].url);
      modules[name] = { [kind]: kind === "text" ? await res.text() : await res.arrayBuffer() };
    });
    await Promise.all(reads);
    const shaping = [modules[MAIN_MODULE].js, ...Object.keys(FILES).map((file) => listed.files[file].integrity)];
    return { modules, shape: `${id}/${await sha256Hex(new TextEncoder().encode(shaping.join("\n")))}` };
  });
}

/**
 * Pyodide's memory snapshot for `runtime`: read from R2 (and checked against its sha256), else
 * made by a fresh dynamic Worker of the runner itself (POST /snapshot: no guest code exists
 * there), and kept. Two isolates making it at once each put a whole, checked snapshot: the last
 * stays. A failure is not kept: the next run tries again.
 */
function snapshotOf(env, runtime, compatibilityDate) {
  const key = SNAPSHOT_PREFIX + runtime.shape;
  return heldOnce(key, async () => {
    const stored = await env.R2_CAPSULES.get(key);
    if (stored) {
      const bytes = await stored.arrayBuffer();
      if ((await sha256Hex(bytes)) === stored.customMetadata?.sha256) return bytes;
      console.warn(`edge: the stored Python snapshot ${key} does not match its sha256: made again`);
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
    await env.R2_CAPSULES.put(key, bytes, { sha256, customMetadata: { sha256 } });
    console.log(`edge: made Python's memory snapshot ${key} (${bytes.byteLength} bytes) in ${Date.now() - started} ms`);
    return bytes;
  });
}
