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
// Within the caps the job carries (relay-core's EDGE_BUILD_CAPS), counted as the bytes arrive
// (registry.js's Budget): the download (package lists and tarballs, compressed, within the
// tree's bytes), the unpacked tree (bytes, files: each entry from its header, before its body is
// inflated), the bundles, and the layer's zip. The wall time is the host's timer; limits.cpuMs
// the isolate's.
//
// POST /build {build, sources, caps} -> 200 the layer's zip, header x-relay-resolved: JSON
// ["name@version"]; 422 {cap, value, what} past a cap (what: the package or bundle past it); 422 {error: {name, message}} when it failed.

import * as esbuild from "esbuild-wasm";
import wasmModule from "./esbuild.wasm";
import { buildNpm } from "../../public/lib/packages/npm-build.js";
import { Budget, Registry } from "../../public/lib/packages/registry.js";
import { zip } from "../../public/lib/zip-writer.js";

// registry.js resolves /registry against the page's location; here it is a host route.
const ORIGIN = "https://relay.invalid";
globalThis.location = new URL(`${ORIGIN}/`);

/** A build stopped at one of its caps, at `what` (the package or bundle past it), if known. */
class OverCap extends Error {
  constructor(cap, value, what) {
    super(`past the edge build cap ${cap}`);
    this.cap = cap;
    this.value = value;
    this.what = what;
  }
}

export default {
  async fetch(request, env) {
    globalThis.fetch = (input, init) => env.HOST.fetch(new Request(new URL(input, ORIGIN), init));
    const { build, sources, caps } = await request.json();
    // The host adds the run token (this isolate never holds it). The budget stops the build
    // at a cap as the bytes arrive: downloads, package lists, entries unpacked, bundles.
    const { downloadBytes, listBytes, treeBytes, treeFiles, bundleBytes } = caps;
    const budget = new Budget({ downloadBytes, listBytes, treeBytes, treeFiles, bundleBytes }, (cap, value, _limit, what) => new OverCap(cap, value, what));
    const via = new Registry("", budget);
    try {
      const ready = esbuild.initialize({ wasmModule, worker: false });
      const { files, resolved } = await buildNpm(build, sources, via, () => {}, { esbuild, ready });
      const layer = await zip(Object.fromEntries(files));
      if (layer.length > caps.layerBytes) throw new OverCap("layerBytes", layer.length);
      return new Response(layer, { headers: { "content-type": "application/zip", "x-relay-resolved": JSON.stringify(resolved) } });
    } catch (err) {
      const answer = err instanceof OverCap ? { cap: err.cap, value: err.value, what: err.what } : { error: { name: err.name, message: err.message } };
      return Response.json(answer, { status: 422 });
    }
  },
};
