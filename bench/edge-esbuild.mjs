// Issue 27 item 5: could a deps build run at the edge when no tab can? Runs esbuild-wasm (the
// npm package the page uses) in Worker Loader dynamic workers, outside the product: builds
// bench/edge-esbuild/build/ (guest.js bundled with esbuild-wasm's browser API and the tab's own
// bundler, public/lib/packages/bundle.js; esbuild.wasm copied as a module file), starts that
// Worker under its own `wrangler dev`, and times from here, in turns:
// - a fresh dynamic worker alone (its modules, esbuild.wasm compiled by the loader);
// - esbuild initialized in one (the Go runtime started on the isolate's thread);
// - a whole build in one: the package tree (real files from node_modules, sent in the request
//   as the host would pass what it fetched from the registry) bundled into the deps layer's
//   modules, for a small package, a CommonJS one with four dependencies, and a large ESM one.
// Prints p50/p95 as the client sees them, the guest's clock, the output and esbuild's wasm
// memory (its peak: Go's heap only grows); then, for one build of each, the slowest answer of
// GET /ready polled meanwhile.
// Run it with `source scripts/env.sh && node bench/edge-esbuild.mjs` (BENCH_EDGE_ESBUILD_PORT,
// default 8866; BENCH_CALLS rounds, default 10).

import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { bundleGuest, pollReady, startWorker } from "./dev-worker.mjs";
import { percentiles } from "./timing.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const DIR = path.join(ROOT, "bench/edge-esbuild");
const BUILD = path.join(DIR, "build");
const WASM = path.join(ROOT, "node_modules/esbuild-wasm/esbuild.wasm");
const PORT = Number(process.env.BENCH_EDGE_ESBUILD_PORT ?? 8866);
const N = Number(process.env.BENCH_CALLS ?? 10);

// lodash as bench/packages.mjs builds it on a tab: the tests' tarball (`npm pack`, fetched once
// into miniflare-tests/.artifacts/packages/ as the tests' package sources do).
const LODASH = "lodash-4.17.21.tgz";
const ARTIFACTS = path.join(ROOT, "miniflare-tests/.artifacts/packages");
const UNPACKED = await mkdtemp(path.join(tmpdir(), "edge-esbuild-")); // removed at the end

// What each build bundles: the packages asked for, and every package of their tree (a name in
// node_modules, or {name, dir}).
const BUILDS = {
  "ms (1 small file)": { specifiers: ["ms"], tree: ["ms"] },
  "lodash 4.17.21 (CommonJS, 1,054 files)": { specifiers: ["lodash"], tree: [{ name: "lodash", dir: await unpackLodash() }] },
  "ajv + 4 deps (CommonJS)": { specifiers: ["ajv"], tree: ["ajv", "fast-deep-equal", "fast-uri", "json-schema-traverse", "require-from-string"] },
  "zod (large ESM)": { specifiers: ["zod"], tree: ["zod"] },
};

async function buildWorker() {
  await bundleGuest(DIR, {
    external: ["./esbuild.wasm"],
    // The tab's bundler names its errors from relay-core's table, which `bash scripts/build.sh`
    // writes (as scripts/build-assets.mjs aliases it).
    alias: { "relay-error-names": path.join(ROOT, "dist/generated/error-names.json") },
  });
  await copyFile(WASM, path.join(BUILD, "esbuild.wasm.bin"));
}

/** lodash's tarball unpacked into UNPACKED: the package's own directory. */
async function unpackLodash() {
  if (!existsSync(path.join(ARTIFACTS, LODASH))) {
    await mkdir(ARTIFACTS, { recursive: true });
    execFileSync("npm", ["pack", "--silent", "lodash@4.17.21"], { cwd: ARTIFACTS, stdio: ["ignore", "ignore", "inherit"] });
  }
  execFileSync("tar", ["-xzf", path.join(ARTIFACTS, LODASH), "-C", UNPACKED]);
  return path.join(UNPACKED, "package");
}

/** Every file of the packages, as the tab's npm.js unpacks them: /node_modules/<name>/... */
async function packageTree(packages) {
  const files = {};
  for (const pkg of packages) {
    const { name, dir } = typeof pkg === "string" ? { name: pkg, dir: path.join(ROOT, "node_modules", pkg) } : pkg;
    for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue;
      const full = path.join(entry.parentPath, entry.name);
      files[`/node_modules/${name}/${path.relative(dir, full)}`] = await readFile(full, "utf8");
    }
  }
  return files;
}

async function timed(url, body) {
  const t0 = performance.now();
  const res = await fetch(url, { method: "POST", body });
  const text = await res.text();
  const ms = performance.now() - t0;
  if (!res.ok) return { ms, error: `${res.status} ${text.slice(0, 400)}` };
  return { ms, body: JSON.parse(text) };
}

const fmt = (ms) => `${ms.toFixed(0).padStart(6)} ms`;
function report(label, all) {
  const failed = all.filter((x) => x.error);
  if (failed.length) console.log(`${label}: ${failed.length} of ${all.length} failed, the first: ${failed[0].error}`);
  const ok = all.filter((x) => !x.error);
  if (!ok.length) return;
  const s = percentiles(ok.map((x) => x.ms));
  const guest = (key) => percentiles(ok.map((x) => x.body.guestMs[key] ?? 0)).p50;
  const last = ok[ok.length - 1].body;
  const out = last.outBytes ? `, output ${(last.outBytes / 1024).toFixed(0)} KiB in ${last.outFiles.length} files` : "";
  const mem = last.wasmMemMiB ? `, esbuild wasm memory ${last.wasmMemMiB.toFixed(0)} MiB` : "";
  console.log(`${label.padEnd(40)} p50 ${fmt(s.p50)}  p95 ${fmt(s.p95)}   guest p50: init ${guest("init")} ms, build ${guest("build")} ms${out}${mem}  (n=${ok.length})`);
}

await buildWorker();
const wasm = await readFile(WASM);
console.log(`esbuild-wasm ${JSON.parse(await readFile(path.join(ROOT, "node_modules/esbuild-wasm/package.json"), "utf8")).version}: esbuild.wasm ${(wasm.byteLength / 2 ** 20).toFixed(1)} MiB, ${(gzipSync(wasm).byteLength / 2 ** 20).toFixed(1)} MiB gzipped`);
const inputs = {};
for (const [label, { specifiers, tree }] of Object.entries(BUILDS)) {
  const files = await packageTree(tree);
  inputs[label] = JSON.stringify({ files, specifiers });
  const bytes = Object.values(files).reduce((n, text) => n + Buffer.byteLength(text), 0);
  console.log(`  ${label}: ${Object.keys(files).length} files, ${(bytes / 2 ** 20).toFixed(2)} MiB unpacked`);
}
const loadBefore = loadavg().map((l) => l.toFixed(2)).join(" ");
const server = await startWorker({ dir: DIR, port: PORT, ready: "edge-esbuild", portVariable: "BENCH_EDGE_ESBUILD_PORT" });
try {
  const { url } = server;
  const first = await timed(`${url}/cold?stage=init`);
  console.log(`first load (workerd's first sight of the modules) and init: ${fmt(first.ms)}${first.error ? ` failed: ${first.error}` : ""}`);
  const kinds = [
    ["a fresh dynamic worker alone", "load", ""],
    ["esbuild initialized", "init", ""],
    ...Object.keys(BUILDS).map((label) => [`build: ${label}`, "build", inputs[label]]),
  ];
  const samples = kinds.map(() => []);
  for (let i = 0; i < N; i++) {
    for (const [k, [, stage, body]] of kinds.entries()) samples[k].push(await timed(`${url}/cold?stage=${stage}`, body));
  }
  for (const [k, [label]] of kinds.entries()) report(label, samples[k]);
  for (const label of Object.keys(BUILDS)) {
    const done = { value: false };
    const health = pollReady(url, done);
    const r = await timed(`${url}/cold?stage=build`, inputs[label]);
    done.value = true;
    console.log(`while a build of ${label} ran (${fmt(r.ms)}): the slowest GET /ready ${fmt(await health)}`);
  }
} finally {
  server.stop();
  await rm(UNPACKED, { recursive: true });
}
console.log(`load average before: ${loadBefore}; after: ${loadavg().map((l) => l.toFixed(2)).join(" ")}`);
