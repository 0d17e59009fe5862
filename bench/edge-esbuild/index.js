// The host of bench/edge-esbuild.mjs: each request loads a fresh dynamic worker running
// esbuild-wasm (guest.js) with esbuild.wasm as a module, no network (globalOutbound: null), as
// relay-edge's EdgeExecutor loads its QuickJS runner (durable/js/entry.mjs).
//   GET /ready                 "edge-esbuild": the bench's sign that this Worker is up
//   POST /cold?stage=S         a fresh dynamic worker, that stage (guest.js); the body, a JSON
//                              package tree and specifiers, is passed on as the guest's input
// The build/ files are written by the bench script (.bin: a data module, .txt: a text one).

import GUEST from "./build/guest.txt";
import WASM from "./build/esbuild.wasm.bin";

const CODE = {
  compatibilityDate: "2026-11-01",
  mainModule: "guest.js",
  modules: { "guest.js": { js: GUEST }, "esbuild.wasm": { wasm: WASM } },
  globalOutbound: null,
};

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    if (url.pathname === "/ready") return new Response("edge-esbuild");
    if (url.pathname !== "/cold") return new Response("not found", { status: 404 });
    try {
      const stage = url.searchParams.get("stage") ?? "build";
      const worker = env.LOADER.load(CODE);
      return await worker.getEntrypoint().fetch(`https://guest.invalid/?stage=${stage}`, { method: "POST", body: await request.arrayBuffer() });
    } catch (err) {
      return Response.json({ error: String(err?.stack ?? err) }, { status: 500 });
    }
  },
};
