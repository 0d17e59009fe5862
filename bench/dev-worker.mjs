// A bench Worker of its own (a directory with a wrangler.toml) under `wrangler dev` on `port`,
// for the experiments outside the product (bench/edge-pyodide*.mjs, bench/edge-esbuild.mjs):
// its dynamic workers' main module bundled, the server started, and its liveness polled.
// Ready once GET /ready answers `ready`, so another server on the port is not taken for it.

import { spawn } from "node:child_process";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import * as esbuild from "esbuild";

/**
 * `<dir>/guest.js` bundled into `<dir>/build/guest.txt` (a text module the host Worker passes to
 * LOADER.load as the dynamic worker's main module); `options` add to esbuild's.
 */
export async function bundleGuest(dir, options) {
  await mkdir(path.join(dir, "build"), { recursive: true });
  await esbuild.build({
    absWorkingDir: path.resolve(dir, "../.."),
    entryPoints: [path.join(dir, "guest.js")],
    outfile: path.join(dir, "build", "guest.txt"),
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    logLevel: "warning",
    ...options,
  });
}

/** Starts it: {url, stop}; throws if it does not answer within two minutes. */
export async function startWorker({ dir, port, ready, portVariable }) {
  const child = spawn("wrangler", ["dev", "--ip", "127.0.0.1", "--port", String(port), "--log-level", "error", "--show-interactive-dev-session=false"], { cwd: dir, stdio: ["ignore", "inherit", "inherit"], detached: true });
  const url = `http://127.0.0.1:${port}`;
  // wrangler may have exited already (a taken port): then there is nothing to stop.
  const stop = () => child.exitCode === null && process.kill(-child.pid, "SIGKILL");
  const answers = () => fetch(`${url}/ready`).then((r) => r.text(), () => "").then((text) => text === ready);
  for (let i = 0; i < 480; i++) {
    if (await answers()) return { url, stop };
    await new Promise((r) => setTimeout(r, 250));
  }
  stop();
  throw new Error(`${dir} did not start on port ${port}: is the port taken? (${portVariable})`);
}

/**
 * GET /ready every 25 ms until `done.value`: the slowest answer in ms (Infinity: none within a
 * minute). workerd runs a dynamic worker's guest on the thread that answers it, so this says
 * how long a busy guest holds the whole server.
 */
export async function pollReady(url, done) {
  let slowest = 0;
  while (!done.value) {
    const t0 = performance.now();
    const answered = await fetch(`${url}/ready`, { signal: AbortSignal.timeout(60_000) }).then((r) => r.text(), () => null);
    if (answered === null) return Infinity;
    slowest = Math.max(slowest, performance.now() - t0);
    await new Promise((r) => setTimeout(r, 25));
  }
  return slowest;
}
