// How a build reaches its package sources: every request goes to this Worker's `/registry?url=`
// under the run's token (the page may connect to nothing else), which fetches it only if it lies
// under the tenant's npm registry or Python index. Also the checks a download must pass before
// any of it is used: the registry's published digest, and the build's size budget.

import { sha256Hex, sriOf } from "../bytes.js";
import { namedError } from "../errors.js";

/** All packages of one build together, compressed as downloaded. */
export const MAX_DOWNLOAD_BYTES = 64 * 1024 * 1024;

export class Registry {
  /**
   * @param runToken the `build` command's run token
   * @param maxDownloadBytes the build's download budget (the edge's is its tree cap)
   */
  constructor(runToken, maxDownloadBytes = MAX_DOWNLOAD_BYTES) {
    this.runToken = runToken;
    this.maxDownloadBytes = maxDownloadBytes;
    this.downloaded = 0;
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
    return (await this.get(url, what, accept)).json();
  }

  /** The JSON at `url`, or null when the source has nothing there (404). */
  async jsonIfThere(url, what, accept) {
    return (await this.get(url, what, accept, true))?.json() ?? null;
  }

  /** The bytes at `url`, counted against the build's download budget. */
  async bytes(url, what) {
    const bytes = new Uint8Array(await (await this.get(url, what)).arrayBuffer());
    this.downloaded += bytes.length;
    if (this.downloaded > this.maxDownloadBytes) {
      throw failed(`${what}: the build downloaded more than ${this.maxDownloadBytes >> 20} MiB; list fewer or smaller packages`);
    }
    return bytes;
  }
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
