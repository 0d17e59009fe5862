// The workspace's in-memory tree (public/lib/workspace-tree.js), in Node: a batch's PendingTree
// counts the files under each directory and the bytes exactly as the workspace will hold them,
// and leaves the workspace's own tree alone. No server, no browser.
// Run: node --test miniflare-tests/workspace-tree.test.mjs

import assert from "node:assert/strict";
import { randomInt } from "node:crypto";
import { test } from "node:test";
import { FileTree, PendingTree } from "../public/lib/workspace-tree.js";

const bytes = (size) => new Uint8Array(size);

/** {dir: files under it, at any depth} and the total size, counted from scratch. */
function recount(entries) {
  const dirs = {};
  let totalBytes = 0;
  for (const [path, data] of entries) {
    totalBytes += data.byteLength;
    const segments = path.split("/");
    for (let i = 2; i < segments.length; i++) {
      const dir = segments.slice(0, i).join("/");
      dirs[dir] = (dirs[dir] ?? 0) + 1;
    }
  }
  return { dirs, totalBytes };
}

/** What `tree` says of every directory `paths` could lie under, and its size. */
function counted(tree, paths) {
  const dirs = {};
  for (const path of paths) {
    const segments = path.split("/");
    for (let i = 2; i < segments.length; i++) {
      const dir = segments.slice(0, i).join("/");
      const files = tree.filesUnder(dir);
      if (files) dirs[dir] = files;
    }
  }
  return { dirs, totalBytes: tree.totalBytes };
}

test("removing a directory's files and writing a file in its place, in one batch", () => {
  const base = new FileTree(new Map([["/tmp/d/a", bytes(1)], ["/tmp/d/b", bytes(2)]]));
  const pending = new PendingTree(base);
  pending.set("/tmp/d/a", null);
  pending.set("/tmp/d/b", null);
  assert.equal(pending.filesUnder("/tmp/d"), 0);
  assert.equal(pending.filesUnder("/tmp"), 0);
  pending.set("/tmp/d", bytes(3));
  assert.equal(pending.filesUnder("/tmp"), 1);
  assert.equal(pending.totalBytes, 3);
  // The workspace's own tree is as it was.
  assert.deepEqual(counted(base, ["/tmp/d/a"]), { dirs: { "/tmp": 2, "/tmp/d": 2 }, totalBytes: 3 });
});

test("random batches over random workspaces: every directory's count and the size are exact", () => {
  const names = ["/tmp/a", "/tmp/b", "/tmp/d/x", "/tmp/d/y", "/tmp/d/e/z", "/out/d/x", "/out/q"];
  for (let round = 0; round < 2000; round++) {
    const base = new FileTree(new Map(names.filter(() => randomInt(2)).map((path) => [path, bytes(randomInt(4))])));
    const baseBefore = counted(base, names);
    const pending = new PendingTree(base);
    const steps = [];
    for (let i = randomInt(12); i > 0; i--) {
      const path = names[randomInt(names.length)];
      const data = randomInt(3) ? null : bytes(randomInt(4));
      steps.push([path, data?.byteLength ?? null]);
      // As Workspace.storeBatch: a removal of nothing is no change.
      if (data || pending.get(path)) pending.set(path, data);
      const expected = recount(pending.entries());
      assert.deepEqual(counted(pending, names), expected, `after ${JSON.stringify(steps)}`);
    }
    assert.deepEqual(counted(base, names), baseBefore, "the base is untouched");
    // The batch applied to the base (what the workspace does once it is stored) agrees too.
    for (const [path, data] of pending.files) base.set(path, data);
    assert.deepEqual(counted(base, names), recount(pending.entries()), `applied: ${JSON.stringify(steps)}`);
  }
});
