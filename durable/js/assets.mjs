// What the edge executor reads from the page's static assets (the ASSETS binding): the runtimes'
// files and esbuild.wasm, each read once per Worker isolate.

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

/** `[id, entry]` of the runtime runtimes.json lists whose id starts with `prefix` (`quickjs@`). */
export async function listedRuntime(assets, prefix) {
  const runtimes = await (await asset(assets, "runtimes.json")).json();
  const found = Object.entries(runtimes).find(([id]) => id.startsWith(prefix));
  if (!found) throw new Error(`runtimes.json lists no ${prefix} runtime`);
  return found;
}
