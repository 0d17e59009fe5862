// Builds a run's dependencies when the server sends a `build` command instead of a capsule: the
// build worker (../build-worker.js) resolves, fetches, checks and bundles them into the deps
// layer; this side then asks the Worker for an upload grant (POST /capsule/presign), uploads the
// layer under it (PUT /capsule/upload), and finalizes (POST /capsule/finalize), which signs the
// capsule and answers with the `capsule` command to run. Each phase is reported as progress.
// The server trusts none of it: it checks the upload against the grant, and the proposal
// against what was uploaded and the run's policy.

import { sha256Hex } from "./bytes.js";
import { rememberLayer } from "./capsule.js";
import { namedError } from "./errors.js";
import { fetchOk } from "./http.js";

/** How long a build worker waits for the next build before it is terminated. */
const KEEP_WARM_MS = 5 * 60_000;

export class DepsBuilder {
  /** @param workerUrl the URL of build-worker.js */
  constructor(workerUrl) {
    this.workerUrl = workerUrl;
  }

  /**
   * @param command the `build` command ({runId, language, build, sources, runToken})
   * @param progress (phase, detail) => void
   * @returns {Promise<object>} the `capsule` command's data for the built capsule
   * @throws an Error named DepsResolutionFailed (or the server's refusal) when the build fails
   */
  async build(command, progress, signal) {
    const started = performance.now();
    const { layer, resolved } = await this.inWorker(command, progress, signal);
    const claim = { id: "deps", sha256: await sha256Hex(layer), size: layer.length };
    progress("upload", `${Math.round(layer.length / 1024)} KiB`);
    const auth = { authorization: `Bearer ${command.runToken}`, "content-type": "application/json" };
    const presigned = await post("/capsule/presign", { layers: [claim] }, auth, signal);
    const [{ url, grant }] = presigned.grants;
    await fetchOk(new URL(url, location.href), { method: "PUT", headers: { authorization: `Bearer ${grant}` }, body: layer, signal });
    await rememberLayer(claim.sha256, layer);
    progress("finalize", `${resolved.length} packages in ${Math.round(performance.now() - started)} ms`);
    return post("/capsule/finalize", { layers: [claim], resolved }, auth, signal);
  }

  /**
   * A build in a build worker: the one kept from the last build if it is idle (esbuild-wasm
   * started in it already, which is about a second of a cold build), else a new one. A worker
   * that fails or is cancelled is terminated, never reused.
   */
  inWorker(command, progress, signal) {
    const worker = this.idle ?? new Worker(this.workerUrl, { type: "module", name: "relay-build" });
    this.idle = null;
    clearTimeout(this.idleTimer);
    return new Promise((resolve, reject) => {
      const stop = (fn, value, keep = false) => {
        signal?.removeEventListener("abort", abort);
        if (keep) this.keep(worker);
        else worker.terminate();
        fn(value);
      };
      const abort = () => stop(reject, namedError("AbortError", "the run was cancelled during its build"));
      signal?.addEventListener("abort", abort);
      worker.onmessage = ({ data }) => {
        if (data.progress) progress(data.progress.phase, data.progress.detail);
        else if (data.error) stop(reject, namedError(data.error.name, data.error.message));
        else stop(resolve, data, true);
      };
      worker.onerror = (event) => stop(reject, namedError("DepsResolutionFailed", `the build worker failed: ${event.message}`));
      const { language, build, sources, runToken } = command;
      worker.postMessage({ language, build, sources, runToken });
    });
  }

  /** Keeps `worker` for the next build for KEEP_WARM_MS, then lets its memory go. */
  keep(worker) {
    if (this.idle) return worker.terminate();
    this.idle = worker;
    this.idleTimer = setTimeout(() => {
      this.idle?.terminate();
      this.idle = null;
    }, KEEP_WARM_MS);
  }
}

async function post(path, body, headers, signal) {
  const res = await fetchOk(new URL(path, location.href), { method: "POST", headers, body: JSON.stringify(body), signal });
  return res.json();
}
