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
 * Uploads the /out files of `paths` that still exist. A file the Worker did not store says why
 * (`error: {name, message}`, e.g. QuotaExceeded naming defaults.quotas.storedBytes): the
 * result lists it so, and `notStored` words it for the run's stderr.
 * @returns {Promise<Array<{path, size, sha256, uploaded, image?, url?, error?}>>} the exit event's
 *   `files` (without `url`, the download link, which is for the page)
 */
export async function uploadOutFiles(workspace, paths, { runId, runToken, tab = () => undefined }) {
  const present = paths.map((path) => [path, workspace.read(path)]).filter(([, bytes]) => bytes);
  present.sort(([a], [b]) => (a < b ? -1 : 1));
  return Promise.all(present.map(([path, bytes], i) => upload(path, bytes, i < MAX_FILES, { runId, runToken, tab })));
}

async function upload(path, bytes, allowed, { runId, runToken, tab }) {
  const sha256 = await sha256Hex(bytes);
  const file = { path, size: bytes.length, sha256, uploaded: false };
  if (allowed) {
    const url = `/files/${encodeURIComponent(runId)}${path.split("/").map(encodeURIComponent).join("/")}`;
    const id = tab();
    const headers = { authorization: `Bearer ${runToken}`, ...(id && { "x-relay-tab": id }) };
    const res = await fetch(url, { method: "PUT", headers, body: bytes }).catch((err) => err);
    file.uploaded = Boolean(res?.ok);
    const body = res instanceof Response ? await res.json().catch(() => null) : null;
    // The signed download link, for the page's list (the exit event does not carry it).
    if (res?.ok) file.url = body?.url;
    else file.error = refusal(res, body);
  }
  const mimeType = IMAGE_TYPES[path.split(".").pop().toLowerCase()];
  if (mimeType && bytes.length <= INLINE_IMAGE_BYTES) file.image = { mimeType, data: toBase64(bytes) };
  return file;
}

/** Why an upload answered `res` (a Response with its JSON `body`, or the fetch's error) was not stored. */
function refusal(res, body) {
  if (!(res instanceof Response)) return { name: "StorageUnavailable", message: `the upload did not reach the relay (${res?.message ?? res}); run again` };
  return { name: body?.error?.name ?? "Internal", message: body?.error?.message ?? `the relay answered HTTP ${res.status}` };
}

/** The stderr line for the files of `files` the relay did not store, and why; "" when it stored them all. */
export function notStored(files) {
  return files.filter((file) => file.error).map(({ path, error }) => `${path} was not stored: ${error.name}: ${error.message}\n`).join("");
}
