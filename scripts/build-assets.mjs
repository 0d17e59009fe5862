// Builds the executor page's static assets into dist/public/:
// - bundles the page (executor.js), the OAuth consent page (authorize.js) and the runner test
//   page with esbuild;
// - bundles one runner worker script per runtime (runner-quickjs.js, runner-pyodide.js), which
//   the sandbox frame starts from blob: URLs, so they are self-contained classic scripts;
// - writes sandbox.html with the sandbox frame's script inlined and pinned by hash in its
//   Content-Security-Policy, and copies the other HTML/CSS;
// - vendors the browser runtimes from their npm packages into dist/public/vendor/<runtime-id>/
//   (never from a CDN) and writes dist/public/runtimes.json with an SRI hash (sha384) per file,
//   each runtime's runner script included;
// - builds relay-core's policy for the page (policy-wasm/, cargo, wasm32) into
//   dist/public/policy.wasm, and its SRI hash into dist/generated/policy-wasm.json, which the
//   bundles import as `relay-policy-wasm` (public/lib/policy.js checks the download against it);
//   it is also a file of every runtime in runtimes.json, so the runners get it compiled (but
//   not one a cached snapshot is labelled with: public/lib/runtime-files.js);
// - copies esbuild-wasm's esbuild.wasm (the dependency builds' bundler) into dist/public/ and its
//   SRI hash into dist/generated/esbuild-wasm.json, imported as `relay-esbuild-wasm`.
// - bundles the edge executor's Python runner (durable/js/edge-runner-pyodide.js) with
//   Pyodide's JS, patched, and its deps builder (durable/js/edge-build.js) into dist/public/edge/
//   (the Worker reads them from its assets; the builder's integrity in dist/generated/).
// Run as `node scripts/build-assets.mjs`; also imported by the tests (buildAssets()).
// Idempotent: vendored files whose size and mtime already match are not copied again.

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFile, mkdir, readFile, readdir, rm, stat, utimes, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import * as esbuild from "esbuild";
import { patchPyodide } from "./pyodide-patches.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SRC = path.join(ROOT, "public");
const OUT = path.join(ROOT, "dist", "public");
// The runner test page (runner-test.html): built beside the deployed assets, never among them;
// the browser tests serve it over dist/public (miniflare-tests/lib/static-server.mjs).
const TEST_OUT = path.join(ROOT, "dist", "test");
const TEST_PAGE = "runner-test";
// Files generated from the Rust core for the page's bundles to import (not served).
const GENERATED = path.join(ROOT, "dist", "generated");
const requireFromRoot = createRequire(path.join(ROOT, "package.json"));

const ENTRY_POINTS = ["executor.js", "build-worker.js", "lease-worker.js", "clock-worker.js", "authorize.js"];
const STATIC_EXTENSIONS = [".html", ".css"];
const SANDBOX_HTML = "sandbox.html";
const SANDBOX_SCRIPT = "sandbox/frame.js";
// The sandbox frame's policy; %HASH% is its inline script's. blob: workers inherit it, so guest
// code gets no network (connect-src, script loads), no eval and no storage-free escape hatch.
const SANDBOX_CSP = "default-src 'none'; script-src '%HASH%' 'wasm-unsafe-eval'; worker-src blob:; base-uri 'none'; form-action 'none'";
// Headers Workers Static Assets add to the page's files (`_headers` is read, never served). The
// pages' own policies are in their <meta>; these are what a <meta> cannot say: no page may be
// framed (the executor page and the consent page hold the API key; a framed consent page can
// be clicked through), and nothing is sniffed as another type. `/*` matches every path, those
// the assets answer for `/x.html` too (`/authorize`, `/`), so a new page cannot be missed. The
// sandbox frame, which the page frames, is served by the Worker (durable/src/edge/http.rs).
const HEADERS = `/*
  X-Content-Type-Options: nosniff
  Referrer-Policy: no-referrer
  Content-Security-Policy: frame-ancestors 'none'
  X-Frame-Options: DENY
`;
// Pyodide's loader names Node modules it only loads under Node; the browser bundle leaves them out.
const NODE_ONLY = ["node:*", "ws", "fs", "fs/promises", "path", "url", "crypto", "child_process", "vm"];

// Each runtime: its npm package, how its id derives from the package version, and the files the
// browser needs to load it offline. The ids are the `runtime.id` values capsules name.
const RUNTIMES = [
  {
    pkg: "@jitl/quickjs-wasmfile-release-sync",
    id: (version) => `quickjs@${version.split(".").slice(0, 2).join(".")}`,
    files: { "emscripten-module.wasm": "dist/emscripten-module.wasm" },
    runner: { entry: "runner/quickjs-worker.js", out: "runner-quickjs.js" },
  },
  {
    pkg: "pyodide",
    id: (version) => `pyodide@${version.split(".")[0]}`,
    files: Object.fromEntries(
      ["pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"].map((name) => [name, name]),
    ),
    // Bundles pyodide.mjs and pyodide.asm.mjs: the sandbox loads no script at run time.
    runner: { entry: "runner/pyodide-worker.js", out: "runner-pyodide.js" },
  },
];

export async function buildAssets({ log = console.log } = {}) {
  const started = performance.now();
  await mkdir(OUT, { recursive: true });
  await generateFromCore();
  const outputs = [await buildPolicyWasm(), await vendorEsbuildWasm(), ...(await bundle()), ...(await bundleRunners()), await writeSandboxHtml(), ...(await copyStatic())];
  await buildTestPage();
  await buildEdgeRunner();
  outputs.push(await buildEdgePyodideRunner(), await buildEdgeBuilder());
  const runtimes = {};
  for (const runtime of RUNTIMES) {
    const { id, files } = await vendorRuntime(runtime);
    const runner = await listed(runtime.runner.out, path.join(OUT, runtime.runner.out));
    // Every runner judges guest writes with the page's own rule (runner/write-rule.js).
    const policy = await listed(POLICY_WASM, path.join(OUT, POLICY_WASM));
    runtimes[id] = { files: { ...files, "runner.js": runner, [POLICY_WASM]: policy } };
  }
  await pruneVendor(Object.keys(runtimes));
  await writeIfChanged(path.join(OUT, "runtimes.json"), JSON.stringify(runtimes, null, 2) + "\n");
  await writeIfChanged(path.join(OUT, "_headers"), HEADERS);
  await pruneOutputs([...outputs, "runtimes.json", "vendor", "_headers"]);
  log(`build-assets: ${path.relative(ROOT, OUT)} ready in ${Math.round(performance.now() - started)} ms`);
  return { outDir: OUT, testDir: TEST_OUT, runtimes };
}

/**
 * Tables printed by relay-core (`relay-capsule <command>`), which the bundles import as
 * `relay-<command>`, so that the page and the Worker share one copy: the error names and exit
 * codes, the run limits a manifest without its own gets, and the fields a tab's exit event may carry.
 */
const FROM_CORE = ["error-names", "default-limits", "exit-fields", "tab-commands"];

async function generateFromCore() {
  await mkdir(GENERATED, { recursive: true });
  for (const command of FROM_CORE) {
    const table = execFileSync("cargo", ["run", "--quiet", "--bin", "relay-capsule", "--", command], { cwd: ROOT });
    await writeIfChanged(path.join(GENERATED, `${command}.json`), table.toString());
  }
}

const POLICY_WASM = "policy.wasm";
const POLICY_WASM_HASH = path.join(GENERATED, "policy-wasm.json");
const ESBUILD_WASM = "esbuild.wasm";
const ESBUILD_WASM_HASH = path.join(GENERATED, "esbuild-wasm.json");

/** Imports the bundles resolve to generated files. */
const ALIASES = {
  ...Object.fromEntries(FROM_CORE.map((command) => [`relay-${command}`, path.join(GENERATED, `${command}.json`)])),
  "relay-policy-wasm": POLICY_WASM_HASH,
  "relay-esbuild-wasm": ESBUILD_WASM_HASH,
};

/**
 * Compiles policy-wasm/ (a no-op when cargo finds it current), copies the module into OUT and
 * writes its runtimes.json-style entry `{url, integrity, size}` for the bundles to import.
 */
async function buildPolicyWasm() {
  const args = ["build", "--quiet", "--release", "--target", "wasm32-unknown-unknown", "-p", "relay-policy-wasm", "--message-format=json-render-diagnostics"];
  const messages = execFileSync("cargo", args, { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"], maxBuffer: 64 << 20 });
  const wasm = messages
    .toString()
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line))
    .filter((message) => message.reason === "compiler-artifact")
    .flatMap((message) => message.filenames)
    .find((file) => file.endsWith("/relay_policy_wasm.wasm"));
  if (!wasm) throw new Error(`cargo ${args.join(" ")} named no relay_policy_wasm.wasm`);
  await copyIfChanged(wasm, path.join(OUT, POLICY_WASM));
  await writeIfChanged(POLICY_WASM_HASH, JSON.stringify(await listed(POLICY_WASM, wasm), null, 2) + "\n");
  return POLICY_WASM;
}

/** Copies the builds' bundler and writes its `{url, integrity, size}` for build-worker.js. */
async function vendorEsbuildWasm() {
  const wasm = path.join(path.dirname(requireFromRoot.resolve("esbuild-wasm/package.json")), ESBUILD_WASM);
  await copyIfChanged(wasm, path.join(OUT, ESBUILD_WASM));
  await writeIfChanged(ESBUILD_WASM_HASH, JSON.stringify(await listed(ESBUILD_WASM, wasm), null, 2) + "\n");
  return ESBUILD_WASM;
}

/** Each bundling step returns the names of the files it wrote into OUT. */
async function bundle(entryPoints = ENTRY_POINTS, outdir = OUT) {
  return outputNames(await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: entryPoints.map((name) => path.join(SRC, name)),
    outdir,
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    sourcemap: "linked",
    alias: ALIASES,
    logLevel: "warning",
    metafile: true,
  }));
}

/** One classic-script bundle per runtime: workers from blob: URLs in the sandbox import nothing. */
async function bundleRunners() {
  return outputNames(await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: Object.fromEntries(RUNTIMES.map(({ runner }) => [runner.out.replace(/\.js$/, ""), path.join(SRC, runner.entry)])),
    outdir: OUT,
    bundle: true,
    format: "iife",
    platform: "browser",
    target: "es2022",
    external: NODE_ONLY,
    alias: ALIASES,
    // The Python helper the runner loads into Pyodide ships as text inside its runner script.
    loader: { ".py": "text" },
    // Every run's fresh worker parses its runner anew (no code cache for blob: workers): without
    // the whitespace, Pyodide's is 1.3 MB instead of 1.6 MB, and a standby's script is ready
    // in 70-83 ms instead of 85-115 ms. Names are kept, so stack traces still read.
    minifyWhitespace: true,
    logLevel: "error",
    metafile: true,
  }));
}

// The edge executor's runner (durable/js/edge-runner.js), which the Worker's main module
// (durable/js/entry.mjs) imports and hands to each run_js's dynamic Worker: one ES module, as
// text, in dist/edge/, never served (QuickJS's wasm and policy.wasm come from the page's assets).
const EDGE_OUT = path.join(ROOT, "dist", "edge");
// The edge's deps builder (durable/js/edge-build.js: the tab's build code and esbuild-wasm's
// browser API, 338 KB), which entry.mjs hands to each build's dynamic Worker: one of the page's
// static assets, read as the Pyodide runner is, so the Worker's bundle does not carry it; its
// `{url, integrity, size}` goes to dist/generated/edge-builder.json, which entry.mjs imports
// and checks the asset it reads against (an asset of another build is refused).
const EDGE_BUILDER = "edge/builder.mjs";
const EDGE_BUILDER_HASH = path.join(GENERATED, "edge-builder.json");

/** An edge module (`entry` in durable/js/) bundled as one ES module into `outfile`. */
function edgeModule(entry, outfile, external) {
  return esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: [path.join(ROOT, "durable", "js", entry)],
    outfile,
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    external: [...external, ...NODE_ONLY],
    alias: ALIASES,
    logLevel: "warning",
  });
}

async function buildEdgeRunner() {
  await mkdir(EDGE_OUT, { recursive: true });
  await edgeModule("edge-runner.js", path.join(EDGE_OUT, "runner.txt"), ["./quickjs.wasm", "./policy.wasm", "cloudflare:workers"]);
}

/** The edge's deps builder into the page's assets (its esbuild.wasm is one too): the names written. */
async function buildEdgeBuilder() {
  const outfile = path.join(OUT, EDGE_BUILDER);
  await edgeModule("edge-build.js", outfile, ["./esbuild.wasm"]);
  await writeIfChanged(EDGE_BUILDER_HASH, JSON.stringify(await listed(EDGE_BUILDER, outfile), null, 2) + "\n");
  return EDGE_BUILDER;
}

function outputNames({ metafile }) {
  return Object.keys(metafile.outputs).map((file) => path.relative(OUT, path.resolve(ROOT, file)));
}

// The edge executor's Python runner (durable/js/edge-runner-pyodide.js), which entry.mjs hands
// to each run_py's dynamic Worker as one ES module of text. It holds Pyodide's JS (1.3 MB), so
// it is one of the page's static assets, read as the runtimes' files are, and the Worker's
// bundle does not grow; Pyodide's module text is patched for the edge (pyodide-patches.mjs).
const EDGE_PYODIDE_RUNNER = "edge/runner-pyodide.mjs";

async function buildEdgePyodideRunner() {
  await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: [path.join(ROOT, "durable", "js", "edge-runner-pyodide.js")],
    outfile: path.join(OUT, EDGE_PYODIDE_RUNNER),
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    external: ["./pyodide.asm.wasm", "./policy.wasm", "./python_stdlib.zip", "./pyodide-lock.json", "./snapshot.bin", "cloudflare:workers", ...NODE_ONLY],
    alias: ALIASES,
    loader: { ".py": "text" },
    plugins: [patchPyodide()],
    minifyWhitespace: true,
    logLevel: "warning",
  });
  return path.dirname(EDGE_PYODIDE_RUNNER);
}

/** The runner test page and its bundle, into TEST_OUT only. */
async function buildTestPage() {
  await mkdir(TEST_OUT, { recursive: true });
  await bundle([`${TEST_PAGE}.js`], TEST_OUT);
  await copyIfChanged(path.join(SRC, `${TEST_PAGE}.html`), path.join(TEST_OUT, `${TEST_PAGE}.html`));
}

async function writeSandboxHtml() {
  const { outputFiles } = await esbuild.build({
    entryPoints: [path.join(SRC, SANDBOX_SCRIPT)],
    bundle: true,
    format: "iife",
    target: "es2022",
    write: false,
    logLevel: "warning",
  });
  // A script inside <script> must not close the element early.
  const script = outputFiles[0].text.replaceAll("</script", "<\\/script");
  const hash = `sha256-${createHash("sha256").update(script).digest("base64")}`;
  const template = await readFile(path.join(SRC, SANDBOX_HTML), "utf8");
  const html = template.replace("%CSP%", SANDBOX_CSP.replace("%HASH%", hash)).replace("%SCRIPT%", () => script);
  await writeIfChanged(path.join(OUT, SANDBOX_HTML), html);
  return SANDBOX_HTML;
}

async function copyStatic() {
  const deployed = (name) => name !== SANDBOX_HTML && name !== `${TEST_PAGE}.html`;
  const names = (await readdir(SRC)).filter((name) => deployed(name) && STATIC_EXTENSIONS.includes(path.extname(name)));
  for (const name of names) await copyIfChanged(path.join(SRC, name), path.join(OUT, name));
  return names;
}

/** Removes what earlier builds left in OUT that this build no longer makes, so it is not deployed. */
async function pruneOutputs(keep) {
  for (const name of await readdir(OUT)) {
    if (!keep.includes(name)) await rm(path.join(OUT, name), { recursive: true });
  }
}

async function vendorRuntime({ pkg, id, files }) {
  const pkgDir = path.dirname(requireFromRoot.resolve(`${pkg}/package.json`));
  const { version } = JSON.parse(await readFile(path.join(pkgDir, "package.json"), "utf8"));
  const runtimeId = id(version);
  const outDir = path.join(OUT, "vendor", runtimeId);
  await mkdir(outDir, { recursive: true });
  const vendored = {};
  for (const [name, from] of Object.entries(files)) {
    const source = path.join(pkgDir, from);
    await copyIfChanged(source, path.join(outDir, name));
    vendored[name] = await listed(`vendor/${runtimeId}/${name}`, source);
  }
  return { id: runtimeId, files: vendored };
}

/** A runtimes.json entry: `url` relative to runtimes.json (any base path works), SRI, size. */
async function listed(url, file) {
  const bytes = await readFile(file);
  return { url, integrity: `sha384-${createHash("sha384").update(bytes).digest("base64")}`, size: bytes.length };
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
