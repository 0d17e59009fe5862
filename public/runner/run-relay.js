// What a run sends the page besides its output, over the run's private port (see serve.js for
// the protocol): each change to a workspace file as it happens (write-through: the page stores
// it before it kills the worker, whatever ends the run), guest fetches, which the page
// answers (or denies) by its policy, and the writes the policy refused (for the audit). Engines call it; guest code never holds it.

// Guest fetches that may wait for an answer at once: the page answers one more with an error
// (lib/runner-host.js), and QuickJS's runner throws it in the guest before sending it.
export const MAX_FETCHES_IN_FLIGHT = 16;

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

  /**
   * The guest displayed `data` (a string of `mimeType`, or bytes): bytes are sent as the image
   * their first bytes say they are (PNG, JPEG, GIF, WebP), else as application/octet-stream,
   * which the page refuses to show.
   */
  display(mimeType, data) {
    const type = typeof data === "string" ? mimeType : sniffImage(data) ?? "application/octet-stream";
    this.send({ type: "display", mimeType: type, data });
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

/** The image type `bytes` begin like, if any. */
function sniffImage(bytes) {
  const starts = (...magic) => magic.every((byte, i) => byte === null || bytes[i] === byte);
  if (starts(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "image/png";
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg";
  if (starts(0x47, 0x49, 0x46, 0x38)) return "image/gif";
  if (starts(0x52, 0x49, 0x46, 0x46, null, null, null, null, 0x57, 0x45, 0x42, 0x50)) return "image/webp";
  return undefined;
}
