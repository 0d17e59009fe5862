// Bytes as text: standard base64 (the file tools' encoding, egress request bodies, inline images),
// the lowercase hex sha256 that capsule hashes, layer hashes and /out listings use, and SRI
// strings (the runtimes' integrity, npm's); and bytes through a (de)compression stream.

export function toBase64(bytes) {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

export function fromBase64(text) {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

export async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The SRI string (`sha512-<base64>`) of `bytes` with the algorithm `integrity` names (sha1/256/384/512). */
export async function sriOf(bytes, integrity) {
  const algorithm = integrity.slice(0, integrity.indexOf("-"));
  const digest = await crypto.subtle.digest(algorithm.replace("sha", "SHA-"), bytes);
  return `${algorithm}-${toBase64(new Uint8Array(digest))}`;
}

/**
 * `data` through `transform` (a CompressionStream or DecompressionStream), written to it
 * directly. (Through a Blob, Chrome keeps the bytes in the browser process and reads them back
 * over IPC: after a few idle seconds that held a capsule's layer check 5-8 ms, until other IPC,
 * such as the SSE stream, woke it.) Read with a reader: WebKit's streams are not async
 * iterable. Rejects with the stream's error for corrupt input.
 */
export async function throughStream(data, transform) {
  const writer = transform.writable.getWriter();
  // Corrupt input fails both sides: the readable's error is the one reported.
  writer.write(data).catch(() => {});
  writer.close().catch(() => {});
  const reader = transform.readable.getReader();
  const chunks = [];
  for (let read; !(read = await reader.read()).done; ) chunks.push(read.value);
  return concatBytes(chunks);
}

/** The byte arrays `parts`, one after another. */
export function concatBytes(parts) {
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
