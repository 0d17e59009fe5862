// Loads a runtime's files for the sandbox (lib/sandbox.js): QuickJS or Pyodide, vendored by
// scripts/build-assets.mjs, plus the runner script built for it. runtimes.json lists each file
// with its SRI hash; a file comes from the Cache API (cache `relay-runtime-<id>`) when the copy
// there still has that hash (checked-cache.js hashes it again on every load), else from this
// server with `fetch(url, {integrity})`, which refuses bytes that do not match, and is then
// cached. A runtime rebuilt under the same id has new hashes, so its files are fetched again.
// Only this page's origin can write these caches: runner workers live in an opaque origin with
// no storage at all.
//
// The same cache keeps a runtime's memory snapshot (Pyodide's interpreter state after boot),
// labelled with the hashes of the files it was made from, so a reload skips the boot.
// policy.wasm, which every runtime lists, is not among them: see snapshotLabel.

import { sriOf } from "./bytes.js";
import { checkedBytes } from "./checked-cache.js";
import { memo } from "./memo.js";

const CACHE_PREFIX = "relay-runtime-";
// The SRI hashes of the files a cached snapshot was made from, stored with it.
const INTEGRITY_HEADER = "x-relay-integrity";
const SNAPSHOT = "snapshot.bin";
// Runtime files that a snapshot does not hold: each runner instantiates policy.wasm on its own,
// outside the interpreter's memory (runner/write-rule.js). Leaving it out of the label keeps
// the snapshots of every tab when only the policy changes, which saves each a cold boot (3 s+).
const NOT_IN_SNAPSHOT = new Set(["policy.wasm"]);

function runtimesJsonUrl() {
  return new URL("runtimes.json", location.href);
}

// Fetched once per page; a failed fetch is not remembered: the next run tries again.
const runtimeCatalog = memo(async () => {
  const res = await fetch(runtimesJsonUrl(), { cache: "no-cache" });
  if (!res.ok) throw new Error(`GET runtimes.json answered ${res.status}`);
  return res.json();
});

/** The ids of the runtimes this server serves (`quickjs@…`, `pyodide@…`). */
export async function runtimeIds() {
  return Object.keys(await runtimeCatalog());
}

/**
 * @returns {Promise<{[name: string]: ArrayBuffer}>} the runtime's files by name, plus
 *   snapshot.bin when a snapshot made from exactly these files is cached.
 */
export async function loadRuntimeFiles(runtimeId) {
  const { files, cache } = await runtimeEntry(runtimeId);
  const entries = await Promise.all(
    Object.entries(files).map(async ([name, file]) => {
      const url = new URL(file.url, runtimesJsonUrl());
      return [name, await cachedFile(cache, url, file.integrity)];
    }),
  );
  const snapshot = await cache?.match(snapshotUrl(runtimeId));
  if (snapshot?.headers.get(INTEGRITY_HEADER) === snapshotLabel(files)) {
    entries.push([SNAPSHOT, await snapshot.arrayBuffer()]);
  }
  return Object.fromEntries(entries);
}

/** One file of a runtime, checked and kept as loadRuntimeFiles() keeps them. */
export async function runtimeFile(runtimeId, name) {
  const { files, cache } = await runtimeEntry(runtimeId);
  if (!files[name]) throw new Error(`runtime ${runtimeId} has no file ${name}`);
  return cachedFile(cache, new URL(files[name].url, runtimesJsonUrl()), files[name].integrity);
}

/** Keeps a snapshot the sandbox made, for the next load of this runtime. */
export async function saveSnapshot(runtimeId, snapshot) {
  const { files, cache } = await runtimeEntry(runtimeId);
  await cache?.put(snapshotUrl(runtimeId), new Response(snapshot, { headers: { [INTEGRITY_HEADER]: snapshotLabel(files) } }));
}

/** Forgets a cached snapshot (the sandbox could not start from it). */
export async function dropSnapshot(runtimeId) {
  const { cache } = await runtimeEntry(runtimeId);
  await cache?.delete(snapshotUrl(runtimeId));
}

async function runtimeEntry(runtimeId) {
  const catalog = await runtimeCatalog();
  const runtime = catalog[runtimeId];
  if (!runtime) {
    throw new Error(`unknown runtime "${runtimeId}"; this server offers ${Object.keys(catalog).join(", ")}`);
  }
  const cache = self.caches ? await caches.open(CACHE_PREFIX + runtimeId) : null;
  return { files: runtime.files, cache };
}

function snapshotUrl(runtimeId) {
  return new URL(`${CACHE_PREFIX}${runtimeId}/${SNAPSHOT}`, runtimesJsonUrl());
}

/**
 * A snapshot is only good for the very files it was made from: the label of runtimes.json's
 * `files` of a runtime, the SRI hashes of those it was made from.
 */
export function snapshotLabel(files) {
  return Object.keys(files)
    .filter((name) => !NOT_IN_SNAPSHOT.has(name))
    .sort()
    .map((name) => files[name].integrity)
    .join(" ");
}

/** A file of this server checked against its SRI hash, from `cache` when the copy there still matches. */
export function cachedFile(cache, url, integrity) {
  return checkedBytes(cache, url, {
    expected: integrity,
    hash: (bytes) => sriOf(bytes, integrity),
    async fetchBytes() {
      const res = await fetch(url, { integrity, cache: "no-cache" });
      if (!res.ok) throw new Error(`GET ${url.pathname} answered ${res.status}`);
      return res.arrayBuffer();
    },
    refuse: (actual) => new Error(`GET ${url.pathname} gave bytes with ${actual}, not ${integrity}`),
  });
}
