// Loads a runtime's files (QuickJS or Pyodide, vendored by scripts/build-assets.mjs) for the
// runner. runtimes.json lists each file with its SRI hash; files come from the Cache API
// (cache `relay-runtime-<id>`) when a copy with the same hash is there, else from this server
// with `fetch(url, {integrity})`, which refuses bytes that do not match, and are then cached.
// A cached copy is checked against its hash again on every load.

import { network } from "./lockdown.js";

const CACHE_PREFIX = "relay-runtime-";
// The SRI a cached copy was verified against, stored with it: a rebuilt runtime under the same
// id (new hash) is fetched again instead of served stale.
const INTEGRITY_HEADER = "x-relay-integrity";

let catalogPromise;

function runtimesJsonUrl() {
  return new URL("runtimes.json", self.location.href);
}

function runtimeCatalog() {
  if (!catalogPromise) {
    catalogPromise = network.fetch(runtimesJsonUrl(), { cache: "no-cache" }).then((res) => {
      if (!res.ok) throw new Error(`GET runtimes.json answered ${res.status}`);
      return res.json();
    });
    // A failed fetch is not remembered: the next run tries again.
    catalogPromise.catch(() => (catalogPromise = null));
  }
  return catalogPromise;
}

/**
 * @returns {Promise<{baseUrl: string, files: Map<string, Uint8Array>}>} the runtime's files by
 *   name, and the URL of the directory they are served from.
 */
export async function loadRuntimeFiles(runtimeId) {
  const catalog = await runtimeCatalog();
  const runtime = catalog[runtimeId];
  if (!runtime) {
    throw new Error(`unknown runtime "${runtimeId}"; this server offers ${Object.keys(catalog).join(", ")}`);
  }
  const cache = network.caches ? await network.caches.open(CACHE_PREFIX + runtimeId) : null;
  const entries = await Promise.all(
    Object.entries(runtime.files).map(async ([name, file]) => {
      const url = new URL(file.url, runtimesJsonUrl());
      return [name, { url, bytes: await cachedFile(cache, url, file.integrity) }];
    }),
  );
  const [, first] = entries[0];
  return {
    baseUrl: new URL(".", first.url).href,
    files: new Map(entries.map(([name, { bytes }]) => [name, bytes])),
  };
}

/** The SRI string of `bytes` with the algorithm `integrity` names (sha256/384/512). */
async function sriOf(bytes, integrity) {
  const algorithm = integrity.slice(0, integrity.indexOf("-"));
  const digest = await crypto.subtle.digest(algorithm.replace("sha", "SHA-"), bytes);
  return `${algorithm}-${btoa(String.fromCharCode(...new Uint8Array(digest)))}`;
}

async function cachedFile(cache, url, integrity) {
  const hit = await cache?.match(url);
  if (hit?.headers.get(INTEGRITY_HEADER) === integrity) {
    // The cache is only as trustworthy as what wrote it: check the bytes, not the label.
    const bytes = new Uint8Array(await hit.arrayBuffer());
    if ((await sriOf(bytes, integrity)) === integrity) return bytes;
  }
  const res = await network.fetch(url, { integrity, cache: "no-cache" });
  if (!res.ok) throw new Error(`GET ${url.pathname} answered ${res.status}`);
  const bytes = new Uint8Array(await res.arrayBuffer());
  await cache?.put(
    url,
    new Response(bytes, {
      headers: { "content-type": res.headers.get("content-type") ?? "", [INTEGRITY_HEADER]: integrity },
    }),
  );
  return bytes;
}
