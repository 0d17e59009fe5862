// What the edge executor reads from the page's static assets (the ASSETS binding): the runtimes'
// files, esbuild.wasm and the deps builder, each read once per Worker isolate.

import { sriOf } from "../../public/lib/bytes.js";

const held = new Map(); // key -> Promise, this isolate's

/** `make()`'s promise, kept for this isolate under `key`; a failure is not kept (the next call tries again). */
export function heldOnce(key, make) {
  if (!held.has(key)) {
    held.set(
      key,
      make().catch((err) => {
        held.delete(key);
        throw err;
      }),
    );
  }
  return held.get(key);
}

/** `path` of the page's assets, or an error saying the page is not built. */
export async function asset(assets, path) {
  const res = await assets.fetch(new URL(path, "https://assets.invalid/"));
  if (!res.ok) throw new Error(`the asset ${path} answered ${res.status}: is the page built?`);
  return res;
}

/**
 * The text of the asset `listed` names (`{url, integrity}`: a `sha384-<base64>` SRI hash, as
 * scripts/build-assets.mjs lists it), or an error naming it if its bytes are not the listed
 * ones (an asset of another build than this Worker's: deploy the page's assets and the Worker
 * together).
 */
export async function checkedText(assets, { url, integrity }) {
  const bytes = await (await asset(assets, url)).arrayBuffer();
  const found = await sriOf(bytes, integrity);
  if (found !== integrity) throw new Error(`the asset ${url} is ${found}, not ${integrity} as this Worker was built with: deploy the page's assets and the Worker from one build`);
  return new TextDecoder().decode(bytes);
}

/** `[id, entry]` of the runtime runtimes.json lists whose id starts with `prefix` (`quickjs@`). */
export async function listedRuntime(assets, prefix) {
  const runtimes = await (await asset(assets, "runtimes.json")).json();
  const found = Object.entries(runtimes).find(([id]) => id.startsWith(prefix));
  if (!found) throw new Error(`runtimes.json lists no ${prefix} runtime`);
  return found;
}
