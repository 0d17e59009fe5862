// What this browser offers of what the executor page leans on. Some of it the page cannot work
// without (`missingFeatures`): a browser that lacks any of it is told so, with the browsers
// that work, and the tab does not attach. The rest has a stated fallback (`degradations`): the
// page works, and its status area says what is different and why. Tested in Chromium, Firefox
// ESR and WebKitGTK (miniflare-tests/engines/); the README's compatibility table is the summary.

/** The browsers the executor works in: Ed25519 in WebCrypto is the newest thing it needs. */
export const WORKING_BROWSERS = "Chrome or Edge 137+, Firefox 129+ and Safari 17+";

/**
 * The page's necessities this browser lacks, in words for a person; [] when it has them all.
 * Capsule signatures are Ed25519 (WebCrypto), layers are deflated zips (DecompressionStream),
 * the runtimes are WebAssembly in Web Workers reached over MessagePorts.
 */
export async function missingFeatures(scope = globalThis) {
  const checks = [
    ["WebAssembly", () => typeof scope.WebAssembly?.compile === "function"],
    ["Web Workers", () => typeof scope.Worker === "function"],
    ["MessageChannel", () => typeof scope.MessageChannel === "function"],
    ['DecompressionStream("deflate-raw")', () => Boolean(new scope.DecompressionStream("deflate-raw"))],
    ["Ed25519 signatures in WebCrypto", () => scope.crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"])],
  ];
  const missing = [];
  for (const [name, check] of checks) {
    const has = await Promise.resolve()
      .then(check)
      .catch(() => false);
    if (!has) missing.push(name);
  }
  return missing;
}

/**
 * Whether the Cache API keeps what is put in it. It may exist and keep nothing: in WebKitGTK's
 * automation (ephemeral) sessions a cache that existed before the page reloaded lists nothing
 * and takes nothing, as the runtimes' caches would. So the probe's cache is kept across loads,
 * and each load puts a new value in it and reads it back.
 */
export async function cacheKeeps(scope = globalThis) {
  const url = new URL("relay-cache-probe", scope.location.href);
  const value = String(Math.random());
  try {
    const cache = await scope.caches.open("relay-cache-probe");
    await cache.put(url, new scope.Response(value));
    return (await (await cache.match(url))?.text()) === value;
  } catch {
    return false; // no Cache API at all
  }
}

/**
 * What works differently in this browser, as `{id: sentence}`: each a fallback the page takes.
 * @param found.workspace the backend the workspace opened with ("opfs" | "indexeddb")
 * @param found.cache whether the Cache API keeps what is put in it (`cacheKeeps`)
 * @param found.resultsByPost the results socket could not open: batches go by POST
 */
export function degradations({ workspace, cache, resultsByPost = false }, scope = globalThis) {
  const found = {};
  if (workspace === "indexeddb") {
    found.opfs = "workspace in IndexedDB: no Origin Private File System with writable files and Web Locks here, so tabs of one relay session see each other's files only after a reload";
  }
  if (!("Suspending" in scope.WebAssembly)) {
    found.jspi = "Python cannot block on a promise (no WebAssembly JSPI): top-level await and pyodide.http.pyfetch work, asyncio.run() and urllib.request do not";
  }
  if (!cache) found.cache = "the Cache API keeps nothing here: the runtimes are fetched again on every page load, and Pyodide boots without its memory snapshot";
  if (!("keepalive" in new scope.Request(scope.location.href))) {
    found.keepalive = "no keepalive fetch: a closed tab leaves its relay session by its lease, within 12 s, not at once";
  }
  if (resultsByPost) found.results = "results by POST: the results socket did not open (a proxy that refuses WebSockets?)";
  return found;
}

/** This browser's engine and major version for people, from its user agent. */
export function browserName(userAgent = navigator.userAgent) {
  const [, edge] = /Edg\/(\d+)/.exec(userAgent) ?? [];
  const [, firefox] = /Firefox\/(\d+)/.exec(userAgent) ?? [];
  const [, chrome] = /Chrom(?:e|ium)\/(\d+)/.exec(userAgent) ?? [];
  if (edge) return `Edge ${edge}`;
  if (firefox) return `Firefox ${firefox}`;
  if (chrome) return `Chrome ${chrome}`;
  if (/AppleWebKit/.test(userAgent)) return "Safari (WebKit)";
  return "an unknown browser";
}
