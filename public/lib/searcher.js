// Runs `search` tool calls in the search worker (../search-worker.js), one at a time, within a
// time limit: a search past it is stopped (its worker terminated; the next search gets a new
// one) and fails with Timeout, so a hard pattern cannot hold this tab.

import { namedError } from "./errors.js";

// Below the relay's own limit for a file tool (30 s), so the tab answers first, by name.
const SEARCH_TIMEOUT_MS = 20_000;

export class Searcher {
  /** @param workerUrl the URL of search-worker.js */
  constructor(workerUrl, timeoutMs = SEARCH_TIMEOUT_MS) {
    this.workerUrl = workerUrl;
    this.timeoutMs = timeoutMs;
    this.worker = null;
  }

  /**
   * The search's result for `request` over `files` ([[path, Uint8Array]]); throws an Error
   * named ValidationError (a refused pattern or glob), Timeout or Internal.
   */
  search(request, files) {
    this.worker ??= new Worker(this.workerUrl, { type: "module", name: "relay-search" });
    const worker = this.worker;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.stop(worker);
        const seconds = this.timeoutMs / 1000;
        reject(namedError("Timeout", `the search took longer than ${seconds} s and was stopped; narrow it with paths or filePattern, or use a simpler pattern`));
      }, this.timeoutMs);
      worker.onmessage = ({ data }) => {
        clearTimeout(timer);
        if (data.error) reject(namedError(data.error.name, data.error.message));
        else resolve(data.value);
      };
      worker.onerror = (event) => {
        clearTimeout(timer);
        this.stop(worker);
        reject(namedError("Internal", `the search worker failed: ${event.message ?? "error"}`));
      };
      worker.postMessage({ request, files });
    });
  }

  stop(worker) {
    worker.terminate();
    if (this.worker === worker) this.worker = null;
  }
}

