// The label a cached runtime snapshot is kept under (public/lib/runtime-files.js), in Node: it
// changes with the files the snapshot is made from, and not with policy.wasm, which every
// runtime lists but no snapshot holds, so a deploy that changes only the policy keeps every
// tab's snapshot. No server, no browser.
// Run: node --test miniflare-tests/runtime-files.test.mjs

import assert from "node:assert/strict";
import { test } from "node:test";
import { snapshotLabel } from "../public/lib/runtime-files.js";

/** A runtime's files as runtimes.json lists them (scripts/build-assets.mjs), with these hashes. */
const pyodideFiles = (hashes = {}) =>
  Object.fromEntries(
    ["pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json", "runner.js", "policy.wasm"].map((name) => [
      name,
      { url: `vendor/pyodide@314/${name}`, integrity: hashes[name] ?? `sha384-${name}`, size: 1 },
    ]),
  );

test("a new policy.wasm keeps the snapshot's label", () => {
  const before = snapshotLabel(pyodideFiles({ "policy.wasm": "sha384-old" }));
  assert.equal(snapshotLabel(pyodideFiles({ "policy.wasm": "sha384-new" })), before);
  assert.ok(!before.includes("policy"), before);
});

test("any file the snapshot is made from changes the label", () => {
  const label = snapshotLabel(pyodideFiles());
  for (const name of ["pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json", "runner.js"]) {
    assert.notEqual(snapshotLabel(pyodideFiles({ [name]: "sha384-changed" })), label, name);
  }
});
