// The edge executor's runner for run_py (issue 27 item 4): Pyodide, the page's runner/pyodide.js
// and relay_run.py, in the fresh dynamic Worker of each run, booted from the memory snapshot
// entry.mjs passes (made by this same module, POST /snapshot, in a fresh isolate of its own).
// Pyodide's files come as modules (a dynamic worker may not fetch, eval or compile wasm at run
// time): the wasm compiled by the loader, the stdlib, lock and snapshot as data. This module is
// built with Pyodide's JS bundled and patched (scripts/pyodide-patches.mjs): the hard stop, the
// heap cap, the small wasm helper compiled synchronously. What it does around the run:
// edge-serve.js; how Python is stopped: runner/python-limits.js.

import "./as-browser.js";
import pyodideWasm from "./pyodide.asm.wasm";
import policyWasm from "./policy.wasm";
import stdlib from "./python_stdlib.zip";
import lock from "./pyodide-lock.json";
import snapshot from "./snapshot.bin";
import { pyodideEngine } from "../../public/runner/pyodide.js";
import { edgeRunner } from "./edge-serve.js";

const MODULES = { "pyodide.asm.wasm": pyodideWasm, "policy.wasm": policyWasm };
const files = () => ({ "python_stdlib.zip": new Uint8Array(stdlib), "pyodide-lock.json": new TextEncoder().encode(lock) });

export default edgeRunner({
  modules: MODULES,
  start: () => pyodideEngine.start({ modules: MODULES, files: files(), snapshot: snapshot.byteLength ? new Uint8Array(snapshot) : undefined }),
  snapshot: () => pyodideEngine.bootstrap({ modules: MODULES, files: files() }),
  // CPython's signal reads (eval-loop reads count 1, C code's 0.1) a millisecond of guest work
  // is worth: pure-Python loops make 58-269 a ms here, `while True: pass` ~1,100.
  ticksPerMs: 100,
});
