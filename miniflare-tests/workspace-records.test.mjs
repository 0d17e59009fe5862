// The record format the workspace's OPFS log is written in (public/lib/workspace-records.js),
// in Node: what is encoded reads back the same, in order, and a damaged file is refused with
// what is wrong rather than read as something else. No server, no browser.
// Run: node --test miniflare-tests/workspace-records.test.mjs

import assert from "node:assert/strict";
import { randomBytes, randomInt } from "node:crypto";
import { describe, test } from "node:test";
import { encodeRecords, records } from "../public/lib/workspace-records.js";

const bytes = (text) => new TextEncoder().encode(text);
const decoded = async (changes) => [...records(await encodeRecords(changes).blob.arrayBuffer())];

describe("workspace records", () => {
  test("writes and removals read back as written, in order, each file in a buffer of its own", async () => {
    const changes = [
      ["/tmp/a.txt", bytes("héllo")],
      ["/tmp/empty", new Uint8Array(0)],
      ["/out/ünï cødé/🙂", bytes("x")],
      ["/tmp/a.txt", null],
    ];
    const read = await decoded(changes);
    assert.deepEqual(read, changes);
    assert.equal(read[0][1].byteOffset, 0);
    assert.equal(read[0][1].buffer.byteLength, read[0][1].byteLength, "not a view into the whole file");
    const { size, blob } = encodeRecords(changes);
    assert.equal(size, blob.size);
  });

  test("random batches read back exactly", async () => {
    for (let round = 0; round < 200; round++) {
      const changes = Array.from({ length: randomInt(0, 20) }, (_, i) => [
        `/tmp/${randomBytes(randomInt(1, 12)).toString("base64url")}/${i}`,
        randomInt(0, 4) === 0 ? null : new Uint8Array(randomBytes(randomInt(0, 300))),
      ]);
      assert.deepEqual(await decoded(changes), changes);
    }
  });

  test("a damaged file is refused, saying where", async () => {
    const good = new Uint8Array(await encodeRecords([["/tmp/a", bytes("abc")]]).blob.arrayBuffer());
    const damaged = (edit) => {
      const copy = good.slice();
      return edit(copy) ?? copy;
    };
    const refusals = [
      [new Uint8Array(0), /does not start with RWS1/],
      [damaged((b) => void (b[0] = 0x58)), /does not start with RWS1/],
      [good.slice(0, good.length - 1), /record at byte 4 is malformed/],
      [good.slice(0, 8), /record header is cut off at byte 4/],
      [damaged((b) => void (b[4] = 2)), /record at byte 4 is malformed/],
      [damaged((b) => void (b[4] = 0)), /record at byte 4 is malformed/], // a removal with data
      [damaged((b) => void b.set([0xff, 0xff, 0xff, 0x7f], 5)), /record at byte 4 is malformed/],
      [damaged((b) => void (b[13] = 0xff)), /the path of the record at byte 4 is not UTF-8/],
    ];
    for (const [buffer, reason] of refusals) {
      assert.throws(() => [...records(buffer.buffer.slice(buffer.byteOffset, buffer.byteOffset + buffer.byteLength))], reason);
    }
  });
});
