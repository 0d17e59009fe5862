// Bytes kept in the Cache API under a known hash (capsule layers, runtime files). A cached copy
// is hashed again every time it is used, because a cache entry is only as good as whatever wrote
// it; a miss, or a copy that no longer matches, is fetched, checked and stored.

/**
 * @param cache an open Cache, or null where there is no Cache API (then nothing is kept)
 * @param key the request the bytes are kept under
 * @param options.expected the hash the bytes must have
 * @param options.hash async (ArrayBuffer) => string, in the form of `expected`
 * @param options.fetchBytes async () => ArrayBuffer: the bytes from the network
 * @param options.refuse (actual hash) => Error, for fetched bytes that do not match
 * @param options.store async (cache, key, bytes): how checked bytes are kept (cache.put)
 * @returns {Promise<ArrayBuffer>} bytes that hash to `expected`
 */
export async function checkedBytes(cache, key, { expected, hash, fetchBytes, refuse, store = put }) {
  const hit = await cache?.match(key);
  if (hit) {
    const bytes = await hit.arrayBuffer();
    if ((await hash(bytes)) === expected) return bytes;
  }
  const bytes = await fetchBytes();
  const actual = await hash(bytes);
  if (actual !== expected) throw refuse(actual);
  if (cache) await store(cache, key, bytes);
  return bytes;
}

function put(cache, key, bytes) {
  return cache.put(key, new Response(bytes));
}
