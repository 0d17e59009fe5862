// A deps build at the edge (issue 27 item 5): the main module of the fresh dynamic Worker a
// build with no tab gets (entry.mjs's EdgeExecutor.build loads it, with globalOutbound null,
// limits.cpuMs, and esbuild.wasm as a module: a dynamic worker may not compile wasm at run
// time). It runs the tab's own build code, not a copy: packages resolved, fetched and checked
// by lib/packages/npm.js through lib/packages/registry.js, bundled by lib/packages/bundle.js
// with esbuild-wasm started on this thread, zipped by lib/zip-writer.js, so the same inputs
// give the same layer as on a tab. Its one `fetch` goes to env.HOST, the host entrypoint scoped
// to the build's run, which adds the run's token and lets through only GET /registry: the
// tenant's package sources, decided by the Worker as a tab's build's fetches are.
//
// Within the caps the job carries (relay-core's EDGE_BUILD_CAPS): the download and the
// unpacked tree (bytes, files), checked before bundling, and the layer. The wall time is the
// host's timer; limits.cpuMs the isolate's.
//
// POST /build {build, sources, caps} -> 200 the layer's zip, header x-relay-resolved: JSON
// ["name@version"]; 422 {cap, value} past a cap; 422 {error: {name, message}} when it failed.

import * as esbuild from "esbuild-wasm";
import wasmModule from "./esbuild.wasm";
import { buildNpm } from "../../public/lib/packages/npm-build.js";
import { Registry } from "../../public/lib/packages/registry.js";
import { zip } from "../../public/lib/zip-writer.js";

// registry.js resolves /registry against the page's location; here it is a host route.
const ORIGIN = "https://relay.invalid";
globalThis.location = new URL(`${ORIGIN}/`);

/** A build stopped at one of its caps. */
class OverCap extends Error {
  constructor(cap, value) {
    super(`past the edge build cap ${cap}`);
    this.cap = cap;
    this.value = value;
  }
}

export default {
  async fetch(request, env) {
    globalThis.fetch = (input, init) => env.HOST.fetch(new Request(new URL(input, ORIGIN), init));
    const { build, sources, caps } = await request.json();
    // The host adds the run token (this isolate never holds it); compressed packages past the
    // tree's cap are stopped as they arrive.
    const via = new Registry("", caps.treeBytes);
    try {
      const ready = esbuild.initialize({ wasmModule, worker: false });
      const checkTree = (files) => checkedTree(files, caps);
      const { files, resolved } = await buildNpm(build, sources, via, () => {}, { esbuild, ready, checkTree });
      const layer = await zip(Object.fromEntries(files));
      if (layer.length > caps.layerBytes) throw new OverCap("layerBytes", layer.length);
      return new Response(layer, { headers: { "content-type": "application/zip", "x-relay-resolved": JSON.stringify(resolved) } });
    } catch (err) {
      // A download past the tree's cap fails in registry.js: the cap's error.
      const over = err instanceof OverCap ? err : via.downloaded > caps.treeBytes ? new OverCap("treeBytes", via.downloaded) : null;
      const answer = over ? { cap: over.cap, value: over.value } : { error: { name: err.name, message: err.message } };
      return Response.json(answer, { status: 422 });
    }
  },
};

/** Throws OverCap when the unpacked tree holds more files or bytes than the caps allow. */
function checkedTree(files, caps) {
  if (files.size > caps.treeFiles) throw new OverCap("treeFiles", files.size);
  let bytes = 0;
  for (const contents of files.values()) bytes += contents.byteLength;
  if (bytes > caps.treeBytes) throw new OverCap("treeBytes", bytes);
}
