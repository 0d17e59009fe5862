// The host of bench/edge-pyodide.mjs: each request loads a dynamic worker running Pyodide
// (guest.js) with Pyodide's files as modules, no network (globalOutbound: null), as relay-edge's
// EdgeExecutor loads its QuickJS runner (durable/js/entry.mjs).
//   GET /ready               "edge-pyodide": the bench's sign that this Worker is up
//   POST /bootstrap          a fresh dynamic worker boots Pyodide and makes its memory snapshot,
//                            kept here for later loads (the page makes its own the same way)
//   POST /cold?stage=S[&snapshot=1]  a fresh dynamic worker (LOADER.load), that stage
//   POST /warm?id=ID&stage=S[&snapshot=1]  the dynamic worker ID (LOADER.get): reused if alive
//   POST /cold?stage=guest&snapshot=1 with a JSON body: a fresh one runs it (guest.js, limits.js)
// The build/ files are copied by the bench script (.bin: data modules, .txt: text).

import GUEST from "./build/guest.txt";
import LOCK from "./build/pyodide-lock.json.txt";
import STDLIB from "./build/python_stdlib.zip.bin";
import WASM from "./build/pyodide.asm.wasm.bin";

let snapshot = new ArrayBuffer(0);

function code(withSnapshot) {
  return {
    compatibilityDate: "2026-11-01",
    mainModule: "guest.js",
    modules: {
      "guest.js": { js: GUEST },
      "pyodide.asm.wasm": { wasm: WASM },
      "python_stdlib.zip": { data: STDLIB },
      "pyodide-lock.json": { text: LOCK },
      "snapshot.bin": { data: withSnapshot ? snapshot : new ArrayBuffer(0) },
    },
    globalOutbound: null,
  };
}

function call(worker, stage, make = false, body = null) {
  return worker.getEntrypoint().fetch(`https://guest.invalid/?stage=${stage}${make ? "&make=1" : ""}`, { method: "POST", body });
}

/** The snapshot's size gzipped: about what it would weigh as a module of an uploaded Worker. */
async function gzipBytes(bytes) {
  const gzipped = new Response(new Blob([bytes]).stream().pipeThrough(new CompressionStream("gzip")));
  return (await gzipped.arrayBuffer()).byteLength;
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/ready") return new Response("edge-pyodide");
    const stage = url.searchParams.get("stage") ?? "run";
    const withSnapshot = url.searchParams.get("snapshot") === "1";
    if (withSnapshot && snapshot.byteLength === 0) return new Response("POST /bootstrap first", { status: 409 });
    try {
      if (url.pathname === "/bootstrap") {
        const res = await call(env.LOADER.load(code(false)), "ready", true);
        if (!res.ok) return res;
        snapshot = await res.arrayBuffer();
        return Response.json({ snapshotBytes: snapshot.byteLength, gzipBytes: await gzipBytes(snapshot) });
      }
      if (url.pathname === "/cold") return await call(env.LOADER.load(code(withSnapshot)), stage, false, await request.text());
      if (url.pathname === "/warm") return await call(env.LOADER.get(url.searchParams.get("id"), () => code(withSnapshot)), stage);
      return new Response("not found", { status: 404 });
    } catch (err) {
      return Response.json({ error: String(err?.stack ?? err) }, { status: 500 });
    }
  },
};
