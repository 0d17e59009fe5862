// Reads an npm tarball (gzip'd ustar, with pax or GNU long names): its regular files by path,
// the first path segment ("package/") stripped. Paths with ".." or a leading "/" are refused.

import { throughStream } from "../bytes.js";
import { failed } from "./registry.js";

const BLOCK = 512;

/** @returns {Promise<Map<string, Uint8Array>>} */
export async function untgz(bytes, what) {
  let tar;
  try {
    tar = await throughStream(bytes, new DecompressionStream("gzip"));
  } catch (err) {
    throw failed(`${what}: the tarball is not gzip: ${err.message}`);
  }
  const files = new Map();
  let longName = null;
  for (let at = 0; at + BLOCK <= tar.length; ) {
    const header = tar.subarray(at, at + BLOCK);
    if (header.every((b) => b === 0)) break;
    const size = parseInt(text(header, 124, 12).trim() || "0", 8);
    const type = String.fromCharCode(header[156] || 48);
    const body = tar.subarray(at + BLOCK, at + BLOCK + size);
    at += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
    if (type === "x") longName = paxPath(body) ?? longName;
    else if (type === "L") longName = text(body, 0, body.length);
    else if (type === "g") continue;
    else {
      const prefix = text(header, 345, 155);
      const name = longName ?? (prefix ? `${prefix}/${text(header, 0, 100)}` : text(header, 0, 100));
      longName = null;
      if (type === "0" || type === "7") files.set(inPackage(name, what), body.slice());
    }
  }
  return files;
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
