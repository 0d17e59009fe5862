// No server and no browser: the page's build budget in Node, as builds at the edge share it:
// the tarball reader (public/lib/packages/tar.js) and the download counts (registry.js). A gzip bomb (1 GiB of zeros, about 1 MiB gzipped) must stop at the
// tree's cap having handed the inflater the bytes that inflate to the cap and a few slices more,
// not all of it: workerd's DecompressionStream
// inflates each written chunk whole before serving a read, so what is written is what is
// inflated. Node's inflater is the real one here, watched for the bytes written to it. Only
// regular files count as the tree's files; other entries are bounded on their own.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
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
const { Budget, Registry, untgz } = await (async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "tar-test-"));
  try {
    const outfile = path.join(dir, "tar.mjs");
    await esbuild.build({
      stdin: { contents: 'export { untgz } from "./tar.js"; export { Budget, Registry } from "./registry.js";', resolveDir: path.join(ROOT, "public/lib/packages") },
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

/** Counts the bytes (and the writes) every DecompressionStream made meanwhile is written. */
function watchInflaters() {
  const Real = globalThis.DecompressionStream;
  const watch = { written: 0, writes: 0, restore: () => (globalThis.DecompressionStream = Real) };
  globalThis.DecompressionStream = class extends Real {
    get writable() {
      const writable = super.writable;
      const getWriter = writable.getWriter.bind(writable);
      writable.getWriter = () => {
        const writer = getWriter();
        const write = writer.write.bind(writer);
        writer.write = (chunk) => ((watch.written += chunk.byteLength), watch.writes++, write(chunk));
        return writer;
      };
      return writable;
    }
  };
  return watch;
}

test("a gzip bomb stops at treeBytes having handed the inflater the bytes of that much and a few slices more", async () => {
  const bomb = new Uint8Array(madePackages().bomb);
  const watch = watchInflaters();
  try {
    const started = Date.now();
    await assert.rejects(untgz(bomb, "bomb@1.0.0", new Budget({ treeBytes: TREE_BYTES })), /bomb@1.0.0: the build unpacked more than \(its packages. files\) 64 MiB/);
    const needed = Math.ceil((TREE_BYTES / BOMB_BYTES) * bomb.length); // the compressed bytes of the tree up to the cap
    console.log(`# the bomb (${bomb.length} bytes gzipped): ${watch.written} bytes written to the inflater (${needed} inflate to the cap) before the cap stopped it, ${Date.now() - started} ms`);
    // Node's inflater takes a write into its buffer at once and inflates it on its thread pool,
    // so a few slices may go ahead of the reads here (workerd and Chromium inflate in the write);
    // written whole, the bomb's every byte goes in.
    assert.ok(watch.written <= needed + 4 * SLICE, `${watch.written} bytes written: more than a few slices past the cap's ${needed}`);
  } finally {
    watch.restore();
  }
});

test("an inflater slow to serve a read, with no backpressure, gets a few slices ahead of it, not one per turn", async () => {
  // Node's real inflater, as workerd's behaves: a write settles at once (no backpressure) and
  // each inflated chunk reaches its read 200 ms later (workerd may take several turns). The
  // reader must not feed a slice per turn meanwhile. The cap stops the bomb at its first header.
  const Real = globalThis.DecompressionStream;
  const late = (chunk) => new Promise((resolve) => setTimeout(() => resolve(chunk), 200));
  globalThis.DecompressionStream = class extends Real {
    get writable() {
      const inflater = super.writable.getWriter();
      return new WritableStream({ write: (chunk) => void inflater.write(chunk).catch(() => {}), close: () => void inflater.close().catch(() => {}) });
    }
    get readable() {
      let cancelled = false;
      const delay = new TransformStream({
        transform: async (chunk, out) => {
          chunk = await late(chunk);
          if (!cancelled) out.enqueue(chunk);
        },
      });
      const reader = super.readable.pipeThrough(delay).getReader();
      // The reader's cancel (at the cap) drops the chunks still late.
      return new ReadableStream({
        pull: async (out) => {
          const { done, value } = await reader.read();
          if (done) out.close();
          else out.enqueue(value);
        },
        cancel: (why) => ((cancelled = true), reader.cancel(why)),
      });
    }
  };
  const watch = watchInflaters();
  try {
    const bomb = new Uint8Array(madePackages().bomb);
    await assert.rejects(untgz(bomb, "bomb@1.0.0", new Budget({ treeBytes: 1024 * 1024 })), /bomb@1.0.0: the build unpacked more than/);
    console.log(`# a read served 200 ms late: ${watch.written / SLICE} slices written before it was`);
    assert.ok(watch.written <= 20 * SLICE, `${watch.written / SLICE} slices written while one read waited`);
  } finally {
    watch.restore();
    globalThis.DecompressionStream = Real;
  }
});

test("an empty tarball is refused as not gzip, not waited on forever", { timeout: 10_000 }, async () => {
  await assert.rejects(untgz(new Uint8Array(0), "empty@1.0.0"), (err) => {
    assert.equal(err.name, "DepsResolutionFailed");
    assert.equal(err.message, "empty@1.0.0: the tarball is not gzip: it is empty (0 bytes)");
    return true;
  });
});

test("a tab (no tree caps) unpacks a multi-MiB tarball in 64 KiB slices, the edge in 4 KiB ones", async () => {
  // Incompressible: its compressed size is its size, as a package of minified code nearly is.
  const tarball = new Uint8Array(packed("big", (dir) => {
    for (let i = 0; i < 5; i++) writeFileSync(path.join(dir, `blob${i}.bin`), randomBytes(1024 * 1024));
  }));
  for (const [where, budget, slice] of [["a tab", new Budget({}), 64 * 1024], ["the edge", new Budget({ treeBytes: TREE_BYTES }), SLICE]]) {
    const watch = watchInflaters();
    try {
      const started = performance.now();
      const files = await untgz(tarball, "big@1.0.0", budget);
      assert.equal(files.get("blob4.bin").length, 1024 * 1024);
      console.log(`# ${where}: ${tarball.length} bytes gzipped unpacked in ${(performance.now() - started).toFixed(0)} ms, ${watch.writes} writes to the inflater`);
      assert.equal(watch.writes, Math.ceil(tarball.length / slice), `${where}: one write per ${slice}-byte slice`);
    } finally {
      watch.restore();
    }
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
