// What a run sends the page besides its output, over the run's private port (see serve.js for
// the protocol): each change to a workspace file as it happens (write-through: the page stores
// it before it kills the worker, whatever ends the run), guest fetches, which the page
// answers (or denies) by its policy, and the writes the policy refused (for the audit). Engines call it; guest code never holds it.

export class RunRelay {
  /** @param send the port's postMessage, bound */
  constructor(send) {
    this.send = send;
    this.pending = new Map(); // fetch id -> {resolve, reject}
    this.nextId = 1;
  }

  /** The file at `path` now holds `bytes` (its whole contents). */
  fileWritten(path, bytes) {
    this.send({ type: "file", op: "write", path, data: bytes });
  }

  fileRemoved(path) {
    this.send({ type: "file", op: "remove", path });
  }

  /** The run's policy refused guest code `what` (`write`) of `target`, for the audit. */
  denied(what, target, reason) {
    this.send({ type: "denied", what, target, reason });
  }

  /** How many fetches wait for the page's answer. */
  get fetching() {
    return this.pending.size;
  }

  /**
   * Asks the page to fetch `request` ({url, method, headers: [[name, value]], body?: Uint8Array}).
   * @returns {Promise<{status, statusText, url, headers, body: ArrayBuffer}>}, rejecting with an
   *   Error named as the page's answer (PolicyDenied for a denial)
   */
  fetch(request) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.send({ type: "fetch", id, request });
    });
  }

  /** A `fetched` message from the page. */
  answer({ id, response, error }) {
    const waiter = this.pending.get(id);
    if (!waiter) return;
    this.pending.delete(id);
    if (error) waiter.reject(Object.assign(new Error(String(error.message)), { name: String(error.name) }));
    else waiter.resolve(response);
  }
}
