// Builds the executor page's static assets into dist/public/:
// - bundles the page (executor.js), its Web Worker (runner.js) and the runner test page with esbuild;
// - copies the HTML/CSS next to them;
// - vendors the browser runtimes from their npm packages into dist/public/vendor/<runtime-id>/
//   (never from a CDN) and writes dist/public/runtimes.json with an SRI hash (sha384) per file.
// Run as `node scripts/build-assets.mjs`; also imported by the tests (buildAssets()).
// Idempotent: vendored files whose size and mtime already match are not copied again.

import { createHash } from "node:crypto";
import { copyFile, mkdir, readFile, readdir, rm, stat, utimes, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import * as esbuild from "esbuild";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SRC = path.join(ROOT, "public");
const OUT = path.join(ROOT, "dist", "public");
const requireFromRoot = createRequire(path.join(ROOT, "package.json"));

const ENTRY_POINTS = ["executor.js", "runner.js", "runner-test.js"];
const STATIC_EXTENSIONS = [".html", ".css"];

// Each runtime: its npm package, how its id derives from the package version, and the files the
// browser needs to load it offline. The ids are the `runtime.id` values capsules name.
const RUNTIMES = [
  {
    pkg: "@jitl/quickjs-wasmfile-release-sync",
    id: (version) => `quickjs@${version.split(".").slice(0, 2).join(".")}`,
    files: { "emscripten-module.wasm": "dist/emscripten-module.wasm" },
  },
  {
    pkg: "pyodide",
    id: (version) => `pyodide@${version.split(".")[0]}`,
    files: Object.fromEntries(
      ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"].map(
        (name) => [name, name],
      ),
    ),
  },
];

export async function buildAssets({ log = console.log } = {}) {
  const started = performance.now();
  await mkdir(OUT, { recursive: true });
  await bundle();
  await copyStatic();
  const runtimes = {};
  for (const runtime of RUNTIMES) {
    const { id, files } = await vendorRuntime(runtime);
    runtimes[id] = { files };
  }
  await pruneVendor(Object.keys(runtimes));
  await writeIfChanged(path.join(OUT, "runtimes.json"), JSON.stringify(runtimes, null, 2) + "\n");
  log(`build-assets: ${path.relative(ROOT, OUT)} ready in ${Math.round(performance.now() - started)} ms`);
  return { outDir: OUT, runtimes };
}

async function bundle() {
  await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: ENTRY_POINTS.map((name) => path.join(SRC, name)),
    outdir: OUT,
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    sourcemap: "linked",
    // The Python helper the runner loads into Pyodide ships as text inside runner.js.
    loader: { ".py": "text" },
    logLevel: "warning",
  });
}

async function copyStatic() {
  for (const name of await readdir(SRC)) {
    if (STATIC_EXTENSIONS.includes(path.extname(name))) {
      await copyIfChanged(path.join(SRC, name), path.join(OUT, name));
    }
  }
}

async function vendorRuntime({ pkg, id, files }) {
  const pkgDir = path.dirname(requireFromRoot.resolve(`${pkg}/package.json`));
  const { version } = JSON.parse(await readFile(path.join(pkgDir, "package.json"), "utf8"));
  const runtimeId = id(version);
  const outDir = path.join(OUT, "vendor", runtimeId);
  await mkdir(outDir, { recursive: true });
  const listed = {};
  for (const [name, from] of Object.entries(files)) {
    const source = path.join(pkgDir, from);
    const bytes = await readFile(source);
    await copyIfChanged(source, path.join(outDir, name));
    listed[name] = {
      // Relative to runtimes.json, so the page works under any base path.
      url: `vendor/${runtimeId}/${name}`,
      integrity: `sha384-${createHash("sha384").update(bytes).digest("base64")}`,
      size: bytes.length,
    };
  }
  return { id: runtimeId, files: listed };
}

/** Removes runtimes vendored by earlier builds (older versions) so they are not deployed. */
async function pruneVendor(keep) {
  for (const name of await readdir(path.join(OUT, "vendor"))) {
    if (!keep.includes(name)) await rm(path.join(OUT, "vendor", name), { recursive: true });
  }
}

async function copyIfChanged(from, to) {
  const source = await stat(from);
  const target = await stat(to).catch(() => null);
  if (target && target.size === source.size && target.mtimeMs === source.mtimeMs) return;
  await copyFile(from, to);
  // Carry the source's mtime over so the next build recognises the copy as current.
  await utimes(to, source.atime, source.mtime);
}

async function writeIfChanged(file, text) {
  const current = await readFile(file, "utf8").catch(() => null);
  if (current !== text) await writeFile(file, text);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  buildAssets().catch((err) => {
    console.error(`build-assets: ${err.stack ?? err}`);
    process.exit(1);
  });
}
