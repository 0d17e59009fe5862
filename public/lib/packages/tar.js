// Reads an npm tarball (gzip'd ustar, with pax or GNU long names): its regular files by path,
// the first path segment ("package/") stripped. Paths with ".." or a leading "/" are refused.

import { Budget, failed } from "./registry.js";

const BLOCK = 512;

/**
 * Inflates as it reads: each entry is counted into `budget` (`treeFiles`, and its size into
 * `treeBytes`) from its header, before its body is read, so a tarball past the caps stops there
 * with the cap's error, holding no more than the caps allow.
 * @returns {Promise<Map<string, Uint8Array>>}
 */
export async function untgz(bytes, what, budget = new Budget({})) {
  const inflate = new DecompressionStream("gzip");
  const writer = inflate.writable.getWriter();
  // Corrupt input fails both sides: the readable's error is the one reported.
  writer.write(bytes).catch(() => {});
  writer.close().catch(() => {});
  const tar = new Inflated(inflate.readable.getReader(), what);
  try {
    return await entries(tar, what, budget);
  } finally {
    tar.cancel();
  }
}

async function entries(tar, what, budget) {
  const files = new Map();
  let longName = null;
  for (let header; (header = await tar.take(BLOCK)) && !header.every((b) => b === 0); ) {
    const size = parseInt(text(header, 124, 12).trim() || "0", 8);
    if (!Number.isSafeInteger(size) || size < 0) throw failed(`${what}: the tarball has an entry of unreadable size`);
    budget.count("treeFiles", 1);
    budget.count("treeBytes", size);
    const body = await tar.take(size);
    if (!body) throw failed(`${what}: the tarball ends inside an entry`);
    await tar.take((BLOCK - (size % BLOCK)) % BLOCK); // padding, absent at a short end
    const type = String.fromCharCode(header[156] || 48);
    if (type === "x") longName = paxPath(body) ?? longName;
    else if (type === "L") longName = text(body, 0, body.length);
    else if (type !== "g") {
      const prefix = text(header, 345, 155);
      const name = longName ?? (prefix ? `${prefix}/${text(header, 0, 100)}` : text(header, 0, 100));
      longName = null;
      if (type === "0" || type === "7") files.set(inPackage(name, what), body);
    }
  }
  return files;
}

/** A gzip stream's inflated bytes, taken a given number at a time. */
class Inflated {
  constructor(reader, what) {
    this.reader = reader;
    this.what = what;
    this.chunks = [];
    this.length = 0;
  }

  /** The next `n` bytes, or null when the stream ends first. */
  async take(n) {
    while (this.length < n) {
      const chunk = await this.read();
      if (!chunk) return null;
      this.chunks.push(chunk);
      this.length += chunk.length;
    }
    const out = new Uint8Array(n);
    for (let filled = 0; filled < n; ) {
      const head = this.chunks[0];
      const part = head.subarray(0, n - filled);
      out.set(part, filled);
      filled += part.length;
      if (part.length === head.length) this.chunks.shift();
      else this.chunks[0] = head.subarray(part.length);
    }
    this.length -= n;
    return out;
  }

  async read() {
    try {
      const { done, value } = await this.reader.read();
      return done ? null : value;
    } catch (err) {
      throw failed(`${this.what}: the tarball is not gzip: ${err.message}`);
    }
  }

  cancel() {
    this.reader.cancel().catch(() => {});
  }
}

function text(bytes, start, length) {
  const field = bytes.subarray(start, start + length);
  const end = field.indexOf(0);
  return new TextDecoder().decode(end < 0 ? field : field.subarray(0, end));
}

function paxPath(body) {
  const match = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(new TextDecoder().decode(body));
  return match?.[1] ?? null;
}

function inPackage(name, what) {
  const parts = name.split("/").slice(1);
  if (name.startsWith("/") || parts.includes("..") || parts.length === 0) throw failed(`${what}: the tarball has an unsafe path "${name}"`);
  return parts.filter((part) => part && part !== ".").join("/");
}
