// The main module of each dynamic worker bench/edge-pyodide/index.js loads: Pyodide booted from
// modules only (a dynamic worker may not fetch, eval or compile wasm at run time), as the page's
// runner boots it (public/runner/pyodide.js): the wasm arrives compiled, Pyodide's fetch() of
// its files is answered from the data modules. Bundled by bench/edge-pyodide.mjs into
// build/guest.txt.
//
// POST /?stage=load|ready|run[&make=1] -> JSON {stage, guestMs: {...}} (make=1: the memory
// snapshot's bytes instead). The interpreter is kept in this isolate: a request to the same
// dynamic worker (LOADER.get) finds it booted.
// POST /?stage=guest with a JSON body {code, interrupt, ...}: runs `code` under the limits of
// ./limits.js (a work-counting interrupt, a hard stop, a heap cap) and says how it ended.

import "./as-browser.js";
import { loadPyodide } from "pyodide/pyodide.mjs";
import createPyodideModule from "pyodide/pyodide.asm.mjs";
import wasmModule from "./pyodide.asm.wasm";
import stdlib from "./python_stdlib.zip";
import lock from "./pyodide-lock.json";
import snapshot from "./snapshot.bin";
import { runLimited } from "./limits.js";

const INDEX_URL = "https://runtime.invalid/pyodide/";
const FILES = { "python_stdlib.zip": stdlib };
const evaluated = Date.now();
let booted = null; // Promise<pyodide> of this isolate

/** Pyodide's requests for its files, answered from memory while it loads. */
async function boot(makeSnapshot) {
  const { fetch } = globalThis;
  const instantiateStreaming = WebAssembly.instantiateStreaming;
  globalThis.fetch = async (input) => {
    const name = String(input).startsWith(INDEX_URL) ? String(input).slice(INDEX_URL.length) : null;
    if (name === "pyodide.asm.wasm") return new Response(new Uint8Array(0), { headers: { "content-type": "application/wasm" } });
    if (FILES[name]) return new Response(FILES[name]);
    throw new TypeError(`no network here: ${input}`);
  };
  WebAssembly.instantiateStreaming = async (_response, imports) => ({ instance: await WebAssembly.instantiate(wasmModule, imports), module: wasmModule });
  const snapshotOption = makeSnapshot ? { _makeSnapshot: true } : snapshot.byteLength ? { _loadSnapshot: new Uint8Array(snapshot) } : {};
  try {
    return await loadPyodide({ indexURL: INDEX_URL, lockFileContents: lock, createPyodideModule, ...snapshotOption });
  } finally {
    globalThis.fetch = fetch;
    WebAssembly.instantiateStreaming = instantiateStreaming;
  }
}

export default {
  async fetch(request) {
    const url = new URL(request.url);
    const stage = url.searchParams.get("stage");
    const make = url.searchParams.get("make") === "1";
    const t0 = Date.now();
    const guestMs = { sinceEvaluated: t0 - evaluated, snapshotBytes: snapshot.byteLength, warm: booted !== null };
    try {
      if (stage === "load") return Response.json({ stage, guestMs });
      booted ??= boot(make);
      const pyodide = await booted;
      guestMs.ready = Date.now() - t0;
      if (make) {
        // What the page's bootstrap imports before its snapshot (public/runner/pyodide.js).
        pyodide.runPython("import urllib.request, urllib.response, urllib.error, email.message");
        return new Response(pyodide.makeMemorySnapshot());
      }
      if (stage === "ready") return Response.json({ stage, guestMs });
      if (stage === "guest") return Response.json({ stage, guestMs, ...(await runLimited(pyodide, await request.json())) });
      let out = "";
      pyodide.setStdout({ batched: (line) => (out += `${line}\n`) });
      pyodide.runPython("print(1)");
      guestMs.run = Date.now() - t0 - guestMs.ready;
      // The interpreter's wasm memory (it only grows): against production's 128 MB an isolate.
      const heapMiB = pyodide._module.HEAPU8.buffer.byteLength / 2 ** 20;
      return Response.json({ stage, out, guestMs, heapMiB });
    } catch (err) {
      return Response.json({ stage, error: String(err?.stack ?? err) }, { status: 500 });
    }
  },
};
