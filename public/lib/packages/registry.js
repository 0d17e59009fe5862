// How a build reaches its package sources: every request goes to this Worker's `/registry?url=`
// under the run's token (the page may connect to nothing else), which fetches it only if it lies
// under the tenant's npm registry or Python index. Also the checks a download must pass before
// any of it is used: the registry's published digest, and the build's budget (counted as it arrives).

import { concatBytes, sha256Hex, sriOf } from "../bytes.js";
import { namedError } from "../errors.js";

const MIB = 1024 * 1024;
/** All tarballs of one build together, compressed as downloaded. */
export const MAX_DOWNLOAD_BYTES = 64 * MIB;
/** All package lists (packuments, PyPI documents) of one build together, as decoded. */
export const MAX_LIST_BYTES = 64 * MIB;

/**
 * A build's running totals against its caps, counted as the bytes arrive (so a gzip bomb or a
 * tarball of countless entries stops at the cap, not after it is all in memory): `downloadBytes`
 * (the packages' archives, compressed as downloaded), `listBytes` (the package lists, as
 * decoded), `treeBytes` and `treeFiles` (the unpacked tarballs' entries), `bundleBytes` (the
 * bundles and maps, raw). A cap not given is unlimited; past one, `over(cap, value, limit, what)`'s
 * error is thrown, naming the package (`what`) that crossed it.
 */
export class Budget {
  constructor(caps, over = overMessage) {
    this.caps = caps;
    this.over = over;
    this.used = {};
  }

  /** Adds `n` to `cap`'s total; throws past the cap, naming `what`. */
  count(cap, n, what) {
    const used = this.tally(cap, n);
    const limit = this.caps[cap] ?? Infinity;
    if (used > limit) throw this.over(cap, used, limit, what);
  }

  /** Adds `n` to the build's `counter` (a cap's or a bound's the caller keeps); its new total. */
  tally(counter, n) {
    this.used[counter] = (this.used[counter] ?? 0) + n;
    return this.used[counter];
  }
}

const CAP_WORDS = {
  downloadBytes: "downloaded more than (its packages' archives, compressed)",
  listBytes: "read more than (its package lists)",
  treeBytes: "unpacked more than (its packages' files)",
  treeFiles: "unpacked more files than",
  bundleBytes: "bundled more than (its bundles and their source maps)",
};

function overMessage(cap, value, limit, what) {
  const amount = cap === "treeFiles" ? `${limit}` : `${limit / MIB} MiB`;
  return failed(`${what}: the build ${CAP_WORDS[cap]} ${amount}; list fewer or smaller packages`);
}

export class Registry {
  /**
   * @param runToken the `build` command's run token
   * @param budget the build's Budget (a tab's: its downloads only)
   */
  constructor(runToken, budget = new Budget({ downloadBytes: MAX_DOWNLOAD_BYTES, listBytes: MAX_LIST_BYTES })) {
    this.runToken = runToken;
    this.budget = budget;
  }

  /** Bytes downloaded so far (tarballs and package lists). */
  get downloaded() {
    return (this.budget.used.downloadBytes ?? 0) + (this.budget.used.listBytes ?? 0);
  }

  /**
   * GET `url` through the Worker; the response (null for a 404 when `orAbsent`), or a
   * DepsResolutionFailed naming `what`.
   */
  async get(url, what, accept = "*/*", orAbsent = false) {
    const proxied = new URL(`/registry?url=${encodeURIComponent(url)}`, self.location.href);
    let res;
    try {
      res = await fetch(proxied, { headers: { authorization: `Bearer ${this.runToken}`, accept } });
    } catch (err) {
      throw failed(`${what}: could not reach ${url}: ${err.message}`);
    }
    if (res.ok) return res;
    if (orAbsent && res.status === 404) return null;
    const body = await res.json().catch(() => null);
    const why = body?.error ? `${body.error.name}: ${body.error.message}` : `HTTP ${res.status}`;
    throw failed(`${what}: ${url} answered ${res.status === 404 ? "404 (no such package or file)" : why}`);
  }

  async json(url, what, accept) {
    return this.parsed(await this.get(url, what, accept), url, what);
  }

  /** The JSON at `url`, or null when the source has nothing there (404). */
  async jsonIfThere(url, what, accept) {
    const res = await this.get(url, what, accept, true);
    return res && this.parsed(res, url, what);
  }

  /** The bytes at `url`, counted against the build's download budget. */
  async bytes(url, what) {
    return this.counted(await this.get(url, what), url, what, "downloadBytes");
  }

  async parsed(res, url, what) {
    const body = new TextDecoder().decode(await this.counted(res, url, what, "listBytes"));
    try {
      return JSON.parse(body);
    } catch (err) {
      throw failed(`${what}: ${url} did not answer JSON: ${err.message}`);
    }
  }

  /** `res`'s body, each chunk counted into `cap` as it arrives: past the budget the download stops. */
  async counted(res, url, what, cap) {
    if (!res.body) throw failed(`${what}: ${url} answered ${res.status} with no body`);
    const reader = res.body.getReader();
    const chunks = [];
    try {
      for (let chunk; (chunk = await readChunk(reader, url, what)); chunks.push(chunk)) this.budget.count(cap, chunk.length, what);
    } finally {
      reader.cancel().catch(() => {});
    }
    return concatBytes(chunks);
  }
}

/** The next chunk of `reader`, null at its end; a DepsResolutionFailed if the read fails. */
async function readChunk(reader, url, what) {
  let read;
  try {
    read = await reader.read();
  } catch (err) {
    throw failed(`${what}: reading ${url} failed: ${err.message}`);
  }
  return read.done ? null : read.value;
}

/** A DepsResolutionFailed error. */
export function failed(message) {
  return namedError("DepsResolutionFailed", message);
}

/**
 * Checks `bytes` against a published digest: an SRI string (`sha512-<base64>`, npm's
 * `integrity`) or `{sha256: hex}` (PyPI's `digests`). Throws a DepsResolutionFailed naming `what`.
 */
export async function checkDigest(bytes, published, what) {
  if (typeof published === "string") {
    const algorithm = published.slice(0, published.indexOf("-"));
    if (!["sha512", "sha384", "sha256", "sha1"].includes(algorithm)) throw failed(`${what}: the registry gave no usable integrity ("${published}")`);
    const actual = await sriOf(bytes, published);
    if (actual !== published) throw failed(`${what}: the download does not match the registry's integrity ${published} (got ${actual}); it was altered or corrupted on the way, and nothing was built from it`);
    return;
  }
  const expected = published?.sha256;
  if (!expected) throw failed(`${what}: the index publishes no sha256 for it`);
  const actual = await sha256Hex(bytes);
  if (actual !== expected) throw failed(`${what}: the download has sha256 ${actual}, the index says ${expected}; it was altered or corrupted on the way, and nothing was built from it`);
}
