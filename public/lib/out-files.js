// What a run left in /out goes to the Worker (PUT /files/<run>/<path>, with the run's token),
// which stores it in R2 under the run; the result lists each file (path, size, sha256) and the
// relay signs an expiring download URL for it. A small image also rides in the result, so the
// agent sees a plot it drew.

import { sha256Hex, toBase64 } from "./bytes.js";

// The Worker's own cap (per run); past it files are listed as not uploaded, as many again, and
// the rest counted: the exit event, one line of at most 4 MiB, must carry the list.
const MAX_FILES = 32;
const MAX_LISTED = 2 * MAX_FILES;
// Images up to this size come back as MCP image content too, while their base64 data fits the
// relay's budget for a result's images together (src/mcp/results.rs IMAGE_BUDGET).
const INLINE_IMAGE_BYTES = 96 * 1024;
const INLINE_IMAGES_TOTAL = 128 * 1024;
const PAST_THE_CAP = `a run publishes at most ${MAX_FILES} files from /out (the first, in path order); write fewer, larger files (an archive)`;
const IMAGE_TYPES = { png: "image/png", jpg: "image/jpeg", jpeg: "image/jpeg", gif: "image/gif", webp: "image/webp", svg: "image/svg+xml" };

/**
 * Uploads the /out files of `paths` that still exist, in path order, the first MAX_FILES of
 * them, from tab `tab()` (none at the edge: the relay session refuses a tab the run went away
 * from). A file the Worker did not store says why (`error: {name, message}`, e.g. QuotaExceeded
 * naming defaults.quotas.storedBytes), as does one past the cap: the result lists it so, and
 * `notStored` words it for the run's stderr.
 * @returns {Promise<{files: Array<{path, size, sha256, uploaded, image?, url?, error?}>, unlisted: number}>}
 *   the exit event's `files` (without `url`, the download link, which is for the page), and how
 *   many more were neither uploaded nor listed
 */
export async function uploadOutFiles(workspace, paths, { runId, runToken, tab = () => undefined }) {
  const present = paths.map((path) => [path, workspace.read(path)]).filter(([, bytes]) => bytes);
  present.sort(([a], [b]) => (a < b ? -1 : 1));
  const listed = present.slice(0, MAX_LISTED);
  const files = await Promise.all(listed.map(([path, bytes], i) => (i < MAX_FILES ? upload(path, bytes, { runId, runToken, tab }) : pastTheCap(path, bytes))));
  let imageBytes = 0; // of base64, which takes 4 characters for every 3 bytes begun
  listed.slice(0, MAX_FILES).forEach(([path, bytes], i) => {
    const mimeType = IMAGE_TYPES[path.split(".").pop().toLowerCase()];
    const size = 4 * Math.ceil(bytes.length / 3);
    if (!mimeType || bytes.length > INLINE_IMAGE_BYTES || imageBytes + size > INLINE_IMAGES_TOTAL) return;
    imageBytes += size;
    files[i].image = { mimeType, data: toBase64(bytes) };
  });
  return { files, unlisted: present.length - listed.length };
}

async function upload(path, bytes, { runId, runToken, tab }) {
  const file = { path, size: bytes.length, sha256: await sha256Hex(bytes), uploaded: false };
  const url = `/files/${encodeURIComponent(runId)}${path.split("/").map(encodeURIComponent).join("/")}`;
  const id = tab();
  const headers = { authorization: `Bearer ${runToken}`, ...(id && { "x-relay-tab": id }) };
  const res = await fetch(url, { method: "PUT", headers, body: bytes }).catch((err) => err);
  file.uploaded = Boolean(res?.ok);
  const body = res instanceof Response ? await res.json().catch(() => null) : null;
  // The signed download link, for the page's list (the exit event does not carry it).
  if (res?.ok) file.url = body?.url;
  else file.error = refusal(res, body);
  return file;
}

async function pastTheCap(path, bytes) {
  return { path, size: bytes.length, sha256: await sha256Hex(bytes), uploaded: false, error: { name: "OutputLimitExceeded", message: PAST_THE_CAP } };
}

/** Why an upload answered `res` (a Response with its JSON `body`, or the fetch's error) was not stored. */
function refusal(res, body) {
  if (!(res instanceof Response)) return { name: "StorageUnavailable", message: `the upload did not reach the relay (${res?.message ?? res}); run again` };
  return { name: body?.error?.name ?? "Internal", message: body?.error?.message ?? `the relay answered HTTP ${res.status}` };
}

/** The stderr lines for the files the relay did not store, and why; "" when it stored them all. */
export function notStored({ files, unlisted }) {
  const tried = files.slice(0, MAX_FILES).filter((file) => file.error);
  const lines = tried.map(({ path, error }) => `${path} was not stored: ${error.name}: ${error.message}\n`);
  const past = files.length - MAX_FILES + unlisted;
  if (past > 0) lines.push(`${past} more files in /out were not stored: ${PAST_THE_CAP}\n`);
  return lines.join("");
}
