// What a run left in /out goes to the Worker (PUT /files/<run>/<path>, with the run's token),
// which stores it in R2 under the run; the result lists each file (path, size, sha256) and the
// relay signs an expiring download URL for it. A small image also rides in the result, so the
// agent sees a plot it drew.

import { sha256Hex, toBase64 } from "./bytes.js";

// The Worker's own cap (per run); past it files are listed, not uploaded.
const MAX_FILES = 32;
// Images up to this size come back as MCP image content too (the relay keeps the sum bounded).
const INLINE_IMAGE_BYTES = 96 * 1024;
const IMAGE_TYPES = { png: "image/png", jpg: "image/jpeg", jpeg: "image/jpeg", gif: "image/gif", webp: "image/webp", svg: "image/svg+xml" };

/**
 * Uploads the /out files of `paths` that still exist.
 * @returns {Promise<Array<{path, size, sha256, uploaded, image?, url?}>>} the exit event's `files`
 *   (without `url`, the download link, which is for the page)
 */
export async function uploadOutFiles(workspace, paths, { runId, runToken }) {
  const present = paths.map((path) => [path, workspace.read(path)]).filter(([, bytes]) => bytes);
  present.sort(([a], [b]) => (a < b ? -1 : 1));
  return Promise.all(present.map(([path, bytes], i) => upload(path, bytes, i < MAX_FILES, { runId, runToken })));
}

async function upload(path, bytes, allowed, { runId, runToken }) {
  const sha256 = await sha256Hex(bytes);
  const file = { path, size: bytes.length, sha256, uploaded: false };
  if (allowed) {
    const url = `/files/${encodeURIComponent(runId)}${path.split("/").map(encodeURIComponent).join("/")}`;
    const res = await fetch(url, { method: "PUT", headers: { authorization: `Bearer ${runToken}` }, body: bytes }).catch(() => null);
    file.uploaded = Boolean(res?.ok);
    // The signed download link, for the page's list (the exit event does not carry it).
    if (res?.ok) file.url = (await res.json().catch(() => ({}))).url;
  }
  const mimeType = IMAGE_TYPES[path.split(".").pop().toLowerCase()];
  if (mimeType && bytes.length <= INLINE_IMAGE_BYTES) file.image = { mimeType, data: toBase64(bytes) };
  return file;
}
