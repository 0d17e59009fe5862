// Reads an npm tarball (gzip'd ustar, with pax or GNU long names): its regular files by path,
// the first path segment ("package/") stripped. Paths with ".." or a leading "/" are refused.

import { Inflate } from "pako";
import { Budget, failed } from "./registry.js";

const BLOCK = 512;
/** The entry types of regular files (ustar's "0", and "7"); only these count as the tree's files. */
const FILE_TYPES = ["0", "7"];
/**
 * Directories, links, pax and GNU long-name entries a build's tarballs may hold besides their
 * files (counted across the build's Budget): not files, yet each read costs a header, so a flood
 * of them stops here.
 */
const MAX_OTHER_ENTRIES = 10_000;
/**
 * The compressed bytes handed to the inflater at a time: 4 KiB (at most ~4 MiB inflated past
 * what the caps have seen) under a tree cap (the edge's budget), 64 KiB where there is none (a
 * tab's), so a multi-MiB tarball takes few calls.
 */
const CAPPED_SLICE = 4 * 1024;
const UNCAPPED_SLICE = 64 * 1024;

/**
 * Inflates as it reads: each entry is counted into `budget` (a regular file into `treeFiles`, every
 * entry's size into `treeBytes`) from its header, before its body is read, so a tarball past the caps stops there
 * with the cap's error, holding no more than the caps allow.
 * @returns {Promise<Map<string, Uint8Array>>}
 */
export async function untgz(bytes, what, budget = new Budget({})) {
  // Named here: the inflater's own word for it ("unexpected EOF") says less.
  if (bytes.length === 0) throw failed(`${what}: the tarball is not gzip: it is empty (0 bytes)`);
  const slice = budget.caps.treeBytes === undefined ? UNCAPPED_SLICE : CAPPED_SLICE;
  return entries(new Inflated(bytes, what, slice), what, budget);
}

function entries(tar, what, budget) {
  const files = new Map();
  let longName = null;
  for (let header; (header = tar.take(BLOCK)) && !header.every((b) => b === 0); ) {
    const size = parseInt(text(header, 124, 12).trim() || "0", 8);
    if (!Number.isSafeInteger(size) || size < 0) throw failed(`${what}: the tarball has an entry of unreadable size`);
    const type = String.fromCharCode(header[156] || 48);
    if (FILE_TYPES.includes(type)) budget.count("treeFiles", 1, what);
    else if (budget.tally("otherEntries", 1) > MAX_OTHER_ENTRIES) throw failed(`${what}: the build's tarballs have more than ${MAX_OTHER_ENTRIES} entries that are not files (directories, links, long names, pax headers); packages have far fewer: list other versions or packages`);
    budget.count("treeBytes", size, what);
    const body = tar.take(size);
    if (!body) throw failed(`${what}: the tarball ends inside an entry`);
    tar.take((BLOCK - (size % BLOCK)) % BLOCK); // padding, absent at a short end
    if (type === "x") longName = paxPath(body) ?? longName;
    else if (type === "L") longName = text(body, 0, body.length);
    else if (type !== "g") {
      const prefix = text(header, 345, 155);
      const name = longName ?? (prefix ? `${prefix}/${text(header, 0, 100)}` : text(header, 0, 100));
      longName = null;
      if (FILE_TYPES.includes(type)) files.set(inPackage(name, what), body);
    }
  }
  return files;
}

/**
 * A gzip stream's inflated bytes, taken a given number at a time. The inflater is zlib's in
 * JS (pako: its CPU per input byte is zlib's, whatever the stream's blocks, headers or members
 * are), run in the reader's own turn: a take hands it the next slice only while the bytes
 * inflated so far fall short, so what it holds past the reads is at most one slice's output
 * (deflate's 1032:1: ~4 MiB for a 4 KiB slice). A stream inflater (DecompressionStream) cannot
 * give that bound: workerd's has no backpressure and inflates a written chunk whole, outside the
 * isolate's counted memory, and when its output arrives is the host's choice.
 */
export class Inflated {
  constructor(compressed, what, slice) {
    this.compressed = compressed;
    this.slice = slice;
    this.fed = 0;
    this.what = what;
    this.chunks = [];
    this.length = 0;
    this.inflater = this.member();
  }

  /** The next `n` bytes, or null when the stream ends first. */
  take(n) {
    while (this.length < n) if (!this.feed()) return null;
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

  /** Inflates the next slice (the last one ends the stream); false when none is left. */
  feed() {
    if (this.fed === this.compressed.length) return false;
    const slice = this.compressed.subarray(this.fed, this.fed + this.slice);
    this.fed += slice.length;
    const last = this.fed === this.compressed.length;
    if (this.inflater.ended) {
      // Past a member's end, zeros are padding (zlib and npm read them so); the rest is ignored.
      if (slice[0] === 0) {
        this.fed = this.compressed.length;
        return false;
      }
      this.inflater = this.member(); // anything else is the next member
    }
    this.inflater.push(slice, last);
    if (this.inflater.err) throw failed(`${this.what}: the tarball is not gzip: ${this.inflater.msg}`);
    if (last && !this.inflater.ended) throw failed(`${this.what}: the tarball is not gzip: it ends before its compressed stream does`);
    return true;
  }

  /** An inflater for the next gzip member, its output appended to what takes read. */
  member() {
    const inflater = new Inflate();
    inflater.onData = (chunk) => {
      this.chunks.push(chunk);
      this.length += chunk.length;
    };
    return inflater;
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
