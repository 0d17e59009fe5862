// The main module of each dynamic worker bench/edge-esbuild/index.js loads: esbuild-wasm started
// from a module (a dynamic worker may not compile wasm at run time) on this thread (no Web
// Worker here), then the tab's own bundler (public/lib/packages/bundle.js) over a package tree
// sent in the request, as a build at the edge would run it. Bundled by bench/edge-esbuild.mjs.
//
// POST /?stage=load|init|build, body {files: {path: text}, specifiers: [name]} -> JSON
// {guestMs: {init, build}, outBytes, wasmMemMiB}

import * as esbuild from "esbuild-wasm";
import wasmModule from "./esbuild.wasm";
import { bundlePackages } from "../../public/lib/packages/bundle.js";

const encoder = new TextEncoder();

/** esbuild started here; its Go instance's memory (it only grows: the peak) is kept to read. */
async function start() {
  const instantiate = WebAssembly.instantiate;
  let instance = null;
  WebAssembly.instantiate = async (module, imports) => (instance = await instantiate(module, imports));
  try {
    await esbuild.initialize({ wasmModule, worker: false });
  } finally {
    WebAssembly.instantiate = instantiate;
  }
  return () => instance.exports.mem.buffer.byteLength / 2 ** 20;
}

export default {
  async fetch(request) {
    const stage = new URL(request.url).searchParams.get("stage");
    const guestMs = {};
    try {
      if (stage === "load") return Response.json({ stage, guestMs });
      let t0 = Date.now();
      const wasmMemMiB = await start();
      guestMs.init = Date.now() - t0;
      if (stage === "init") return Response.json({ stage, guestMs, wasmMemMiB: wasmMemMiB() });
      t0 = Date.now();
      const { files, specifiers } = await request.json();
      const tree = new Map(Object.entries(files).map(([path, text]) => [path, encoder.encode(text)]));
      guestMs.parse = Date.now() - t0;
      t0 = Date.now();
      const out = await bundlePackages(esbuild, tree, specifiers);
      guestMs.build = Date.now() - t0;
      const outBytes = [...out.values()].reduce((n, bytes) => n + bytes.byteLength, 0);
      return Response.json({ stage, guestMs, outBytes, outFiles: [...out.keys()], wasmMemMiB: wasmMemMiB() });
    } catch (err) {
      return Response.json({ stage, error: String(err?.stack ?? err) }, { status: 500 });
    }
  },
};
