// No server and no browser: the page's build budget in Node, as builds at the edge share it:
// the tarball reader (public/lib/packages/tar.js) and the download counts (registry.js). A gzip
// bomb (1 GiB of zeros, about 1 MiB gzipped) must stop at the tree's cap having inflated only
// what the reads took and one slice more (the inflater is pako, in the reader's turn, as it
// is at the edge). Only regular files count as the tree's files; other entries are bounded on
// their own.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { gzipSync } from "node:zlib";
import { mkdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import * as esbuild from "esbuild";
import { madePackages, packed } from "./lib/package-sources.mjs";
import { ROOT } from "./lib/relay.mjs";

// The page's modules name their errors from relay-core's table, which `bash scripts/build.sh`
// writes (scripts/build-assets.mjs aliases it as the page's build does).
const { Budget, Inflated, Registry, untgz } = await (async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "tar-test-"));
  try {
    const outfile = path.join(dir, "tar.mjs");
    await esbuild.build({
      stdin: { contents: 'export { Inflated, untgz } from "./tar.js"; export { Budget, Registry } from "./registry.js";', resolveDir: path.join(ROOT, "public/lib/packages") },
      bundle: true,
      format: "esm",
      platform: "neutral",
      outfile,
      alias: { "relay-error-names": path.join(ROOT, "dist/generated/error-names.json") },
      logLevel: "error",
    });
    return await import(pathToFileURL(outfile).href);
  } finally {
    await rm(dir, { recursive: true });
  }
})();

// Past the first 8 files of the bomb's 128: the inflater must keep pace with the reads that long.
const TREE_BYTES = 64 * 1024 * 1024;
const BOMB_BYTES = 128 * 8 * 1024 * 1024;
const SLICE = 4096;

test("a gzip bomb stops at treeBytes", async () => {
  const bomb = new Uint8Array(madePackages().bomb);
  await assert.rejects(untgz(bomb, "bomb@1.0.0", new Budget({ treeBytes: TREE_BYTES })), /bomb@1.0.0: the build unpacked more than \(its packages. files\) 64 MiB/);
});

test("the inflater is handed only the slices a take needs, so it holds at most one slice's output past the reads", () => {
  const bomb = new Uint8Array(madePackages().bomb);
  const tar = new Inflated(bomb, "bomb@1.0.0", SLICE);
  // The header, then the first file's 8 MiB of zeros, as untgz takes them.
  for (const n of [512, 8 * 1024 * 1024, 512]) assert.ok(tar.take(n));
  const needed = Math.ceil(((8 * 1024 * 1024 + 1024) / BOMB_BYTES) * bomb.length); // the compressed bytes of what was taken
  console.log(`# the bomb (${bomb.length} bytes gzipped): ${tar.fed} bytes fed for ${needed} needed; ${tar.length} bytes held past the reads`);
  assert.ok(tar.fed <= needed + 2 * SLICE, `${tar.fed} bytes fed: more than a slice past the ${needed} the takes needed`);
  assert.ok(tar.length <= 1032 * SLICE, `${tar.length} bytes held past the reads: more than one slice inflates to`);
});

test("a gzip header with a long comment (an empty-output prefix) unpacks at once, on a tab and at the edge", { timeout: 20_000 }, async () => {
  // The stream inflater this replaced waited twice as long for each slice that gave no output
  // (a 96 KiB comment took the edge's whole 15 s, 2 MiB a tab's build for hours); fflate, tried
  // next, reads a header again from its start at each slice.
  const tarball = Buffer.from(packed("commented", (dir) => writeFileSync(path.join(dir, "index.js"), "module.exports = 1;\n")));
  const comment = Buffer.alloc(2 * 1024 * 1024, 0x61);
  // FLG.FCOMMENT (0x10): a zero-terminated comment after the 10-byte header.
  const withComment = Buffer.concat([tarball.subarray(0, 3), Buffer.from([tarball[3] | 0x10]), tarball.subarray(4, 10), comment, Buffer.from([0]), tarball.subarray(10)]);
  assert.equal(tarball[3] & 0x1c, 0, "the packed tarball has no name, comment or extra field before its data");
  for (const budget of [new Budget({}), new Budget({ treeBytes: TREE_BYTES })]) {
    const files = await untgz(new Uint8Array(withComment), "commented@1.0.0", budget);
    assert.equal(new TextDecoder().decode(files.get("index.js")), "module.exports = 1;\n");
  }
});

test("gzip members, padding and truncation are read as zlib reads them, on a tab and at the edge", { timeout: 20_000 }, async () => {
  const tarball = Buffer.from(packed("members", (dir) => writeFileSync(path.join(dir, "index.js"), "module.exports = 2;\n")));
  // 100,000 empty members first (2 MiB, so members end on slice boundaries too), zeros after.
  const members = Buffer.concat([Buffer.concat(Array(100_000).fill(gzipSync(Buffer.alloc(0)))), tarball, Buffer.alloc(1024)]);
  for (const budget of [new Budget({}), new Budget({ treeBytes: TREE_BYTES })]) {
    const files = await untgz(new Uint8Array(members), "members@1.0.0", budget);
    assert.equal(new TextDecoder().decode(files.get("index.js")), "module.exports = 2;\n");
    await assert.rejects(untgz(new Uint8Array(tarball.subarray(0, tarball.length - 8)), "cut@1.0.0", budget), /^DepsResolutionFailed: cut@1\.0\.0: the tarball is not gzip: it ends before its compressed stream does$/);
    const badCrc = Buffer.from(tarball);
    badCrc[badCrc.length - 8] ^= 0xff;
    await assert.rejects(untgz(new Uint8Array(badCrc), "crc@1.0.0", budget), /crc@1\.0\.0: the tarball is not gzip: incorrect data check/);
  }
});

test("an empty tarball is refused as not gzip, not waited on forever", { timeout: 10_000 }, async () => {
  await assert.rejects(untgz(new Uint8Array(0), "empty@1.0.0"), (err) => {
    assert.equal(err.name, "DepsResolutionFailed");
    assert.equal(err.message, "empty@1.0.0: the tarball is not gzip: it is empty (0 bytes)");
    return true;
  });
});

test("a tab (no tree caps) and the edge unpack a multi-MiB tarball whole", async () => {
  // Incompressible: its compressed size is its size, as a package of minified code nearly is.
  const tarball = new Uint8Array(packed("big", (dir) => {
    for (let i = 0; i < 5; i++) writeFileSync(path.join(dir, `blob${i}.bin`), randomBytes(1024 * 1024));
  }));
  for (const [where, budget] of [["a tab", new Budget({})], ["the edge", new Budget({ treeBytes: TREE_BYTES })]]) {
    const started = performance.now();
    const files = await untgz(tarball, "big@1.0.0", budget);
    assert.equal(files.get("blob4.bin").length, 1024 * 1024);
    console.log(`# ${where}: ${tarball.length} bytes gzipped unpacked in ${(performance.now() - started).toFixed(0)} ms`);
  }
});

test("a tarball read a slice at a time gives its files whole", async () => {
  const files = await untgz(new Uint8Array(madePackages()["many-files"]), "many-files@1.0.0");
  assert.equal(files.size, 2_002);
  assert.equal(new TextDecoder().decode(files.get("m1999.js")), "module.exports = 1999;\n");
  assert.equal(JSON.parse(new TextDecoder().decode(files.get("package.json"))).name, "many-files");
});

test("only regular files count toward treeFiles: directories and long names do not", async () => {
  const long = `${"d".repeat(120)}.js`; // past ustar's 100 bytes: a GNU long-name entry before it
  const tarball = packed("dirs", (dir) => {
    mkdirSync(path.join(dir, "lib", "deep"), { recursive: true });
    writeFileSync(path.join(dir, "lib", "deep", "a.js"), "export default 1;\n");
    writeFileSync(path.join(dir, "lib", long), "export default 2;\n");
  });
  const files = await untgz(new Uint8Array(tarball), "dirs@1.0.0", new Budget({ treeFiles: 3 }));
  assert.deepEqual([...files.keys()].sort(), ["lib/deep/a.js", `lib/${long}`, "package.json"].sort());
});

test("a flood of entries that are not files stops at its own bound", async () => {
  const tarball = packed("dir-flood", (dir) => {
    for (let i = 0; i <= 10_000; i++) mkdirSync(path.join(dir, `d${i}`));
  });
  await assert.rejects(untgz(new Uint8Array(tarball), "dir-flood@1.0.0", new Budget({ treeFiles: 2_000 })), /dir-flood@1.0.0: the build's tarballs have more than 10000 entries that are not files/);
});

test("the bound on entries that are not files is the build's, across its tarballs", async () => {
  const tarball = new Uint8Array(packed("dirs-6k", (dir) => {
    for (let i = 0; i < 6_000; i++) mkdirSync(path.join(dir, `d${i}`));
  }));
  const budget = new Budget({ treeFiles: 2_000 });
  await untgz(tarball, "dirs-6k@1.0.0", budget);
  await assert.rejects(untgz(tarball, "dirs-6k@2.0.0", budget), /dirs-6k@2.0.0: the build's tarballs have more than 10000 entries that are not files/);
});

test("a tab's download cap names the package and its size in MiB; package lists have their own budget", async () => {
  const via = new Registry("");
  const mib = (n) => new Uint8Array(n * 1024 * 1024);
  await via.counted(new Response(mib(60)), "https://registry.test/big.tgz", "big@1.0.0", "downloadBytes");
  // The decoded package lists count apart from the archives' compressed bytes.
  await via.counted(new Response(mib(10)), "https://registry.test/big", "big", "listBytes");
  await assert.rejects(
    via.counted(new Response(mib(5)), "https://registry.test/more.tgz", "more@2.0.0", "downloadBytes"),
    (err) => err.name === "DepsResolutionFailed" && /^more@2\.0\.0: the build downloaded more than \(its packages' archives, compressed\) 64 MiB; list fewer/.test(err.message),
  );
});

test("an answer with no body is a DepsResolutionFailed naming the package and the URL", async () => {
  const via = new Registry("");
  await assert.rejects(via.counted(new Response(null, { status: 200 }), "https://registry.test/x.tgz", "x@1.0.0", "downloadBytes"), (err) => {
    assert.equal(err.name, "DepsResolutionFailed");
    assert.equal(err.message, "x@1.0.0: https://registry.test/x.tgz answered 200 with no body");
    return true;
  });
});
