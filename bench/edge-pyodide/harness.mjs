// What the edge-pyodide benches share: building bench/edge-pyodide/build/ (guest.js bundled
// with Pyodide's JS, patched as limits.js says; Pyodide's wasm, stdlib and lock file copied as
// module files) and one timed request.

import { copyFile, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bundleGuest } from "../dev-worker.mjs";

export const DIR = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(DIR, "../..");
const BUILD = path.join(DIR, "build");
const PYODIDE = path.join(ROOT, "node_modules/pyodide");
export const READY = "edge-pyodide"; // what the Worker answers to GET /ready

// The runner owns the module text it passes, so it may change it. Each patch names the file and
// the exact text it replaces: a Pyodide whose text moved fails the build.
const PATCHES = {
  "pyodide.asm.mjs": [
    // The signal check's try/catch swallows what the buffer's getter throws: let HardStop
    // through (limits.js).
    ["Module.Py_EmscriptenSignalBuffer[0]=0;return result}catch(e){return 0}", "Module.Py_EmscriptenSignalBuffer[0]=0;return result}catch(e){if(e?.relayHardStop)throw e;return 0}"],
    // The wasm heap's cap, read at each growth (limits.js).
    ["getHeapMax=()=>4294901760", "getHeapMax=()=>globalThis.relayHeapMax??4294901760"],
  ],
  "pyodide.mjs": [
    // workerd's "hung" cancels (1-4% of boots): pyodide.mjs compiles a tiny wasm module
    // asynchronously when it is evaluated, and boot awaits it; when the request has nothing
    // else pending meanwhile, workerd takes it for hung (docs/BENCHMARKS.md). Compiled and
    // instantiated synchronously, nothing is left pending.
    ["let t=await WebAssembly.compile(G);return await WebAssembly.instantiate(t)", "let t=new WebAssembly.Module(G);return new WebAssembly.Instance(t)"],
  ],
};

/** esbuild plugin: Pyodide's modules with `patches` applied, each found exactly once. */
const patchPyodide = (patches) => ({
  name: "patch-pyodide",
  setup(build) {
    build.onLoad({ filter: /pyodide(\.asm)?\.mjs$/ }, async (args) => {
      let text = await readFile(args.path, "utf8");
      for (const [from, to] of patches[path.basename(args.path)] ?? []) {
        const at = text.indexOf(from);
        if (at < 0 || text.indexOf(from, at + 1) >= 0) throw new Error(`${args.path}: expected once: ${from}`);
        text = text.replace(from, to);
      }
      return { contents: text, loader: "js" };
    });
  },
});

/**
 * Builds build/. Experiments (docs/BENCHMARKS.md): `noMessageChannel` hides MessageChannel
 * before Pyodide evaluates, so Pyodide schedules its zero-delay callbacks with setTimeout
 * instead of a shared channel; `asyncCompile` leaves pyodide.mjs's asynchronous compile as it is.
 */
export async function build({ noMessageChannel = false, asyncCompile = false } = {}) {
  const patches = asyncCompile ? { ...PATCHES, "pyodide.mjs": [] } : PATCHES;
  await bundleGuest(DIR, {
    external: ["./pyodide.asm.wasm", "./python_stdlib.zip", "./pyodide-lock.json", "./snapshot.bin", "node:*", "ws", "fs", "fs/promises", "path", "url", "crypto", "child_process", "vm"],
    plugins: [patchPyodide(patches)],
    banner: noMessageChannel ? { js: "globalThis.MessageChannel = undefined;" } : {},
  });
  // Named for wrangler's default module rules: .bin is a data module, .txt a text one.
  for (const [from, to] of [["pyodide.asm.wasm", "pyodide.asm.wasm.bin"], ["python_stdlib.zip", "python_stdlib.zip.bin"], ["pyodide-lock.json", "pyodide-lock.json.txt"]]) {
    await copyFile(path.join(PYODIDE, from), path.join(BUILD, to));
  }
}

/** One POST, timed from here: {ms, body}; a failure throws with the guest's error. */
export async function timed(url, body) {
  const t0 = performance.now();
  const res = await fetch(url, { method: "POST", body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  const ms = performance.now() - t0;
  if (!res.ok) throw new Error(`${url}: ${res.status} ${text}`);
  return { ms, body: JSON.parse(text) };
}
