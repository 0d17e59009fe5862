// A run's dependency build, in a worker of the page's own origin so the page never waits on it:
// npm packages are resolved, fetched, checked and bundled with esbuild-wasm (served by this
// Worker, checked against the SRI hash built into this bundle, kept in the Cache API), each
// package and each subpath the code imports (lib/packages/npm-build.js, as at the edge); Python wheels are resolved by relay-core's
// resolver (policy.wasm), their requirements followed, and checked. The result is the deps layer's zip, which lib/deps-build.js
// uploads and finalizes. Everything is fetched through the Worker's /registry route.
// Messages: page -> {language, build, sources, runToken}; worker -> {progress: {phase, detail}}
// while it works, then {layer: Uint8Array, resolved: string[]} | {error: {name, message}}

import * as esbuild from "esbuild-wasm";
import ESBUILD_WASM from "relay-esbuild-wasm";
import { memo } from "./lib/memo.js";
import { buildNpm } from "./lib/packages/npm-build.js";
import { installPip } from "./lib/packages/pip.js";
import { Registry } from "./lib/packages/registry.js";
import { cachedFile } from "./lib/runtime-files.js";
import { zip } from "./lib/zip-writer.js";

const TOOLS_CACHE = "relay-build-tools";

self.onmessage = async ({ data: { language, build, sources, runToken } }) => {
  const progress = (phase, detail) => self.postMessage({ progress: { phase, detail } });
  try {
    const via = new Registry(runToken);
    const { files, resolved } =
      language === "js"
        ? await buildNpm(build, sources, via, progress, { esbuild, ready: startEsbuild() })
        : await installPip(build, sources, via, progress);
    const layer = await zip(Object.fromEntries(files));
    self.postMessage({ layer, resolved }, [layer.buffer]);
  } catch (err) {
    self.postMessage({ error: { name: err.name, message: err.message } });
  }
};

const startEsbuild = memo(async () => {
  const cache = self.caches ? await caches.open(TOOLS_CACHE) : null;
  const bytes = await cachedFile(cache, new URL(ESBUILD_WASM.url, self.location.href), ESBUILD_WASM.integrity);
  await esbuild.initialize({ wasmModule: await WebAssembly.compile(bytes), worker: false });
});
