// Reads an npm tarball (gzip'd ustar, with pax or GNU long names): its regular files by path,
// the first path segment ("package/") stripped. Paths with ".." or a leading "/" are refused.

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
 * The compressed bytes handed to the inflater at a time: 4 KiB (at most ~4 MiB inflated) under
 * a tree cap (the edge's budget, where the inflater has no backpressure), 64 KiB where there is
 * none (a tab's), so a multi-MiB tarball takes few turns.
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
  // Refused here: an inflater never written to would never end its output.
  if (bytes.length === 0) throw failed(`${what}: the tarball is not gzip: it is empty (0 bytes)`);
  const slice = budget.caps.treeBytes === undefined ? UNCAPPED_SLICE : CAPPED_SLICE;
  const tar = new Inflated(bytes, what, slice);
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
    const type = String.fromCharCode(header[156] || 48);
    if (FILE_TYPES.includes(type)) budget.count("treeFiles", 1, what);
    else if (budget.tally("otherEntries", 1) > MAX_OTHER_ENTRIES) throw failed(`${what}: the build's tarballs have more than ${MAX_OTHER_ENTRIES} entries that are not files (directories, links, long names, pax headers); packages have far fewer: list other versions or packages`);
    budget.count("treeBytes", size, what);
    const body = await tar.take(size);
    if (!body) throw failed(`${what}: the tarball ends inside an entry`);
    await tar.take((BLOCK - (size % BLOCK)) % BLOCK); // padding, absent at a short end
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
 * A gzip stream's inflated bytes, taken a given number at a time. The compressed bytes go to the
 * inflater a slice at a time, and the next slice only once a read waits on it: a written chunk
 * is inflated whole before any read is served (workerd's DecompressionStream has no
 * backpressure; Chromium's transforms a chunk at once), so a bomb written whole would fill the
 * host's memory before the caps saw a byte. A 4 KiB slice inflates to at most ~4 MiB (deflate's
 * 1032:1), so the caps stop a bomb within a few MiB of them.
 */
class Inflated {
  constructor(compressed, what, slice) {
    const inflate = new DecompressionStream("gzip");
    this.compressed = compressed;
    this.slice = slice;
    this.fed = 0;
    this.writing = null; // the slice being written, until the inflater has taken it
    this.writer = inflate.writable.getWriter();
    this.reader = inflate.readable.getReader();
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

  /**
   * The next inflated chunk. A slice goes in only once the last one's write has settled and its
   * turns have passed with no output; each slice of a read that brought none waits twice the
   * turns of the one before, so a host that takes k turns to serve a read (workerd's) gets about
   * log2(k) slices ahead of it, not k, and a slice that inflates to nothing still moves on.
   */
  async read() {
    const next = this.reader.read();
    let served = false;
    next.then(
      () => (served = true),
      () => (served = true),
    );
    const until = (promise) => Promise.race([next, promise]);
    for (let turns = 1; ; turns *= 2) {
      // One write at a time; it may wait for its output to be read (Node's inflater).
      if (this.writing) await until(this.writing);
      if (served) break;
      this.writing = null;
      // Output inflated already reaches the read within the host's next turns, with no more input.
      for (let turn = 0; turn < turns && !served; turn++) await until(nextTurn());
      if (served || this.fed === this.compressed.length) break;
      this.writing = this.feed();
    }
    try {
      const { done, value } = await next;
      return done ? null : value;
    } catch (err) {
      throw failed(`${this.what}: the tarball is not gzip: ${err.message}`);
    }
  }

  /** Writes the next slice to the inflater, closing it after the last. */
  async feed() {
    const slice = this.compressed.subarray(this.fed, this.fed + this.slice);
    this.fed += slice.length;
    // Corrupt input fails both sides: the readable's error is the one reported.
    const written = this.writer.write(slice).catch(() => {});
    if (this.fed === this.compressed.length) this.writer.close().catch(() => {});
    await written;
  }

  cancel() {
    this.reader.cancel().catch(() => {});
  }
}

/**
 * The host's next turn, where a written slice's output reaches a waiting read (workerd's): on a
 * tab a message to itself, which no browser delays (they clamp nested timers to 4 ms each); in
 * workerd (whose timers are not clamped) and wherever there is no MessageChannel, a timer.
 */
function nextTurn() {
  const workerd = globalThis.navigator?.userAgent === "Cloudflare-Workers";
  if (workerd || typeof MessageChannel !== "function") return new Promise((resolve) => setTimeout(resolve, 0));
  const { port1, port2 } = new MessageChannel();
  return new Promise((resolve) => {
    port1.onmessage = () => {
      port1.close();
      resolve();
    };
    port2.postMessage(null);
  });
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
