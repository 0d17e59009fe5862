// The page miniflare-tests/runner.test.mjs drives in Chromium: it exposes the executor's real
// parts (runner host and worker, signature check, zip reader) as window.relayTest, taking and
// returning plain data that Playwright can pass across.

import { canonicalJson } from "./lib/canonical-json.js";
import { KeyRing, verifyManifestSignature } from "./lib/jws.js";
import { RunnerHost } from "./lib/runner-host.js";
import { unzip } from "./lib/zip.js";

const runner = new RunnerHost(new URL("sandbox.html", import.meta.url));

window.relayTest = {
  /**
   * Runs a runner job whose files are given as text or as {base64}; cancels it after
   * `cancelAfterMs` if set.
   * @returns the run's outcome plus its collected stdout/stderr, whether a runtime was loaded
   *   and the time the page waited (pageMs)
   */
  async run({ files, cancelAfterMs, ...job }) {
    const output = { stdout: "", stderr: "" };
    let loaded = false;
    const abort = new AbortController();
    if (cancelAfterMs !== undefined) setTimeout(() => abort.abort(), cancelAfterMs);
    const started = performance.now();
    const outcome = await runner.run(
      { ...job, files: mapValues(files, (file) => (typeof file === "string" ? new TextEncoder().encode(file) : fromBase64(file.base64))) },
      {
        signal: abort.signal,
        onLoading: () => (loaded = true),
        onOutput: (stream, text) => (output[stream] += text),
      },
    );
    return { ...outcome, ...output, loaded, pageMs: performance.now() - started };
  },

  /** "ok", or the error a manifest with this signature is refused with. */
  async verify(manifest, keySet) {
    try {
      await verifyManifestSignature(manifest, new KeyRing(async () => keySet));
      return "ok";
    } catch (err) {
      return `${err.name}: ${err.message}`;
    }
  },

  canonicalJson,

  /**
   * JSON text the way the page takes capsule.json (JSON.parse, no reviver, then canonicalJson):
   * {canonical} or {refused: the error message}.
   */
  canonicalOfText(text) {
    try {
      return { canonical: canonicalJson(JSON.parse(text)) };
    } catch (err) {
      return { refused: err.message };
    }
  },

  /** Unzips base64 zip bytes; returns the files as text, or the error message. */
  async unzip(base64) {
    try {
      const files = await unzip(fromBase64(base64));
      return mapValues(files, (bytes) => new TextDecoder().decode(bytes));
    } catch (err) {
      return `${err.name}: ${err.message}`;
    }
  },
};

function mapValues(object, fn) {
  return Object.fromEntries(Object.entries(object).map(([key, value]) => [key, fn(value)]));
}

function fromBase64(base64) {
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}
