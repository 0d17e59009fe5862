// Builds a run's dependencies when the server sends a `build` command instead of a capsule: the
// build worker (../build-worker.js) resolves, fetches, checks and bundles them into the deps
// layer; this side then publishes it as a build at the edge does (packages/publish.js: upload
// grant, upload, finalize), which answers with the `capsule` command to run. Each phase is
// reported as progress. The server trusts none of it: it checks the upload against the grant,
// and the proposal against what was uploaded and the run's policy.

import { rememberLayer } from "./capsule.js";
import { namedError } from "./errors.js";
import { fetchOk } from "./http.js";
import { publishLayer } from "./packages/publish.js";

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
    const { layer, resolved } = await this.inWorker(command, progress, signal);
    const send = (path, init) =>
      fetchOk(new URL(path, location.href), { ...init, headers: { authorization: `Bearer ${command.runToken}`, ...init.headers }, signal });
    const { sha256, announced } = await publishLayer(layer, resolved, send, progress);
    await rememberLayer(sha256, layer);
    return announced;
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
