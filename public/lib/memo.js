// Remembers what an async loader gave, except failures: the promise is shared while it runs and
// kept once it succeeds, but forgotten when it rejects, so that the next caller tries again
// instead of getting the old failure for the rest of the page's life (the runtime catalog, the
// signing keys, a runtime loaded into the sandbox: a network blip must not break them for good).

/**
 * @param load (key) => Promise
 * @returns (key) => Promise: `load(key)`'s promise, kept per key unless it rejects; call it with
 *   no key where there is one thing to load. `.has(key)` says whether a promise is kept, and
 *   `.forget(key)` drops it so that the next call loads afresh.
 */
export function memo(load) {
  const kept = new Map();
  const get = (key) => {
    if (!kept.has(key)) {
      const loading = load(key);
      // Only this very promise is forgotten: a newer one may have replaced it (forget, then get).
      loading.catch(() => kept.get(key) === loading && kept.delete(key));
      kept.set(key, loading);
    }
    return kept.get(key);
  };
  get.has = (key) => kept.has(key);
  get.forget = (key) => kept.delete(key);
  return get;
}
