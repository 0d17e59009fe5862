// A small zip reader for capsule layers (fs.code.zip, fs.deps.zip): stored and deflated
// entries, inflated with the browser's DecompressionStream("deflate-raw"). Integrity is the
// layer's sha256, checked before unzipping, so CRCs are not checked again. Entry names must be
// relative paths inside the capsule: absolute paths and ".." are refused.

import { throughStream } from "./bytes.js";
import { ValidationError } from "./errors.js";

const EOCD_SIGNATURE = 0x06054b50;
const CENTRAL_SIGNATURE = 0x02014b50;
const LOCAL_SIGNATURE = 0x04034b50;
const STORED = 0;
const DEFLATED = 8;

/**
 * The first entry whose name `wanted` accepts, inflated, or null (a wheel's METADATA, say).
 * @returns {Promise<{name: string, data: Uint8Array} | null>}
 */
export async function unzipOne(bytes, wanted) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (const entry of centralDirectory(view)) {
    if (wanted(entry.name)) return { name: entry.name, data: await entryData(bytes, view, entry) };
  }
  return null;
}

/** @returns {Promise<Object<string, Uint8Array>>} file contents by relative path */
export async function unzip(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const files = {};
  for (const entry of centralDirectory(view)) {
    if (entry.name.endsWith("/")) continue; // a directory
    files[safePath(entry.name)] = await entryData(bytes, view, entry);
  }
  return files;
}

function* centralDirectory(view) {
  const eocd = findEndOfCentralDirectory(view);
  const count = view.getUint16(eocd + 10, true);
  let offset = view.getUint32(eocd + 16, true);
  if (count === 0xffff || offset === 0xffffffff) throw new ValidationError("zip64 layers are not supported");
  for (let i = 0; i < count; i++) {
    if (view.getUint32(offset, true) !== CENTRAL_SIGNATURE) throw new ValidationError("corrupt zip central directory");
    const nameLength = view.getUint16(offset + 28, true);
    const extraLength = view.getUint16(offset + 30, true);
    const commentLength = view.getUint16(offset + 32, true);
    yield {
      method: view.getUint16(offset + 10, true),
      compressedSize: view.getUint32(offset + 20, true),
      size: view.getUint32(offset + 24, true),
      localOffset: view.getUint32(offset + 42, true),
      name: new TextDecoder().decode(new Uint8Array(view.buffer, view.byteOffset + offset + 46, nameLength)),
    };
    offset += 46 + nameLength + extraLength + commentLength;
  }
}

function findEndOfCentralDirectory(view) {
  // The record is 22 bytes plus a comment of up to 64 KiB, at the very end.
  const last = view.byteLength - 22;
  for (let offset = last; offset >= Math.max(0, last - 0xffff); offset--) {
    if (view.getUint32(offset, true) === EOCD_SIGNATURE) return offset;
  }
  throw new ValidationError("not a zip file");
}

async function entryData(bytes, view, entry) {
  const local = entry.localOffset;
  if (view.getUint32(local, true) !== LOCAL_SIGNATURE) throw new ValidationError(`corrupt zip entry ${entry.name}`);
  const start = local + 30 + view.getUint16(local + 26, true) + view.getUint16(local + 28, true);
  const data = bytes.subarray(start, start + entry.compressedSize);
  if (entry.method === STORED) return data.slice();
  if (entry.method !== DEFLATED) throw new ValidationError(`zip entry ${entry.name} uses unsupported method ${entry.method}`);
  const out = await throughStream(data, new DecompressionStream("deflate-raw")).catch((err) => {
    throw new ValidationError(`zip entry ${entry.name} is not valid deflate data: ${err.message}`);
  });
  if (out.length !== entry.size) throw new ValidationError(`zip entry ${entry.name} inflates to the wrong size`);
  return out;
}

function safePath(name) {
  const parts = name.split("/");
  if (name.startsWith("/") || name.includes("\\") || parts.some((part) => part === ".." || part === "")) {
    throw new ValidationError(`zip entry "${name}" escapes the capsule filesystem`);
  }
  return name;
}
