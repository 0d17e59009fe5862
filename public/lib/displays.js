// What a run's display() calls become, for the page (lib/runner-host.js, lib/run-queue.js) and
// the edge executor (durable/js/edge-runner.js) alike: each display checked as it comes (a type
// the relay shows, data of the right kind, within a run's bounds), then, once the run ended,
// each small one inline in the exit event (text, or an image's base64) and each larger one
// written to /out as `display-<run>-<n>.<ext>` and named by its path (its file is then uploaded
// and listed like any in /out).

import { toBase64 } from "./bytes.js";
import { failure } from "./errors.js";

// What display() may show: these types only, this many per run, this many bytes in all.
const DISPLAY_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml", "text/html", "text/markdown", "application/json", "text/plain"]);
const BINARY_DISPLAY = /^image\/(png|jpeg|gif|webp)$/;
const MAX_DISPLAYS = 64;
const MAX_DISPLAY_BYTES = 16 * 1024 * 1024;
// A display() up to this size rides in the result; a larger one is written to /out (as an
// image in /out is inlined up to the same size: out-files.js).
const INLINE_DISPLAY_BYTES = 96 * 1024;
// All of a run's inline displays together, counted as the relay counts them against the
// result's budget (src/mcp/results.rs IMAGE_BUDGET, 128 KiB: displayCost); the rest go to /out
// too, rather than be left out of the result.
const INLINE_DISPLAYS_TOTAL = 128 * 1024;
const DISPLAY_EXTENSIONS = {
  "image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp", "image/svg+xml": "svg",
  "text/html": "html", "text/markdown": "md", "application/json": "json", "text/plain": "txt",
};

/** The displays of one run, in order, as they are checked. */
export class Displays {
  constructor() {
    this.shown = [];
    this.bytes = 0;
  }

  /**
   * A display() of the run: `{refused}` (a line for its stderr) when its type or data cannot be
   * shown, `{stop}` (the outcome to end the run with) past the run's bounds, else `{}` and kept.
   */
  add({ mimeType, data }) {
    const binary = BINARY_DISPLAY.test(mimeType);
    if (!DISPLAY_TYPES.has(mimeType) || (binary ? !(data instanceof Uint8Array) : typeof data !== "string")) {
      const what = typeof mimeType === "string" ? mimeType.slice(0, 80) : typeof mimeType;
      const text = [...DISPLAY_TYPES].filter((t) => !BINARY_DISPLAY.test(t)).join(", ");
      return { refused: `display: ${what} cannot be shown (bytes must be a PNG, JPEG, GIF or WebP image; text one of ${text})\n` };
    }
    this.bytes += binary ? data.byteLength : data.length * 3;
    if (this.shown.length + 1 > MAX_DISPLAYS || this.bytes > MAX_DISPLAY_BYTES) {
      return { stop: failure("OutputLimitExceeded", `display() was called past its limits (${MAX_DISPLAYS} displays, ${MAX_DISPLAY_BYTES} bytes per run); write big results to /out instead`) };
    }
    this.shown.push({ mimeType, data });
    return {};
  }
}

/**
 * What run `runId`'s `displays` ({mimeType, data}) are in its exit event: inline, or written to
 * /out by `write(path, bytes)` (a promise; one that rejects leaves a line saying so instead).
 */
export async function storeDisplays(runId, displays, write) {
  const encoder = new TextEncoder();
  const shown = [];
  let room = INLINE_DISPLAYS_TOTAL;
  for (const [n, { mimeType, data }] of displays.entries()) {
    const bytes = typeof data === "string" ? encoder.encode(data) : data;
    const sent = displayCost(mimeType, bytes, typeof data === "string");
    if (bytes.byteLength <= INLINE_DISPLAY_BYTES && sent <= room) {
      room -= sent;
      shown.push(typeof data === "string" ? { mimeType, text: data } : { mimeType, data: toBase64(data) });
      continue;
    }
    const path = `/out/display-${runId}-${n}.${DISPLAY_EXTENSIONS[mimeType]}`;
    try {
      await write(path, bytes);
      shown.push({ mimeType, path });
    } catch (err) {
      const text = `[display ${n}: ${mimeType}, ${bytes.byteLength} bytes, too large to show inline and not written to /out: ${err.message}]`;
      shown.push({ mimeType: "text/plain", text });
    }
  }
  return shown;
}

/**
 * What a display costs against the relay's budget (src/mcp/display.rs `inline`): images as
 * base64, an SVG too (it arrives as text), JSON twice (as text and in structuredContent).
 */
function displayCost(mimeType, bytes, isText) {
  const base64 = Math.ceil(bytes.byteLength / 3) * 4;
  if (!isText || mimeType === "image/svg+xml") return base64;
  return mimeType === "application/json" ? 2 * bytes.byteLength : bytes.byteLength;
}
