// A deterministic zip writer for the deps layer a build uploads: entries sorted by path, one
// fixed timestamp, no extra fields, each entry deflated with CompressionStream("deflate-raw")
// unless storing it is smaller. The same files give the same bytes (in one browser), and zip.js
// reads them back.

import { concatBytes, throughStream } from "./bytes.js";

const DOS_DATE_1980_01_01 = 0x21; // 1980-01-01, 00:00:00
const STORED = 0;
const DEFLATED = 8;
const UTF8_NAMES = 1 << 11;

/**
 * @param files {[path: string]: Uint8Array} relative paths
 * @returns {Promise<Uint8Array>} the zip
 */
export async function zip(files) {
  const locals = [];
  const centrals = [];
  let offset = 0;
  for (const path of Object.keys(files).sort()) {
    const data = files[path];
    const name = new TextEncoder().encode(path);
    const deflated = await throughStream(data, new CompressionStream("deflate-raw"));
    const [method, body] = deflated.length < data.length ? [DEFLATED, deflated] : [STORED, data];
    const fields = { name, method, crc: crc32(data), compressed: body.length, size: data.length };
    const local = header(0x04034b50, fields, offset);
    locals.push(local, body);
    centrals.push(header(0x02014b50, fields, offset));
    offset += local.length + body.length;
  }
  const central = concatBytes(centrals);
  const end = new DataView(new ArrayBuffer(22));
  end.setUint32(0, 0x06054b50, true);
  end.setUint16(8, centrals.length, true);
  end.setUint16(10, centrals.length, true);
  end.setUint32(12, central.length, true);
  end.setUint32(16, offset, true);
  return concatBytes([...locals, central, new Uint8Array(end.buffer)]);
}

/** A local (0x04034b50) or central directory (0x02014b50) header with the entry's name. */
function header(signature, { name, method, crc, compressed, size }, offset) {
  const central = signature === 0x02014b50;
  const fixed = central ? 46 : 30;
  const bytes = new Uint8Array(fixed + name.length);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, signature, true);
  let at = 4;
  if (central) {
    view.setUint16(at, 20, true); // made by: version 2.0
    at += 2;
  }
  view.setUint16(at, 20, true); // version needed: 2.0
  view.setUint16(at + 2, UTF8_NAMES, true);
  view.setUint16(at + 4, method, true);
  view.setUint16(at + 6, 0, true); // time 00:00
  view.setUint16(at + 8, DOS_DATE_1980_01_01, true);
  view.setUint32(at + 10, crc, true);
  view.setUint32(at + 14, compressed, true);
  view.setUint32(at + 18, size, true);
  view.setUint16(at + 22, name.length, true);
  if (central) view.setUint32(42, offset, true);
  bytes.set(name, fixed);
  return bytes;
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(data) {
  let crc = 0xffffffff;
  for (const byte of data) crc = CRC_TABLE[(crc ^ byte) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
