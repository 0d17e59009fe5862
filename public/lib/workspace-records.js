// How the workspace's changes are written in one OPFS file (lib/workspace.js): a magic, then
// one record per path, each `op` (1 byte: 1 write, 0 remove), the path's UTF-8 length and the
// data's length (u32, little-endian), the path, the data. A batch of changes, or a whole
// workspace, is one file: one write to storage however many files it holds. Pure, no I/O.

const MAGIC = new TextEncoder().encode("RWS1");
const HEADER_BYTES = 9;
const WRITE = 1;
const REMOVE = 0;

/**
 * The file for `changes` (path -> Uint8Array to write, or null to remove), as a Blob: the
 * records' parts are not copied into one buffer.
 * @returns {{blob: Blob, size: number}}
 */
export function encodeRecords(changes) {
  const encoder = new TextEncoder();
  const parts = [MAGIC];
  let size = MAGIC.length;
  for (const [path, bytes] of changes) {
    const name = encoder.encode(path);
    const header = new DataView(new ArrayBuffer(HEADER_BYTES));
    header.setUint8(0, bytes ? WRITE : REMOVE);
    header.setUint32(1, name.length, true);
    header.setUint32(5, bytes ? bytes.byteLength : 0, true);
    parts.push(header, name);
    if (bytes) parts.push(bytes);
    size += HEADER_BYTES + name.length + (bytes ? bytes.byteLength : 0);
  }
  return { blob: new Blob(parts), size };
}

/**
 * The records of `buffer` (an ArrayBuffer encodeRecords made), in order: [path, Uint8Array]
 * for a write, [path, null] for a removal. Throws naming what is wrong with a buffer it did
 * not make.
 */
export function* records(buffer) {
  const view = new DataView(buffer);
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const magic = new Uint8Array(buffer, 0, Math.min(MAGIC.length, buffer.byteLength));
  if (magic.length !== MAGIC.length || magic.some((byte, i) => byte !== MAGIC[i])) throw new Error("it does not start with RWS1");
  for (let at = MAGIC.length; at < buffer.byteLength; ) {
    if (at + HEADER_BYTES > buffer.byteLength) throw new Error(`a record header is cut off at byte ${at}`);
    const op = view.getUint8(at);
    const nameBytes = view.getUint32(at + 1, true);
    const dataBytes = view.getUint32(at + 5, true);
    const end = at + HEADER_BYTES + nameBytes + dataBytes;
    if (op > WRITE || (op === REMOVE && dataBytes) || end > buffer.byteLength) throw new Error(`the record at byte ${at} is malformed`);
    const path = decodePath(decoder, new Uint8Array(buffer, at + HEADER_BYTES, nameBytes), at);
    // A copy of its own: a view would keep the whole buffer alive, and be posted whole to a runner.
    yield [path, op === WRITE ? new Uint8Array(buffer.slice(end - dataBytes, end)) : null];
    at = end;
  }
}

function decodePath(decoder, bytes, at) {
  try {
    return decoder.decode(bytes);
  } catch {
    throw new Error(`the path of the record at byte ${at} is not UTF-8`);
  }
}
