// Fetches a capsule the server announced and checks it before anything runs: the manifest's
// signature (jws.js) and shape, each layer's size and sha256; then unzips the layers into the
// file map the runner takes. A small capsule's files come inline in its announcement (the
// manifest as text, layers as base64: one round trip fewer each, for every new capsule) and are
// checked exactly as fetched ones are. Layers are content-addressed, so verified ones are kept
// in the Cache API (keyed by sha256) and identical code or deps are not downloaded again; the
// last few are also kept unzipped in memory, so a repeated call runs without reading, hashing or
// inflating its layers again (memory the page alone writes needs no second check). A manifest
// without limits gets relay-core's defaults (policy::Limits, generated at build time by
// scripts/build-assets.mjs), not a copy of them.

import DEFAULT_LIMITS from "relay-default-limits";
import { fromBase64, sha256Hex } from "./bytes.js";
import { canonicalJson } from "./canonical-json.js";
import { checkedBytes } from "./checked-cache.js";
import { ValidationError } from "./errors.js";
import { fetchOk, withRetry } from "./http.js";
import { verifyManifestSignature } from "./jws.js";
import { unzip } from "./zip.js";

const LAYER_CACHE = "relay-capsule-layers";
const MAX_CACHED_LAYERS = 32;
const MAX_KNOWN_MANIFESTS = 64;
// Unzipped layers kept in memory, by sha256, least recently used dropped first past this size.
const MAX_UNZIPPED_BYTES = 64 * 1024 * 1024;
const unzippedLayers = new Map(); // sha256 -> {files, bytes}

// Manifests already fetched and verified, by capsule hash. The hash is the sha256 of the
// manifest's canonical form (checked below), so a known hash needs no second download.
const knownManifests = new Map();

/**
 * @param announced the `capsule` SSE event's data: {hash, manifestUrl, token, language,
 *   inline?: {manifest, layers: {path: base64}}}; the token (sent as `Authorization: Bearer`)
 *   reads this capsule's files that are not inline
 * @returns {Promise<{manifest, files: Object<string, Uint8Array>, limits}>}
 * @throws {ValidationError} when the capsule must be refused
 */
export async function loadCapsule(announced, keyRing, { signal } = {}) {
  const manifestUrl = new URL(announced.manifestUrl, location.href);
  const init = { headers: { authorization: `Bearer ${announced.token}` }, signal };
  const manifest = knownManifests.get(announced.hash) ?? (await fetchManifest(announced, manifestUrl, keyRing, init));
  const inlineLayers = announced.inline?.layers ?? {};
  const layers = await Promise.all(manifest.fsLayers.map((layer) => layerFiles(layer, inlineLayers[layer.path], manifestUrl, init)));
  const files = {};
  for (const [i, layerFiles] of layers.entries()) Object.assign(files, confined(manifest.fsLayers[i], layerFiles));
  const entry = manifest.entry.path.slice(1);
  if (!files[entry]) throw new ValidationError(`entry ${manifest.entry.path} is not in any layer`);
  return { manifest, files, limits: { ...DEFAULT_LIMITS, ...manifest.policy?.limits } };
}

/**
 * What the runner gets from a checked capsule: stdin travels in the manifest's entry; the
 * workspace as it is now (path -> bytes, the cap `workspaceLimit`), and the filesystem policy
 * the runner applies to guest writes. The page and the edge executor both make it here.
 */
export function runnerJob(runId, { manifest, files, limits }, workspace, workspaceLimit) {
  const { path, argv = [], env = {}, cwd = "/", stdin = "" } = manifest.entry;
  return {
    runId,
    language: manifest.language,
    runtimeId: manifest.runtime.id,
    files,
    entry: { path, argv, env, cwd, stdin },
    limits,
    workspace,
    workspaceLimit,
    filesystem: manifest.policy.filesystem,
  };
}

// A deps layer (built by a tab, reused across capsules) holds packages only: it can never
// replace the call's own code.
const DEPS_DIRS = ["node_modules/", "wheels/"];

function confined(layer, files) {
  if (layer.id !== "deps") return files;
  const stray = Object.keys(files).find((path) => !DEPS_DIRS.some((dir) => path.startsWith(dir)));
  if (stray) throw new ValidationError(`the deps layer holds ${stray}, outside ${DEPS_DIRS.join(" and ")}`);
  return files;
}

/** Keeps a layer this tab just built and uploaded, so running its capsule downloads nothing. */
export async function rememberLayer(sha256, bytes) {
  if (self.caches) await remember(await caches.open(LAYER_CACHE), layerCacheKey(sha256), bytes);
}

async function fetchManifest(announced, manifestUrl, keyRing, init) {
  const inline = announced.inline?.manifest;
  const fetchText = async () => (await fetchOk(manifestUrl, init)).text();
  const text = typeof inline === "string" ? inline : await withRetry(fetchText, { signal: init.signal });
  const manifest = parseManifest(text);
  await verifyManifestSignature(manifest, keyRing);
  checkManifest(manifest, announced.language);
  const { sig, ...unsigned } = manifest;
  const hash = await sha256Hex(new TextEncoder().encode(canonicalJson(unsigned)));
  if (hash !== announced.hash) throw new ValidationError(`capsule.json hashes to ${hash}, not the announced ${announced.hash}`);
  knownManifests.set(hash, manifest);
  if (knownManifests.size > MAX_KNOWN_MANIFESTS) knownManifests.delete(knownManifests.keys().next().value);
  return manifest;
}

function parseManifest(text) {
  try {
    return JSON.parse(text);
  } catch {
    throw new ValidationError("capsule.json is not JSON");
  }
}

function checkManifest(manifest, language) {
  const fail = (why) => {
    throw new ValidationError(why);
  };
  if (manifest.language !== language) fail(`manifest language "${manifest.language}" differs from the announced "${language}"`);
  if (typeof manifest.runtime?.id !== "string") fail("manifest has no runtime.id");
  if (typeof manifest.entry?.path !== "string" || !manifest.entry.path.startsWith("/")) fail("manifest entry.path must be absolute");
  if (!Array.isArray(manifest.fsLayers)) fail("manifest has no fsLayers");
  for (const layer of manifest.fsLayers) {
    if (!/^[0-9a-f]{64}$/.test(layer.sha256 ?? "")) fail(`layer ${layer.id} has no sha256`);
    if (!/^[\w.-]+$/.test(layer.path ?? "") || layer.path.startsWith(".")) fail(`layer ${layer.id} has a bad path "${layer.path}"`);
  }
}

/** A layer's files: kept in memory, else unzipped from its verified bytes (and kept). */
async function layerFiles(layer, inline, manifestUrl, init) {
  const kept = unzippedLayers.get(layer.sha256);
  if (kept) {
    unzippedLayers.delete(layer.sha256); // and set again below: now the most recently used
    unzippedLayers.set(layer.sha256, kept);
    return kept.files;
  }
  const files = await unzip(await layerBytes(layer, inline, manifestUrl, init));
  const bytes = Object.values(files).reduce((sum, data) => sum + data.byteLength, 0);
  unzippedLayers.set(layer.sha256, { files, bytes });
  let total = [...unzippedLayers.values()].reduce((sum, entry) => sum + entry.bytes, 0);
  for (const [sha256, entry] of unzippedLayers) {
    if (total <= MAX_UNZIPPED_BYTES) break;
    unzippedLayers.delete(sha256);
    total -= entry.bytes;
  }
  return files;
}

/**
 * A layer's verified bytes: from its announcement (`inline`: base64; no need to keep it in the
 * layer cache, it comes with every announcement), else from the layer cache, else from the
 * server next to the manifest.
 */
async function layerBytes(layer, inline, manifestUrl, init) {
  const inlined = typeof inline === "string";
  const cache = self.caches && !inlined ? await caches.open(LAYER_CACHE) : null;
  // Layers sit beside capsule.json and take the same token.
  const url = new URL(layer.path, manifestUrl);
  const bytes = await checkedBytes(cache, layerCacheKey(layer.sha256), {
    expected: layer.sha256,
    hash: sha256Hex,
    async fetchBytes() {
      const fetchLayer = async () => (await fetchOk(url, init)).arrayBuffer();
      const bytes = inlined ? fromBase64(inline).buffer : await withRetry(fetchLayer, { signal: init.signal });
      if (layer.size !== undefined && bytes.byteLength !== layer.size) {
        throw new ValidationError(`layer ${layer.id} is ${bytes.byteLength} bytes, the manifest says ${layer.size}`);
      }
      return bytes;
    },
    refuse: (digest) => new ValidationError(`layer ${layer.id} has sha256 ${digest}, the manifest says ${layer.sha256}`),
    store: remember,
  });
  return new Uint8Array(bytes);
}

function layerCacheKey(sha256) {
  return new URL(`/.relay-layers/${sha256}`, location.origin);
}

async function remember(cache, key, bytes) {
  await cache.put(key, new Response(bytes));
  const keys = await cache.keys(); // oldest first
  await Promise.all(keys.slice(0, Math.max(0, keys.length - MAX_CACHED_LAYERS)).map((old) => cache.delete(old)));
}
