// The patches the edge's Python runner applies to Pyodide's module text (issue 27 item 4),
// shared by its build (scripts/build-assets.mjs) and the bench that found them
// (bench/edge-pyodide/harness.mjs; figures in docs/BENCHMARKS.md). The runner owns the module
// text it passes to its dynamic worker, so it may change it. Each patch names the file and the
// exact text it replaces: a Pyodide whose text moved fails the build, never a run.

import { readFile } from "node:fs/promises";
import path from "node:path";

export const PYODIDE_PATCHES = {
  "pyodide.asm.mjs": [
    // The signal check's try/catch swallows what the interrupt buffer's getter throws: let the
    // hard stop through (public/runner/python-limits.js), so it unwinds the interpreter.
    // And it reads the runner's buffer (globalThis.relaySignalBuffer, out of the guest's reach)
    // where there is one, not the Module's, which a guest holding the Module could replace.
    [
      "function _Py_CheckEmscriptenSignals_Helper(){if(!Module.Py_EmscriptenSignalBuffer){return 0}try{let result=Module.Py_EmscriptenSignalBuffer[0];Module.Py_EmscriptenSignalBuffer[0]=0;return result}catch(e){return 0}}",
      "function _Py_CheckEmscriptenSignals_Helper(){const buffer=globalThis.relaySignalBuffer??Module.Py_EmscriptenSignalBuffer;if(!buffer){return 0}try{let result=buffer[0];buffer[0]=0;return result}catch(e){if(e?.relayHardStop)throw e;return 0}}",
    ],
    // The wasm heap's cap, read at each growth: past it an allocation fails, Python raises MemoryError.
    ["getHeapMax=()=>4294901760", "getHeapMax=()=>globalThis.relayHeapMax??4294901760"],
  ],
  "pyodide.mjs": [
    // workerd's "hung" cancels (1-4% of boots): pyodide.mjs compiles a tiny wasm module
    // asynchronously when it is evaluated, and boot awaits it; when the request has nothing
    // else pending meanwhile, workerd takes it for hung. Compiled and instantiated
    // synchronously, nothing is left pending (0 hangs in 400 boots).
    ["let t=await WebAssembly.compile(G);return await WebAssembly.instantiate(t)", "let t=new WebAssembly.Module(G);return new WebAssembly.Instance(t)"],
  ],
};

/** esbuild plugin: Pyodide's modules with `patches` applied, each found exactly once. */
export const patchPyodide = (patches = PYODIDE_PATCHES) => ({
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
