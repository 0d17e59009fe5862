// What the edge-pyodide benches share: building bench/edge-pyodide/build/ (guest.js bundled
// with Pyodide's JS, patched as limits.js says; Pyodide's wasm, stdlib and lock file copied as
// module files) and one timed request.

import { copyFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { PYODIDE_PATCHES as PATCHES, patchPyodide } from "../../scripts/pyodide-patches.mjs";
import { bundleGuest } from "../dev-worker.mjs";

export const DIR = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(DIR, "../..");
const BUILD = path.join(DIR, "build");
const PYODIDE = path.join(ROOT, "node_modules/pyodide");
export const READY = "edge-pyodide"; // what the Worker answers to GET /ready

/**
 * Builds build/. Experiments (docs/BENCHMARKS.md): `noMessageChannel` hides MessageChannel
 * before Pyodide evaluates, so Pyodide schedules its zero-delay callbacks with setTimeout
 * instead of a shared channel; `asyncCompile` leaves pyodide.mjs's asynchronous compile as it is.
 */
export async function build({ noMessageChannel = false, asyncCompile = false } = {}) {
  const patches = asyncCompile ? { ...PATCHES, "pyodide.mjs": [] } : PATCHES;
  await bundleGuest(DIR, {
    external: ["./pyodide.asm.wasm", "./python_stdlib.zip", "./pyodide-lock.json", "./snapshot.bin", "node:*", "ws", "fs", "fs/promises", "path", "url", "crypto", "child_process", "vm"],
    plugins: [patchPyodide(patches)],
    banner: noMessageChannel ? { js: "globalThis.MessageChannel = undefined;" } : {},
  });
  // Named for wrangler's default module rules: .bin is a data module, .txt a text one.
  for (const [from, to] of [["pyodide.asm.wasm", "pyodide.asm.wasm.bin"], ["python_stdlib.zip", "python_stdlib.zip.bin"], ["pyodide-lock.json", "pyodide-lock.json.txt"]]) {
    await copyFile(path.join(PYODIDE, from), path.join(BUILD, to));
  }
}

/** One POST, timed from here: {ms, body}; a failure throws with the guest's error. */
export async function timed(url, body) {
  const t0 = performance.now();
  const res = await fetch(url, { method: "POST", body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  const ms = performance.now() - t0;
  if (!res.ok) throw new Error(`${url}: ${res.status} ${text}`);
  return { ms, body: JSON.parse(text) };
}
